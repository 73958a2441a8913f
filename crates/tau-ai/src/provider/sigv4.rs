//! AWS credentials and request signing for Bedrock: where the credentials are found (as the
//! AWS tools find them: the environment's keys; the profile's keys or `credential_process` in
//! the shared `credentials` and `config` files; a web identity token exchanged at STS; the
//! container credentials endpoint), the region, and the per-attempt [`Authorize`] step that
//! signs the request with Signature Version 4 (the `aws-sigv4` crate) or sends Bedrock's bearer
//! API key. Credentials that expire are cached per process and renewed five minutes early.
//!
//! Secrets stay inside `aws_credential_types::Credentials` (which redacts itself and zeroes
//! its memory) or a redacting wrapper; errors name files and variables, never values.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use aws_smithy_types::date_time::{DateTime, Format};
use futures_util::future::BoxFuture;
use serde_json::Value;

use super::{Authorize, Failed, HttpRequest, ProviderEnv, ProviderError, StreamOptions};

/// The service name Bedrock's runtime signs for.
const SERVICE: &str = "bedrock";

/// Credentials renewed this close to their end (the AWS SDKs' margin is five minutes too).
const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);
/// The container credentials endpoint of ECS, to which a relative URI is relative.
const ECS_HOST: &str = "http://169.254.170.2";

/// Where the signing keys come from.
pub(crate) enum Source {
    Static(Credentials),
    /// A profile's `credential_process`: a command printing the keys as JSON.
    Process {
        command: String,
        dir: PathBuf,
    },
    /// The container credentials endpoint (ECS task roles, EKS Pod Identity).
    Container {
        url: String,
        authorization: Option<ContainerToken>,
    },
    /// A web identity token (EKS's IRSA) exchanged at STS for a role's keys.
    WebIdentity {
        token_file: PathBuf,
        role_arn: String,
        session_name: String,
        sts: String,
    },
}

/// The container endpoint's `Authorization` value, given or in a file that is re-read.
pub(crate) enum ContainerToken {
    Value(String),
    File(PathBuf),
}

/// How a Bedrock request proves who sends it.
pub(crate) enum AwsAuth {
    Sign {
        source: Source,
        region: String,
    },
    /// Bedrock's API keys (`AWS_BEARER_TOKEN_BEDROCK`).
    Bearer(String),
}

impl std::fmt::Debug for AwsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AwsAuth::Sign { source, region } => f
                .debug_struct("Sign")
                .field("source", &source.describe())
                .field("region", region)
                .finish(),
            AwsAuth::Bearer(_) => f.write_str("Bearer(<redacted>)"),
        }
    }
}

impl Source {
    /// What the source is, without a secret: also its key in the credentials cache.
    fn describe(&self) -> String {
        match self {
            Source::Static(c) => format!("keys {}", c.access_key_id()),
            Source::Process { command, .. } => format!("credential_process {command}"),
            Source::Container { url, .. } => format!("container credentials {url}"),
            Source::WebIdentity {
                role_arn,
                token_file,
                sts,
                ..
            } => format!(
                "web identity {role_arn} ({}) at {sts}",
                token_file.display()
            ),
        }
    }
}

/// One profile's settings from the shared files (keys lower-cased).
pub(crate) type Profile = HashMap<String, String>;

/// The profile's name: `AWS_PROFILE`, else `default`.
pub(crate) fn profile_name(env: &ProviderEnv) -> String {
    env.get("AWS_PROFILE")
        .unwrap_or_else(|| "default".to_string())
}

fn aws_file(env: &ProviderEnv, variable: &str, name: &str) -> Option<PathBuf> {
    env.get(variable)
        .map(PathBuf::from)
        .or_else(|| env.home().map(|home| home.join(".aws").join(name)))
}

/// Parses the AWS profile format: `[name]` sections in the credentials file, `[profile name]`
/// (and `[default]`) in the config file, `key = value` lines, `#`/`;` comments, and indented
/// sub-settings (which tau does not need and skips). A generic INI reader would still need
/// these rules, so the format is read here directly.
pub(crate) fn parse_profiles(text: &str, config_file: bool) -> HashMap<String, Profile> {
    let mut profiles: HashMap<String, Profile> = HashMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(section) = line.strip_prefix('[') {
            let section = section.split(']').next().unwrap_or_default().trim();
            current = if config_file {
                match section.strip_prefix("profile") {
                    Some(rest) if rest.starts_with([' ', '\t']) => Some(rest.trim().to_string()),
                    _ if section == "default" => Some(section.to_string()),
                    // `[sso-session x]`, `[services x]` and the like are not profiles.
                    _ => None,
                }
            } else {
                Some(section.to_string())
            };
            continue;
        }
        if let (Some(profile), Some((key, value))) = (&current, line.split_once('=')) {
            profiles
                .entry(profile.clone())
                .or_default()
                .insert(key.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    profiles
}

fn read_profiles(
    path: &Path,
    config_file: bool,
) -> Result<HashMap<String, Profile>, ProviderError> {
    match tau_base::bounded::read_to_string(path, tau_base::bounded::CONFIG_CAP) {
        Ok(text) => Ok(parse_profiles(&text, config_file)),
        Err(tau_base::bounded::BoundedReadError::NotFound) => Ok(HashMap::new()),
        Err(err) => Err(ProviderError::Config(format!(
            "Cannot read the AWS file {}: {err}",
            path.display()
        ))),
    }
}

/// The named profile, the config file's settings overlaid by the credentials file's (the
/// AWS SDKs' precedence).
pub(crate) fn load_profile(env: &ProviderEnv) -> Result<Profile, ProviderError> {
    let name = profile_name(env);
    let mut profile = Profile::new();
    if let Some(path) = aws_file(env, "AWS_CONFIG_FILE", "config") {
        profile.extend(
            read_profiles(&path, true)?
                .remove(&name)
                .unwrap_or_default(),
        );
    }
    if let Some(path) = aws_file(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials") {
        profile.extend(
            read_profiles(&path, false)?
                .remove(&name)
                .unwrap_or_default(),
        );
    }
    Ok(profile)
}

/// Where the credentials come from, in the AWS SDK's order: the environment's keys; the
/// profile's keys, `credential_process` or web identity; the environment's web identity
/// (`AWS_WEB_IDENTITY_TOKEN_FILE` with `AWS_ROLE_ARN`); the container endpoint. Profiles that
/// assume a role from another profile or use SSO are named in the error (tau does not run
/// those flows).
fn source(env: &ProviderEnv, profile: &Profile, region: &str) -> Result<Source, ProviderError> {
    if let (Some(id), Some(secret)) = (
        env.get("AWS_ACCESS_KEY_ID"),
        env.get("AWS_SECRET_ACCESS_KEY"),
    ) {
        return Ok(Source::Static(Credentials::new(
            id,
            secret,
            env.get("AWS_SESSION_TOKEN"),
            None,
            "environment",
        )));
    }
    let get = |key: &str| profile.get(key).filter(|v| !v.is_empty()).cloned();
    if let (Some(id), Some(secret)) = (get("aws_access_key_id"), get("aws_secret_access_key")) {
        return Ok(Source::Static(Credentials::new(
            id,
            secret,
            get("aws_session_token"),
            None,
            "profile",
        )));
    }
    if let Some(command) = get("credential_process") {
        return Ok(Source::Process {
            command,
            dir: env.home().unwrap_or_else(|| PathBuf::from("/")),
        });
    }
    let web_identity = get("web_identity_token_file")
        .zip(get("role_arn"))
        .map(|(file, role)| (file, role, get("role_session_name")))
        .or_else(|| {
            env.get("AWS_WEB_IDENTITY_TOKEN_FILE")
                .zip(env.get("AWS_ROLE_ARN"))
                .map(|(file, role)| (file, role, env.get("AWS_ROLE_SESSION_NAME")))
        });
    if let Some((file, role_arn, session)) = web_identity {
        let sts = env.get("AWS_ENDPOINT_URL_STS").unwrap_or_else(|| {
            let suffix = if region.starts_with("cn-") { ".cn" } else { "" };
            format!("https://sts.{region}.amazonaws.com{suffix}")
        });
        let session_name = session.unwrap_or_else(|| {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            format!("tau-{now}")
        });
        return Ok(Source::WebIdentity {
            token_file: PathBuf::from(file),
            role_arn,
            session_name,
            sts: sts.trim_end_matches('/').to_string(),
        });
    }
    let container = env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI").or_else(|| {
        env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
            .map(|relative| format!("{ECS_HOST}{relative}"))
    });
    if let Some(url) = container {
        let authorization = env
            .get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
            .map(|f| ContainerToken::File(PathBuf::from(f)))
            .or_else(|| {
                env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
                    .map(ContainerToken::Value)
            });
        return Ok(Source::Container {
            url: checked_container_url(&url)?,
            authorization,
        });
    }
    let name = profile_name(env);
    let flow = ["role_arn", "sso_session", "sso_start_url"]
        .into_iter()
        .find(|key| profile.contains_key(*key));
    Err(ProviderError::Config(match flow {
        Some(key) => format!(
            "Could not load AWS credentials: profile \"{name}\" uses {key}, which tau does not support; export AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (e.g. `eval \"$(aws configure export-credentials --format env)\"`) or set AWS_BEARER_TOKEN_BEDROCK"
        ),
        None => "Could not load credentials from any providers: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE with keys in ~/.aws/credentials, or AWS_BEARER_TOKEN_BEDROCK".to_string(),
    }))
}

/// The container endpoint may only be one the AWS SDKs allow: HTTPS, or plain HTTP to the
/// loopback or the ECS/EKS link-local hosts, so that the authorization token and the keys
/// never cross a network in the clear.
fn checked_container_url(url: &str) -> Result<String, ProviderError> {
    let refused = || {
        ProviderError::Config(format!(
            "The container credentials endpoint {url} is neither HTTPS nor a loopback or ECS/EKS address"
        ))
    };
    let parsed = reqwest::Url::parse(url).map_err(|_| refused())?;
    let host = parsed.host_str().unwrap_or_default();
    let ip = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .ok();
    let allowed = match (parsed.scheme(), ip) {
        ("https", _) => !host.is_empty(),
        ("http", Some(std::net::IpAddr::V4(ip))) => {
            ip.is_loopback()
                || ip == std::net::Ipv4Addr::new(169, 254, 170, 2)
                || ip == std::net::Ipv4Addr::new(169, 254, 170, 23)
        }
        ("http", Some(std::net::IpAddr::V6(ip))) => {
            ip.is_loopback() || ip == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)
        }
        ("http", None) => host == "localhost",
        _ => false,
    };
    if allowed {
        Ok(url.to_string())
    } else {
        Err(refused())
    }
}

/// Credentials that came with an end, as cached.
#[derive(Clone)]
struct Held {
    credentials: Credentials,
    expires: Option<SystemTime>,
}

impl Held {
    fn fresh(&self) -> bool {
        self.expires.is_none_or(|end| {
            end.duration_since(SystemTime::now())
                .is_ok_and(|left| left > REFRESH_MARGIN)
        })
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<Held>>>;

static HELD: LazyLock<Mutex<HashMap<String, Slot>>> = LazyLock::new(Default::default);

fn failed(error: ProviderError, retryable: bool) -> Failed {
    Failed { error, retryable }
}

/// The AWS credential JSON of `credential_process` and the container endpoint (`AccessKeyId`,
/// `SecretAccessKey`, `Token`/`SessionToken`, `Expiration`).
fn credentials_json(value: &Value, what: &str) -> Result<Held, ProviderError> {
    let field = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let (Some(id), Some(secret)) = (field("AccessKeyId"), field("SecretAccessKey")) else {
        return Err(ProviderError::Config(format!(
            "{what} gave no AccessKeyId and SecretAccessKey"
        )));
    };
    let token = field("SessionToken").or_else(|| field("Token"));
    let expires = field("Expiration").and_then(|e| expiry(&e));
    Ok(Held {
        credentials: Credentials::new(id, secret, token, expires, "tau"),
        expires,
    })
}

fn expiry(text: &str) -> Option<SystemTime> {
    DateTime::from_str(text, Format::DateTimeWithOffset)
        .ok()
        .and_then(|t| SystemTime::try_from(t).ok())
}

/// The text of the first `<tag>…</tag>` of an XML document, entities decoded (STS answers in
/// XML; the few fields read here need no XML parser).
fn xml_text(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{tag}>"))?;
    Some(
        xml[start..end]
            .trim()
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

impl Source {
    /// The keys to sign with now: cached ones while fresh, else fetched.
    async fn credentials(
        &self,
        client: &reqwest::Client,
        options: &StreamOptions,
    ) -> Result<Credentials, Failed> {
        if let Source::Static(credentials) = self {
            return Ok(credentials.clone());
        }
        let slot = HELD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(self.describe())
            .or_default()
            .clone();
        let mut held = slot.lock().await;
        if let Some(current) = held.as_ref().filter(|h| h.fresh()) {
            return Ok(current.credentials.clone());
        }
        let fetched = self.fetch(client, options).await?;
        let credentials = fetched.credentials.clone();
        *held = Some(fetched);
        Ok(credentials)
    }

    async fn fetch(
        &self,
        client: &reqwest::Client,
        options: &StreamOptions,
    ) -> Result<Held, Failed> {
        match self {
            Source::Static(credentials) => Ok(Held {
                credentials: credentials.clone(),
                expires: None,
            }),
            Source::Process { command, dir } => {
                let (command, dir) = (command.clone(), dir.clone());
                let ran = tokio::task::spawn_blocking(move || {
                    crate::registry::run_shell(&command, &dir, crate::registry::COMMAND_TIMEOUT)
                });
                let what = "The profile's credential_process";
                let output = super::within(ran, options, crate::registry::COMMAND_TIMEOUT * 2)
                    .await
                    .map_err(|e| failed(e, false))?
                    .ok()
                    .flatten()
                    .ok_or_else(|| {
                        failed(
                            ProviderError::Config(format!(
                                "{what} failed, timed out or printed nothing"
                            )),
                            false,
                        )
                    })?;
                let value: Value = serde_json::from_str(&output).map_err(|_| {
                    failed(
                        ProviderError::Config(format!("{what} did not print JSON")),
                        false,
                    )
                })?;
                credentials_json(&value, what).map_err(|e| failed(e, false))
            }
            Source::Container { url, authorization } => {
                let mut request = client.get(url);
                match authorization {
                    Some(ContainerToken::Value(token)) => {
                        request = request.header("authorization", token);
                    }
                    Some(ContainerToken::File(path)) => {
                        let token = tau_base::bounded::read_to_string(
                            path,
                            tau_base::bounded::CONFIG_CAP,
                        )
                        .map_err(|e| {
                            failed(
                                ProviderError::Config(format!(
                                    "Cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {}: {e}",
                                    path.display()
                                )),
                                false,
                            )
                        })?;
                        request = request.header("authorization", token.trim());
                    }
                    None => {}
                }
                let body = fetch_text(request, url, options).await?;
                let value: Value = serde_json::from_str(&body).map_err(|_| {
                    failed(
                        ProviderError::Stream(format!(
                            "The container credentials endpoint {url} did not answer JSON"
                        )),
                        false,
                    )
                })?;
                credentials_json(&value, &format!("The container credentials endpoint {url}"))
                    .map_err(|e| failed(e, false))
            }
            Source::WebIdentity {
                token_file,
                role_arn,
                session_name,
                sts,
            } => {
                let token =
                    tau_base::bounded::read_to_string(token_file, tau_base::bounded::CONFIG_CAP)
                        .map_err(|e| {
                            failed(
                                ProviderError::Config(format!(
                                    "Cannot read the web identity token file {}: {e}",
                                    token_file.display()
                                )),
                                false,
                            )
                        })?;
                let form: String = form_urlencoded::Serializer::new(String::new())
                    .append_pair("Action", "AssumeRoleWithWebIdentity")
                    .append_pair("Version", "2011-06-15")
                    .append_pair("RoleArn", role_arn)
                    .append_pair("RoleSessionName", session_name)
                    .append_pair("WebIdentityToken", token.trim())
                    .finish();
                let request = client
                    .post(format!("{sts}/"))
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(form);
                let xml = fetch_text(request, sts, options).await?;
                let field = |tag| xml_text(&xml, tag).filter(|v| !v.is_empty());
                let (Some(id), Some(secret)) = (field("AccessKeyId"), field("SecretAccessKey"))
                else {
                    return Err(failed(
                        ProviderError::Stream(format!(
                            "STS ({sts}) answered AssumeRoleWithWebIdentity without credentials"
                        )),
                        false,
                    ));
                };
                let expires = field("Expiration").and_then(|e| expiry(&e));
                Ok(Held {
                    credentials: Credentials::new(
                        id,
                        secret,
                        field("SessionToken"),
                        expires,
                        "sts",
                    ),
                    expires,
                })
            }
        }
    }
}

/// Sends a credentials request and returns its body, with the request's cancellation and
/// timeouts; an error status is reported with the service's own message.
async fn fetch_text(
    request: reqwest::RequestBuilder,
    endpoint: &str,
    options: &StreamOptions,
) -> Result<String, Failed> {
    let response = match super::within(request.send(), options, super::headers_limit(options)).await
    {
        Ok(Ok(response)) => response,
        Ok(Err(err)) => {
            return Err(failed(
                ProviderError::Network(format!(
                    "Connection error: AWS credentials from {endpoint}: {}",
                    super::describe(&err)
                )),
                true,
            ));
        }
        Err(error) => {
            let retryable = matches!(error, ProviderError::Idle(_));
            return Err(failed(error, retryable));
        }
    };
    let status = response.status();
    let body = match super::guarded(response.text(), options).await {
        Ok(Ok(body)) => body,
        Ok(Err(err)) => {
            return Err(failed(
                ProviderError::Network(format!(
                    "Connection lost: AWS credentials from {endpoint}: {}",
                    super::describe(&err)
                )),
                true,
            ));
        }
        Err(error) => return Err(failed(error, false)),
    };
    if status.is_success() {
        return Ok(body);
    }
    // STS words errors in XML (`<Code>`, `<Message>`); the container endpoint in JSON or text.
    let detail = match (xml_text(&body, "Code"), xml_text(&body, "Message")) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        _ => body.trim().chars().take(300).collect(),
    };
    Err(failed(
        ProviderError::Service {
            status: status.as_u16(),
            message: format!(
                "Could not get AWS credentials from {endpoint}: {} {detail}",
                status.as_u16()
            ),
            retry_after: None,
        },
        status.as_u16() == 429 || status.is_server_error(),
    ))
}

/// The region a standard Bedrock runtime endpoint names (`bedrock-runtime[-fips].R.amazonaws.com`).
pub(crate) fn endpoint_region(base_url: &str) -> Option<String> {
    let host = reqwest::Url::parse(base_url)
        .ok()?
        .host_str()?
        .to_ascii_lowercase();
    let rest = host
        .strip_prefix("bedrock-runtime-fips.")
        .or_else(|| host.strip_prefix("bedrock-runtime."))?;
    let region = rest
        .strip_suffix(".amazonaws.com")
        .or_else(|| rest.strip_suffix(".amazonaws.com.cn"))?;
    (!region.is_empty()
        && region
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-'))
    .then(|| region.to_string())
}

/// Where the request goes and which region it is signed for, as pi decides: a region in an
/// inference-profile ARN wins, then `AWS_REGION`/`AWS_DEFAULT_REGION`, then (for the catalog's
/// standard endpoint, when neither a region nor `AWS_PROFILE` is set) the endpoint's region,
/// then the `region` of the profile `AWS_PROFILE` names, then `us-east-1`. A custom base URL
/// is always the endpoint.
pub(crate) fn endpoint_and_region(
    model_id: &str,
    base_url: &str,
    env: &ProviderEnv,
    profile: &Profile,
) -> (String, String) {
    let configured = env
        .get("AWS_REGION")
        .or_else(|| env.get("AWS_DEFAULT_REGION"));
    let ambient_profile = env.get("AWS_PROFILE").is_some();
    let standard = endpoint_region(base_url);
    let explicit = base_url.trim().is_empty()
        || standard.is_none()
        || (configured.is_none() && !ambient_profile);
    let from_arn = model_id
        .strip_prefix("arn:")
        .and_then(|rest| rest.split(':').nth(2).map(str::to_string))
        .filter(|r| !r.is_empty() && model_id.split(':').nth(2) == Some("bedrock"));
    let region = from_arn
        .or(configured)
        .or_else(|| standard.clone().filter(|_| explicit))
        // The profile's region counts only for a profile named in AWS_PROFILE, as in pi.
        .or_else(|| {
            profile
                .get("region")
                .cloned()
                .filter(|r| ambient_profile && !r.is_empty())
        })
        .unwrap_or_else(|| "us-east-1".to_string());
    let endpoint = if explicit && !base_url.trim().is_empty() {
        base_url.trim().trim_end_matches('/').to_string()
    } else if region.starts_with("cn-") {
        format!("https://bedrock-runtime.{region}.amazonaws.com.cn")
    } else {
        format!("https://bedrock-runtime.{region}.amazonaws.com")
    };
    (endpoint, region)
}

/// How the request will be authorised: a bearer key when one is set (and
/// `AWS_BEDROCK_SKIP_AUTH` is not), dummy keys for proxies that need none, else the AWS
/// credentials.
pub(crate) fn resolve(
    env: &ProviderEnv,
    profile: &Profile,
    region: String,
) -> Result<AwsAuth, ProviderError> {
    if env.get("AWS_BEDROCK_SKIP_AUTH").as_deref() == Some("1") {
        let dummy = Credentials::new("dummy-access-key", "dummy-secret-key", None, None, "skip");
        return Ok(AwsAuth::Sign {
            source: Source::Static(dummy),
            region,
        });
    }
    if let Some(token) = env.get("AWS_BEARER_TOKEN_BEDROCK") {
        return Ok(AwsAuth::Bearer(token));
    }
    Ok(AwsAuth::Sign {
        source: source(env, profile, &region)?,
        region,
    })
}

/// The headers that sign `request` with `body` at `now`, with `credentials` for `region`.
pub(crate) fn sign_headers(
    credentials: &Credentials,
    region: &str,
    request: &HttpRequest,
    body: &[u8],
    now: SystemTime,
) -> Result<Vec<(String, String)>, ProviderError> {
    let failed =
        |what: &str| ProviderError::Config(format!("Signing the Bedrock request failed: {what}"));
    let identity: Identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(now)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| failed(&e.to_string()))?
        .into();
    let signable = SignableRequest::new(
        "POST",
        &request.url,
        request
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str())),
        SignableBody::Bytes(body),
    )
    .map_err(|e| failed(&e.to_string()))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| failed(&e.to_string()))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect())
}

impl Authorize for AwsAuth {
    fn authorize<'a>(
        &'a self,
        client: &'a reqwest::Client,
        request: &'a HttpRequest,
        body: &'a [u8],
        options: &'a StreamOptions,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, Failed>> {
        Box::pin(async move {
            let (source, region) = match self {
                AwsAuth::Bearer(token) => {
                    return Ok(vec![("authorization".into(), format!("Bearer {token}"))]);
                }
                AwsAuth::Sign { source, region } => (source, region),
            };
            let credentials = source.credentials(client, options).await?;
            // Signed per attempt: a retry's signature carries the retry's time.
            sign_headers(&credentials, region, request, body, SystemTime::now())
                .map_err(|error| failed(error, false))
        })
    }

    fn rejected(&self) {
        // Keys revoked before their end would otherwise fail every request until then.
        if let AwsAuth::Sign { source, .. } = self
            && !matches!(source, Source::Static(_))
        {
            let slot = HELD
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&source.describe())
                .cloned();
            if let Some(slot) = slot
                && let Ok(mut held) = slot.try_lock()
            {
                *held = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> ProviderEnv {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        ProviderEnv::new(move |name| vars.get(name).cloned())
    }

    #[test]
    fn profiles_read_as_the_aws_tools_read_them() {
        let config = "[default]\nregion = us-west-2\n[profile work]\nregion=eu-west-1\ns3 =\n  max_concurrent_requests = 10\n[sso-session x]\nsso_region = us-east-1\n";
        let profiles = parse_profiles(config, true);
        assert_eq!(profiles["default"]["region"], "us-west-2");
        assert_eq!(profiles["work"]["region"], "eu-west-1");
        assert!(!profiles["work"].contains_key("max_concurrent_requests"));
        assert_eq!(profiles.len(), 2);
        let credentials =
            "# keys\n[work]\naws_access_key_id = AKIDWORK\nAWS_Secret_Access_Key = s3cr3t\n";
        let profiles = parse_profiles(credentials, false);
        assert_eq!(profiles["work"]["aws_secret_access_key"], "s3cr3t");
    }

    #[test]
    fn credentials_come_from_the_environment_then_the_profile() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".aws")).unwrap();
        std::fs::write(
            dir.path().join(".aws/credentials"),
            "[work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = s3cr3t\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join(".aws/config"),
            "[profile work]\nregion = eu-north-1\n[profile sso]\nsso_session = corp\n",
        )
        .unwrap();
        let home = dir.path().display().to_string();
        let work = env(&[("HOME", &home), ("AWS_PROFILE", "work")]);
        let profile = load_profile(&work).unwrap();
        assert_eq!(profile["region"], "eu-north-1");
        let key_of = |source: Result<Source, ProviderError>| match source {
            Ok(Source::Static(c)) => c.access_key_id().to_string(),
            Ok(other) => panic!("{}", other.describe()),
            Err(err) => panic!("{err}"),
        };
        assert_eq!(key_of(source(&work, &profile, "r")), "AKIDWORK");
        let described = AwsAuth::Sign {
            source: source(&work, &profile, "r").unwrap(),
            region: "r".into(),
        };
        assert!(!format!("{described:?}").contains("s3cr3t"));
        let keyed = env(&[
            ("HOME", &home),
            ("AWS_PROFILE", "work"),
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
        ]);
        assert_eq!(key_of(source(&keyed, &profile, "r")), "AKIDENV");
        let sso = env(&[("HOME", &home), ("AWS_PROFILE", "sso")]);
        let err = source(&sso, &load_profile(&sso).unwrap(), "r")
            .err()
            .unwrap();
        assert!(err.to_string().contains("uses sso_session"), "{err}");
        let none = env(&[("HOME", "/nonexistent")]);
        let err = source(&none, &load_profile(&none).unwrap(), "r")
            .err()
            .unwrap();
        assert!(
            err.to_string().starts_with("Could not load credentials"),
            "{err}"
        );
    }

    #[test]
    fn the_other_sources_are_found_in_the_sdks_order() {
        let none = Profile::new();
        let described = |vars: &[(&str, &str)], profile: &Profile| {
            source(&env(vars), profile, "eu-west-1")
                .map(|s| s.describe())
                .unwrap_or_else(|e| e.to_string())
        };
        let mut process = Profile::new();
        process.insert("credential_process".into(), "get-keys --json".into());
        assert_eq!(
            described(&[], &process),
            "credential_process get-keys --json"
        );
        let irsa = [
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            (
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "/v2/credentials/x",
            ),
        ];
        assert_eq!(
            described(&irsa, &none),
            "web identity arn:aws:iam::1:role/r (/var/run/token) at https://sts.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            described(&irsa[2..], &none),
            "container credentials http://169.254.170.2/v2/credentials/x"
        );
        assert!(
            described(
                &[(
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                    "http://10.0.0.8/creds"
                )],
                &none
            )
            .starts_with("The container credentials endpoint http://10.0.0.8/creds is neither")
        );
        for allowed in [
            "http://127.0.0.1:9/c",
            "http://169.254.170.23/v1/credentials",
            "http://[fd00:ec2::23]/v1/credentials",
            "https://creds.example/c",
        ] {
            assert!(checked_container_url(allowed).is_ok(), "{allowed}");
        }
    }

    #[test]
    fn sts_and_container_answers_are_read() {
        let xml = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIA1</AccessKeyId><SecretAccessKey>s+e/c</SecretAccessKey><SessionToken>t&amp;k</SessionToken><Expiration>2030-01-01T00:00:00Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
        assert_eq!(xml_text(xml, "SessionToken").as_deref(), Some("t&k"));
        assert_eq!(xml_text(xml, "Missing"), None);
        let held = credentials_json(
            &serde_json::json!({"AccessKeyId": "A", "SecretAccessKey": "S", "Token": "T",
                "Expiration": "2030-01-01T00:00:00Z"}),
            "test",
        )
        .unwrap();
        assert_eq!(held.credentials.session_token(), Some("T"));
        assert!(held.fresh());
        let stale = credentials_json(
            &serde_json::json!({"AccessKeyId": "A", "SecretAccessKey": "S",
                "Expiration": "2020-01-01T00:00:00Z"}),
            "test",
        )
        .unwrap();
        assert!(!stale.fresh());
        assert!(credentials_json(&serde_json::json!({"AccessKeyId": "A"}), "x").is_err());
    }

    #[test]
    fn regions_and_endpoints_follow_pi() {
        let standard = "https://bedrock-runtime.us-east-1.amazonaws.com";
        let none = Profile::new();
        let at = |vars: &[(&str, &str)], id: &str, base: &str, profile: &Profile| {
            endpoint_and_region(id, base, &env(vars), profile)
        };
        assert_eq!(
            at(&[], "m", standard, &none),
            (standard.to_string(), "us-east-1".to_string())
        );
        assert_eq!(
            at(&[("AWS_REGION", "eu-west-3")], "m", standard, &none),
            (
                "https://bedrock-runtime.eu-west-3.amazonaws.com".to_string(),
                "eu-west-3".to_string()
            )
        );
        let mut profile = Profile::new();
        profile.insert("region".into(), "ap-south-1".into());
        assert_eq!(
            at(&[("AWS_PROFILE", "p")], "m", standard, &profile).1,
            "ap-south-1"
        );
        assert_eq!(
            at(
                &[("AWS_DEFAULT_REGION", "cn-north-1")],
                "m",
                standard,
                &none
            )
            .0,
            "https://bedrock-runtime.cn-north-1.amazonaws.com.cn"
        );
        let arn = "arn:aws:bedrock:eu-central-1:123456789012:inference-profile/eu.anthropic.x";
        assert_eq!(
            at(&[("AWS_REGION", "us-east-1")], arn, standard, &none).1,
            "eu-central-1"
        );
        // A proxy is always the endpoint.
        assert_eq!(
            at(
                &[("AWS_REGION", "eu-west-3")],
                "m",
                "http://127.0.0.1:9/",
                &none
            ),
            ("http://127.0.0.1:9".to_string(), "eu-west-3".to_string())
        );
        assert_eq!(
            endpoint_region("https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com").as_deref(),
            Some("us-gov-west-1")
        );
    }

    #[test]
    fn bearer_keys_and_skipped_auth() {
        let none = Profile::new();
        let bearer = resolve(
            &env(&[("AWS_BEARER_TOKEN_BEDROCK", "bedrock-key")]),
            &none,
            "r".into(),
        )
        .unwrap();
        assert!(matches!(bearer, AwsAuth::Bearer(ref t) if t == "bedrock-key"));
        assert!(!format!("{bearer:?}").contains("bedrock-key"));
        let skip = resolve(
            &env(&[
                ("AWS_BEARER_TOKEN_BEDROCK", "k"),
                ("AWS_BEDROCK_SKIP_AUTH", "1"),
            ]),
            &none,
            "r".into(),
        )
        .unwrap();
        assert!(matches!(skip, AwsAuth::Sign { .. }));
    }
}
