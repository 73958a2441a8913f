//! OAuth 2.1 for remote (HTTP) servers, through rmcp's `auth` module (decision T127): the
//! tokens kept in the user's agent folder ([`AuthFile`], `mcp-auth.json`, one entry per server
//! name, used only for the URL it was granted for), the login flow ([`start_login`]: the
//! authorization server found from the resource's metadata, dynamic client registration or a
//! pre-registered client id, authorization code with PKCE through the user's browser and a
//! redirect listener on 127.0.0.1), and the authorized client a connection uses
//! ([`streamable_client`], [`bearer_token`]), which refreshes an expired access token and
//! stores the new one.
//!
//! Tokens never leave this module except inside an HTTP request: no error, tracing line or
//! `Debug` output here carries one (rmcp's own types print them as `[redacted]`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    AuthorizationRequest, AuthorizationSession, CredentialRefreshGuard, CredentialStore,
    StoredCredentials,
};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::config::HttpConfig;

/// The file in the agent folder that holds the servers' tokens.
pub const AUTH_FILE: &str = "mcp-auth.json";
/// Taken (`flock`) around every change of [`AUTH_FILE`], and through a token refresh: two tau
/// processes refreshing one server's token at once would otherwise each spend the same
/// refresh token, and the second would lose the authorization.
const LOCK_FILE: &str = "mcp-auth.json.lock";
/// The path of the local redirect listener.
pub const CALLBACK_PATH: &str = "/callback";
/// How long a login waits for the browser (or a pasted URL) before giving up.
pub const LOGIN_WAIT: Duration = Duration::from_secs(600);
/// The most of a request the redirect listener reads: a redirect is one line of query.
const MAX_REQUEST: usize = 16 * 1024;
/// How long one connection to the listener may take to send its request.
const REQUEST_WAIT: Duration = Duration::from_secs(10);
/// How long the login's probe of the server may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why an OAuth step failed. No variant carries a token.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("cannot read {}: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
    #[error("{} is damaged ({reason}); remove it and run `tau mcp login` again", path.display())]
    Damaged { path: PathBuf, reason: String },
    #[error("cannot write {}: {reason}", path.display())]
    Write { path: PathBuf, reason: String },
    #[error("MCP server \"{0}\" is not reached by URL: OAuth is for HTTP servers")]
    NotHttp(String),
    #[error(
        "MCP server \"{0}\" sends an Authorization header of its own (\"headers\"); remove it \
         from the entry to use OAuth"
    )]
    StaticAuthorization(String),
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{0} neither asks for authorization nor publishes OAuth metadata: it needs no login")]
    NoAuthorization(String),
    #[error("{0}")]
    Flow(String),
    #[error("the authorization was refused: {0}")]
    Denied(String),
    #[error("the redirected address does not belong to this login (its state differs)")]
    StateMismatch,
    #[error("not a redirected address: {0}")]
    BadRedirect(String),
    #[error("cannot listen for the browser's redirect on 127.0.0.1: {0}")]
    Listener(String),
    #[error("no authorization arrived within {} minutes", .0.as_secs() / 60)]
    TimedOut(Duration),
}

fn flow(error: AuthError) -> OAuthError {
    OAuthError::Flow(error.to_string())
}

/// The failure message of a server that answered 401 and has no usable tokens.
pub fn needs_login(server: &str) -> String {
    format!("needs authorization: run `tau mcp login {server}`")
}

/// Whether the entry sends an `Authorization` header of its own: it then wins, and OAuth is
/// not used for the server at all.
pub fn has_static_authorization(http: &HttpConfig) -> bool {
    http.headers
        .keys()
        .any(|name| name.eq_ignore_ascii_case("authorization"))
}

/// An access token, to put into an `Authorization: Bearer` header. Its `Debug` hides it.
#[derive(Clone)]
pub struct BearerToken(String);

impl BearerToken {
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken([redacted])")
    }
}

/// One server's stored authorization. (`StoredCredentials` debugs its tokens redacted.)
#[derive(Debug, Clone)]
struct Entry {
    /// The URL the tokens were granted for: another URL under the same name gets none of them.
    url: String,
    credentials: StoredCredentials,
    /// The authorization server's metadata as the login found it: a connection refreshes
    /// with it without discovering it again.
    metadata: AuthorizationMetadata,
}

impl Entry {
    fn to_value(&self) -> Result<Value, String> {
        let credentials = serde_json::to_value(&self.credentials).map_err(|e| e.to_string())?;
        let metadata = serde_json::to_value(&self.metadata).map_err(|e| e.to_string())?;
        Ok(json!({"url": self.url, "credentials": credentials, "metadata": metadata}))
    }

    /// `None` for an entry of another shape. serde's messages are not kept: they may quote
    /// the value they refused, which may be a token.
    fn from_value(value: &Value) -> Option<Self> {
        Some(Self {
            url: value.get("url")?.as_str()?.to_string(),
            credentials: serde_json::from_value(value.get("credentials")?.clone()).ok()?,
            metadata: serde_json::from_value(value.get("metadata")?.clone()).ok()?,
        })
    }
}

/// `mcp-auth.json` in an agent folder: `{"version": 1, "servers": {"<name>": {"url": …,
/// "credentials": …, "metadata": …}}}`. Read bounded; written whole to a temporary file of
/// mode 0600 that then replaces it, under a lock.
#[derive(Debug, Clone)]
pub struct AuthFile {
    path: PathBuf,
    lock: PathBuf,
}

impl AuthFile {
    /// The file of the agent folder `agent_dir`.
    pub fn in_dir(agent_dir: &Path) -> Self {
        Self {
            path: agent_dir.join(AUTH_FILE),
            lock: agent_dir.join(LOCK_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The servers' entries; none when there is no file.
    fn read(&self) -> Result<Map<String, Value>, OAuthError> {
        let text =
            match tau_base::bounded::read_to_string(&self.path, tau_base::bounded::CONFIG_CAP) {
                Ok(text) => text,
                Err(tau_base::bounded::BoundedReadError::NotFound) => return Ok(Map::new()),
                Err(error) => {
                    return Err(OAuthError::Read {
                        path: self.path.clone(),
                        reason: error.to_string(),
                    });
                }
            };
        let damaged = |reason: String| OAuthError::Damaged {
            path: self.path.clone(),
            reason,
        };
        // serde_json's syntax errors name a line and column, never the text.
        let document: Value =
            serde_json::from_str(&text).map_err(|error| damaged(error.to_string()))?;
        match document.get("servers") {
            Some(Value::Object(servers)) => Ok(servers.clone()),
            None if document.is_object() => Ok(Map::new()),
            _ => Err(damaged("\"servers\" is not an object".to_string())),
        }
    }

    /// The authorization stored for `server` at `url`. An entry that cannot be read is an
    /// error; one for another URL is none.
    fn entry(&self, server: &str, url: &str) -> Result<Option<Entry>, OAuthError> {
        let servers = self.read()?;
        let Some(value) = servers.get(server) else {
            return Ok(None);
        };
        let entry = Entry::from_value(value).ok_or_else(|| OAuthError::Damaged {
            path: self.path.clone(),
            reason: format!("the entry of \"{server}\" is not valid"),
        })?;
        Ok((entry.url == url).then_some(entry))
    }

    /// Whether anything is stored for `server`.
    pub fn contains(&self, server: &str) -> Result<bool, OAuthError> {
        Ok(self.read()?.contains_key(server))
    }

    /// Forgets `server`'s tokens; whether there were any.
    pub fn remove(&self, server: &str) -> Result<bool, OAuthError> {
        let _lock = self.lock()?;
        let mut servers = self.read()?;
        let removed = servers.remove(server).is_some();
        if removed {
            self.write(servers)?;
        }
        Ok(removed)
    }

    /// Puts `entry` under `server`, the rest of the file as it is. `locked` when the caller
    /// holds the lock already (a refresh).
    fn store(&self, server: &str, entry: &Entry, locked: bool) -> Result<(), OAuthError> {
        let value = entry.to_value().map_err(|reason| OAuthError::Write {
            path: self.path.clone(),
            reason,
        })?;
        let _lock = if locked { None } else { Some(self.lock()?) };
        let mut servers = self.read()?;
        servers.insert(server.to_string(), value);
        self.write(servers)
    }

    fn write(&self, servers: Map<String, Value>) -> Result<(), OAuthError> {
        use std::io::Write as _;
        let failed = |error: std::io::Error| OAuthError::Write {
            path: self.path.clone(),
            reason: error.to_string(),
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(failed)?;
        let document = json!({"version": 1, "servers": servers});
        let mut text =
            serde_json::to_string_pretty(&document).map_err(|error| OAuthError::Write {
                path: self.path.clone(),
                reason: error.to_string(),
            })?;
        text.push('\n');
        // A temporary file beside the real one (created 0600), renamed over it: a reader
        // never sees half a file, and the tokens are never readable by others, not even for
        // a moment.
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(failed)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            file.as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(failed)?;
        }
        file.write_all(text.as_bytes()).map_err(failed)?;
        file.as_file().sync_all().map_err(failed)?;
        file.persist(&self.path)
            .map_err(|error| failed(error.error))?;
        Ok(())
    }

    /// Waits for the file's lock (blocking).
    fn lock(&self) -> Result<FileLock, OAuthError> {
        let failed = |error: std::io::Error| OAuthError::Write {
            path: self.lock.clone(),
            reason: error.to_string(),
        };
        if let Some(dir) = self.lock.parent() {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(false).write(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&self.lock).map_err(failed)?;
        #[cfg(unix)]
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|error| failed(error.into()))?;
        Ok(FileLock { _file: file })
    }
}

/// Held while the file's lock is taken; closing the file releases it.
struct FileLock {
    _file: std::fs::File,
}

/// rmcp's credential store for one server: the entry of [`AuthFile`], kept in memory between
/// reads (the manager loads the credentials before every request), read again from the file
/// when a refresh starts, so that tokens another tau process refreshed meanwhile are the ones
/// refreshed.
#[derive(Clone)]
struct EntryStore {
    file: AuthFile,
    server: String,
    url: String,
    metadata: AuthorizationMetadata,
    cached: Arc<Mutex<Option<StoredCredentials>>>,
    /// Set while a refresh holds the file's lock: saving then must not take it again.
    refreshing: Arc<AtomicBool>,
}

impl EntryStore {
    fn cache(&self) -> std::sync::MutexGuard<'_, Option<StoredCredentials>> {
        self.cached.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn store_error(error: OAuthError) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, OAuthError> + Send + 'static,
) -> Result<T, AuthError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| AuthError::CredentialStoreError(error.to_string()))?
        .map_err(store_error)
}

/// Releases the file's lock and the store's flag when rmcp ends a refresh.
struct RefreshGuard {
    _lock: FileLock,
    refreshing: Arc<AtomicBool>,
}

impl Drop for RefreshGuard {
    fn drop(&mut self) {
        self.refreshing.store(false, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl CredentialStore for EntryStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        if self.refreshing.load(Ordering::SeqCst) {
            let (file, server, url) = (self.file.clone(), self.server.clone(), self.url.clone());
            let entry = blocking(move || file.entry(&server, &url)).await?;
            let credentials = entry.map(|entry| entry.credentials);
            *self.cache() = credentials.clone();
            return Ok(credentials);
        }
        Ok(self.cache().clone())
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let entry = Entry {
            url: self.url.clone(),
            credentials: credentials.clone(),
            metadata: self.metadata.clone(),
        };
        let locked = self.refreshing.load(Ordering::SeqCst);
        let (file, server) = (self.file.clone(), self.server.clone());
        blocking(move || file.store(&server, &entry, locked)).await?;
        *self.cache() = Some(credentials);
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        *self.cache() = None;
        let (file, server) = (self.file.clone(), self.server.clone());
        blocking(move || file.remove(&server).map(|_| ())).await
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let file = self.file.clone();
        let lock = blocking(move || file.lock()).await?;
        self.refreshing.store(true, Ordering::SeqCst);
        Ok(Some(CredentialRefreshGuard::new(RefreshGuard {
            _lock: lock,
            refreshing: self.refreshing.clone(),
        })))
    }
}

/// reqwest's client for a server's MCP requests, as rmcp builds its own (no idle pool, which
/// stalls on Linux), but following a redirect only to the same origin: the bearer token goes
/// to the server it was granted for and nowhere else.
fn http_client() -> Result<reqwest::Client, OAuthError> {
    crate::connection::install_crypto_provider();
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if same_origin && attempt.previous().len() <= 10 {
                attempt.follow()
            } else {
                attempt.stop()
            }
        }))
        .build()
        .map_err(|error| OAuthError::Flow(format!("cannot build an HTTP client: {error}")))
}

/// An authorization manager for `http.url`, its client the one the entry was granted for and
/// its credentials the entry's, without discovery (the entry keeps the metadata).
async fn stored_manager(
    server: &str,
    http: &HttpConfig,
    file: AuthFile,
    entry: Entry,
) -> Result<AuthorizationManager, OAuthError> {
    crate::connection::install_crypto_provider();
    // Private addresses are allowed: the user named this server, and company servers and
    // their single sign-on often live on one.
    let mut manager = AuthorizationManager::new_allowing_private_addresses(http.url.as_str())
        .await
        .map_err(flow)?;
    manager.set_metadata(entry.metadata.clone());
    let client_id = entry.credentials.client_id.clone();
    manager.set_credential_store(EntryStore {
        file,
        server: server.to_string(),
        url: http.url.clone(),
        metadata: entry.metadata,
        cached: Arc::new(Mutex::new(Some(entry.credentials))),
        refreshing: Arc::new(AtomicBool::new(false)),
    });
    manager.configure_client_id(&client_id).map_err(flow)?;
    Ok(manager)
}

/// The stored authorization of `server` that applies to `http`: none when the entry sends
/// its own `Authorization` header or no login was made for this URL.
fn applicable(
    server: &str,
    http: &HttpConfig,
    agent_dir: &Path,
) -> Result<Option<(AuthFile, Entry)>, OAuthError> {
    if has_static_authorization(http) {
        return Ok(None);
    }
    let file = AuthFile::in_dir(agent_dir);
    Ok(file.entry(server, &http.url)?.map(|entry| (file, entry)))
}

/// The HTTP client for `server`'s Streamable HTTP transport when a login stored tokens for
/// it: rmcp's `AuthClient`, which puts the access token on every request, refreshes an
/// expired one (saving the new tokens here) and refreshes once more when the server refuses
/// one. `None` when OAuth does not apply ([`has_static_authorization`], no login).
pub async fn streamable_client(
    server: &str,
    http: &HttpConfig,
    agent_dir: &Path,
) -> Result<Option<AuthClient<reqwest::Client>>, OAuthError> {
    let Some((file, entry)) = applicable(server, http, agent_dir)? else {
        return Ok(None);
    };
    let manager = stored_manager(server, http, file, entry).await?;
    Ok(Some(AuthClient::new(http_client()?, manager)))
}

/// The access token for `server`, refreshed (and stored) when it has expired, for a
/// transport that sets its own header. `None` when OAuth does not apply or the stored
/// authorization can no longer be used (the server's 401 then says to log in again).
pub async fn bearer_token(
    server: &str,
    http: &HttpConfig,
    agent_dir: &Path,
) -> Result<Option<BearerToken>, OAuthError> {
    let Some((file, entry)) = applicable(server, http, agent_dir)? else {
        return Ok(None);
    };
    let manager = stored_manager(server, http, file, entry).await?;
    match manager.get_access_token().await {
        Ok(token) => Ok(Some(BearerToken(token))),
        Err(AuthError::AuthorizationRequired) => Ok(None),
        Err(error) => Err(flow(error)),
    }
}

/// `http` with `Authorization: Bearer <token>` added from `server`'s stored tokens
/// ([`bearer_token`]), for a transport that sends the entry's headers itself (HTTP+SSE); as
/// it is when OAuth does not apply or the tokens cannot be used (its 401 then tells).
pub async fn with_bearer<'a>(
    server: &str,
    http: &'a HttpConfig,
    agent_dir: Option<&Path>,
) -> std::borrow::Cow<'a, HttpConfig> {
    let Some(agent_dir) = agent_dir else {
        return std::borrow::Cow::Borrowed(http);
    };
    match bearer_token(server, http, agent_dir).await {
        Ok(Some(token)) => {
            let mut authorized = http.clone();
            authorized.headers.insert(
                "Authorization".to_string(),
                format!("Bearer {}", token.secret()),
            );
            std::borrow::Cow::Owned(authorized)
        }
        Ok(None) => std::borrow::Cow::Borrowed(http),
        Err(error) => {
            tracing::warn!(server, "MCP OAuth: {error}");
            std::borrow::Cow::Borrowed(http)
        }
    }
}

/// What a login needs.
#[derive(Debug, Clone, Copy)]
pub struct LoginOptions<'a> {
    pub server: &'a str,
    pub http: &'a HttpConfig,
    pub agent_dir: &'a Path,
    /// The name registered with the authorization server.
    pub client_name: &'a str,
}

/// A login under way: the address to open in a browser, and the listener its redirect comes
/// back to.
pub struct Login {
    session: AuthorizationSession,
    listener: TcpListener,
    url: String,
    state: String,
    redirect_uri: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// Starts a login for an HTTP server: asks the server (its 401 names its metadata),
/// discovers the authorization server (RFC 9728 protected resource metadata, then RFC 8414),
/// registers tau as a client (RFC 7591) unless the entry names `oauth.clientId`, opens the
/// redirect listener on 127.0.0.1 (a port of the system's choosing) and builds the
/// authorization address with PKCE (S256) and a fresh `state`.
pub async fn start_login(options: LoginOptions<'_>) -> Result<Login, OAuthError> {
    let LoginOptions {
        server,
        http,
        agent_dir,
        client_name,
    } = options;
    if has_static_authorization(http) {
        return Err(OAuthError::StaticAuthorization(server.to_string()));
    }
    let file = AuthFile::in_dir(agent_dir);
    // A damaged file would be lost by the login's write: say so before the browser opens.
    file.read()?;
    let challenge = probe(http).await?;
    crate::connection::install_crypto_provider();
    let mut manager = AuthorizationManager::new_allowing_private_addresses(http.url.as_str())
        .await
        .map_err(flow)?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(flow)?;
    // Endpoints guessed from the URL are worth trying only for a server that asked.
    if !resolution.source.is_discovered() && challenge.is_none() {
        return Err(OAuthError::NoAuthorization(http.url.clone()));
    }
    manager.set_metadata(resolution.metadata.clone());
    manager.set_credential_store(EntryStore {
        file,
        server: server.to_string(),
        url: http.url.clone(),
        metadata: resolution.metadata,
        cached: Arc::default(),
        refreshing: Arc::new(AtomicBool::new(false)),
    });
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|error| OAuthError::Listener(error.to_string()))?;
    let port = listener
        .local_addr()
        .map_err(|error| OAuthError::Listener(error.to_string()))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
    let mut request = AuthorizationRequest::new(redirect_uri.clone()).with_client_name(client_name);
    if let Some(client_id) = &http.oauth_client_id {
        request = request.with_preregistered_client(client_id.clone());
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, error)| flow(error))?;
    let url = session.get_authorization_url().to_string();
    let state = url::Url::parse(&url)
        .ok()
        .and_then(|url| {
            url.query_pairs()
                .find(|(key, _)| key == "state")
                .map(|(_, value)| value.into_owned())
        })
        .ok_or_else(|| OAuthError::Flow("the authorization address has no state".into()))?;
    Ok(Login {
        session,
        listener,
        url,
        state,
        redirect_uri,
    })
}

/// One unauthenticated `initialize` to the server: the `WWW-Authenticate` of its 401 (which
/// names its metadata), or `None` when it answered otherwise.
async fn probe(http: &HttpConfig) -> Result<Option<String>, OAuthError> {
    let client = http_client()?;
    let mut request = client
        .post(http.url.as_str())
        .timeout(PROBE_TIMEOUT)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "tau", "version": env!("CARGO_PKG_VERSION")}}})
            .to_string(),
        );
    for (name, value) in &http.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request
        .send()
        .await
        .map_err(|error| OAuthError::Unreachable {
            url: http.url.clone(),
            // Without the URL reqwest would repeat: it is given once already.
            reason: error.without_url().to_string(),
        })?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Ok(None);
    }
    Ok(Some(
        response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_string(),
    ))
}

impl Login {
    /// The address the user opens to authorize tau.
    pub fn authorization_url(&self) -> &str {
        &self.url
    }

    /// Where the browser is sent back to (the local listener).
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Waits for the browser's redirect to the listener and answers it with a page saying
    /// how it went; the redirected address. Requests for other paths or with another `state`
    /// are answered and ignored (a page or program on this machine cannot end the login).
    pub async fn wait_for_redirect(&self) -> Result<String, OAuthError> {
        loop {
            let (stream, _) = self
                .listener
                .accept()
                .await
                .map_err(|error| OAuthError::Listener(error.to_string()))?;
            match tokio::time::timeout(REQUEST_WAIT, self.answer(stream)).await {
                Ok(Some(outcome)) => return outcome,
                Ok(None) | Err(_) => continue,
            }
        }
    }

    /// Reads one request; `Some` once it is this login's redirect.
    async fn answer(&self, mut stream: TcpStream) -> Option<Result<String, OAuthError>> {
        let target = read_request_target(&mut stream).await?;
        let address = format!("http://127.0.0.1{target}");
        let parsed = url::Url::parse(&address).ok();
        let Some(parsed) = parsed.filter(|url| url.path() == CALLBACK_PATH) else {
            respond(&mut stream, "404 Not Found", "Not found.").await;
            return None;
        };
        let param = |name: &str| {
            parsed
                .query_pairs()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.into_owned())
        };
        if param("state").as_deref() != Some(self.state.as_str()) {
            respond(
                &mut stream,
                "400 Bad Request",
                "This is not the redirect of tau's login (its state differs).",
            )
            .await;
            return None;
        }
        let outcome = redirect_error(&parsed);
        let page = match &outcome {
            Some(error) => format!("tau was not authorized: {error}"),
            None => "tau is authorized. You can close this tab.".to_string(),
        };
        respond(&mut stream, "200 OK", &page).await;
        Some(match outcome {
            Some(error) => Err(error),
            None => Ok(parsed.to_string()),
        })
    }

    /// Checks a redirected address (from the listener, or pasted by the user; its query
    /// alone will do): this login's `state`, no refusal, a code. The address, whole.
    pub fn check_redirect(&self, redirect: &str) -> Result<String, OAuthError> {
        let redirect = redirect.trim();
        let address = if redirect.starts_with("http://") || redirect.starts_with("https://") {
            redirect.to_string()
        } else {
            format!(
                "{}?{}",
                self.redirect_uri,
                redirect.trim_start_matches(['?', '/'])
            )
        };
        let parsed = url::Url::parse(&address)
            .map_err(|_| OAuthError::BadRedirect("it is not an address".into()))?;
        let state = parsed
            .query_pairs()
            .find(|(key, _)| key == "state")
            .map(|(_, value)| value.into_owned());
        if state.as_deref() != Some(self.state.as_str()) {
            return Err(OAuthError::StateMismatch);
        }
        if let Some(error) = redirect_error(&parsed) {
            return Err(error);
        }
        AuthorizationCallback::from_redirect_url(parsed.as_str())
            .map_err(|_| OAuthError::BadRedirect("it has no code".into()))?;
        Ok(parsed.to_string())
    }

    /// Exchanges the code of `redirect` ([`Login::check_redirect`]) for tokens, and stores
    /// them.
    pub async fn finish(self, redirect: &str) -> Result<(), OAuthError> {
        let redirect = self.check_redirect(redirect)?;
        let callback = AuthorizationCallback::from_redirect_url(&redirect)
            .map_err(|_| OAuthError::BadRedirect("it has no code".into()))?;
        self.session
            .handle_callback_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(flow)?;
        Ok(())
    }
}

/// The refusal a redirect carries (`error`, `error_description`), if it carries one.
fn redirect_error(url: &url::Url) -> Option<OAuthError> {
    let param = |name: &str| {
        url.query_pairs()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    let error = param("error")?;
    Some(OAuthError::Denied(match param("error_description") {
        Some(description) => format!("{error}: {description}"),
        None => error,
    }))
}

/// The target of an HTTP request's first line (`/callback?code=…`); `None` for anything that
/// is not a GET of at most [`MAX_REQUEST`] bytes.
async fn read_request_target(stream: &mut TcpStream) -> Option<String> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    while !buffer.windows(4).any(|window| window == b"\r\n\r\n") {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 || buffer.len() + read > MAX_REQUEST {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let head = String::from_utf8_lossy(&buffer);
    let mut words = head.lines().next()?.split(' ');
    match (words.next(), words.next()) {
        (Some("GET"), Some(target)) if target.starts_with('/') => Some(target.to_string()),
        _ => None,
    }
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>tau</title><p>{}</p>\n",
        text.replace('&', "&amp;").replace('<', "&lt;")
    );
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // The browser may be gone already; the login's outcome does not depend on the page.
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::HttpTransport;

    fn credentials(token: &str) -> StoredCredentials {
        let response: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(json!({
            "access_token": token, "token_type": "Bearer", "expires_in": 60,
            "refresh_token": "refresh-secret"
        }))
        .unwrap();
        StoredCredentials::new("client-1".into(), Some(response), vec![], Some(1))
    }

    fn entry(url: &str, token: &str) -> Entry {
        Entry {
            url: url.to_string(),
            credentials: credentials(token),
            metadata: serde_json::from_value(json!({
                "authorization_endpoint": "http://127.0.0.1:1/authorize",
                "token_endpoint": "http://127.0.0.1:1/token"
            }))
            .unwrap(),
        }
    }

    fn access_token(entry: &Entry) -> String {
        let value = serde_json::to_value(&entry.credentials).unwrap();
        value["token_response"]["access_token"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn http(url: &str, headers: &[(&str, &str)]) -> HttpConfig {
        HttpConfig {
            url: url.into(),
            headers: headers
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect::<BTreeMap<_, _>>(),
            transport: HttpTransport::StreamableHttp,
            oauth_client_id: None,
        }
    }

    #[test]
    fn entries_round_trip_keyed_by_name_and_url_in_a_file_of_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let file = AuthFile::in_dir(&dir.path().join("agent"));
        assert!(file.entry("srv", "http://a/mcp").unwrap().is_none());
        file.store("srv", &entry("http://a/mcp", "access-one"), false)
            .unwrap();
        file.store("other", &entry("http://b/mcp", "access-two"), false)
            .unwrap();
        let read = file.entry("srv", "http://a/mcp").unwrap().unwrap();
        assert_eq!(access_token(&read), "access-one");
        assert_eq!(read.credentials.client_id, "client-1");
        // Another URL under the same name gets none of the tokens.
        assert!(file.entry("srv", "http://evil/mcp").unwrap().is_none());
        assert!(file.contains("other").unwrap());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        }
        assert!(file.remove("srv").unwrap());
        assert!(!file.remove("srv").unwrap());
        assert!(file.entry("srv", "http://a/mcp").unwrap().is_none());
        assert!(file.entry("other", "http://b/mcp").unwrap().is_some());
    }

    #[test]
    fn a_damaged_file_or_entry_is_an_error_that_names_no_token() {
        let dir = tempfile::tempdir().unwrap();
        let file = AuthFile::in_dir(dir.path());
        std::fs::write(file.path(), "{\"servers\": {\"srv\": ").unwrap();
        let error = file.entry("srv", "http://a/mcp").unwrap_err();
        assert!(matches!(error, OAuthError::Damaged { .. }), "{error}");
        assert!(error.to_string().contains("mcp-auth.json"), "{error}");
        // Storing over a damaged file is refused: it would lose what it holds.
        assert!(
            file.store("srv", &entry("http://a/mcp", "t"), false)
                .is_err()
        );

        std::fs::write(
            file.path(),
            r#"{"servers": {"srv": {"url": "http://a/mcp", "credentials": {"client_id": 7, "token_response": "leaked-token-value"}}}}"#,
        )
        .unwrap();
        let error = file.entry("srv", "http://a/mcp").unwrap_err().to_string();
        assert!(error.contains("\"srv\""), "{error}");
        assert!(!error.contains("leaked-token-value"), "{error}");

        std::fs::write(file.path(), "[1]").unwrap();
        assert!(matches!(
            file.entry("srv", "http://a/mcp").unwrap_err(),
            OAuthError::Damaged { .. }
        ));
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let folder = AuthFile {
            path: dir.path().join("sub"),
            lock: dir.path().join("lock"),
        };
        assert!(matches!(
            folder.entry("srv", "x").unwrap_err(),
            OAuthError::Read { .. }
        ));
    }

    #[test]
    fn a_static_authorization_header_wins() {
        assert!(has_static_authorization(&http(
            "http://a",
            &[("authorization", "Bearer x")]
        )));
        assert!(!has_static_authorization(&http(
            "http://a",
            &[("X-Key", "x")]
        )));
        let dir = tempfile::tempdir().unwrap();
        let file = AuthFile::in_dir(dir.path());
        file.store("srv", &entry("http://a/mcp", "t"), false)
            .unwrap();
        let with_header = http("http://a/mcp", &[("Authorization", "Bearer mine")]);
        assert!(
            applicable("srv", &with_header, dir.path())
                .unwrap()
                .is_none()
        );
        let without = http("http://a/mcp", &[]);
        assert!(applicable("srv", &without, dir.path()).unwrap().is_some());
    }

    #[tokio::test]
    async fn the_store_saves_through_and_reloads_under_a_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let file = AuthFile::in_dir(dir.path());
        let first = entry("http://a/mcp", "access-one");
        file.store("srv", &first, false).unwrap();
        let store = EntryStore {
            file: file.clone(),
            server: "srv".into(),
            url: "http://a/mcp".into(),
            metadata: first.metadata.clone(),
            cached: Arc::new(Mutex::new(Some(first.credentials.clone()))),
            refreshing: Arc::new(AtomicBool::new(false)),
        };
        // Another process refreshed meanwhile: a plain load keeps the cached tokens, a load
        // under the refresh guard reads the new ones.
        file.store("srv", &entry("http://a/mcp", "access-two"), false)
            .unwrap();
        let cached = store.load().await.unwrap().unwrap();
        assert_eq!(
            access_token(&Entry {
                credentials: cached,
                ..first.clone()
            }),
            "access-one"
        );
        let guard = store.acquire_refresh_guard().await.unwrap();
        let fresh = store.load().await.unwrap().unwrap();
        assert_eq!(
            access_token(&Entry {
                credentials: fresh,
                ..first.clone()
            }),
            "access-two"
        );
        // Saving under the guard does not wait for the lock it holds.
        store.save(credentials("access-three")).await.unwrap();
        drop(guard);
        let stored = file.entry("srv", "http://a/mcp").unwrap().unwrap();
        assert_eq!(access_token(&stored), "access-three");
        store.save(credentials("access-four")).await.unwrap();
        store.clear().await.unwrap();
        assert!(!file.contains("srv").unwrap());
    }

    #[test]
    fn an_entry_names_its_preregistered_client() {
        let servers = json!({
            "pre": {"url": "https://a/mcp", "oauth": {"clientId": "${CLIENT}"}},
            "plain": {"url": "https://b/mcp"},
            "bad": {"url": "https://c/mcp", "oauth": "id"},
            "bad_id": {"url": "https://c/mcp", "oauth": {"clientId": 7}},
        });
        let env = |name: &str| (name == "CLIENT").then(|| "tau-client".to_string());
        let parsed = crate::config::parse_servers(servers.as_object().unwrap(), &env);
        let client_id = |index: usize| match &parsed.servers[index].config {
            crate::config::ServerConfig::Http(http) => http.oauth_client_id.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(client_id(0).as_deref(), Some("tau-client"));
        assert_eq!(client_id(1), None);
        let refused: Vec<String> = parsed.errors.iter().map(ToString::to_string).collect();
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(
            refused[0].contains("\"oauth\" must be an object"),
            "{refused:?}"
        );
        assert!(
            refused[1].contains("\"oauth.clientId\" must be a string"),
            "{refused:?}"
        );
    }

    #[test]
    fn a_bearer_token_debugs_redacted() {
        assert_eq!(
            format!("{:?}", BearerToken("secret-token".into())),
            "BearerToken([redacted])"
        );
    }
}
