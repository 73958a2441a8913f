//! OAuth for remote MCP servers through the binary (issue 43, decision T127): `tau mcp login`
//! against tau-mcp's test server in its `--oauth` mode (its own authorization server), the
//! test playing the user's browser; the stored tokens used and refreshed by a session; a
//! server without a login failing with the command to run; `tau mcp logout`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::ExitStatus;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tau_mock_llm::{MockServer, Reply};
use tau_test_kit::Dirs;

use crate::mcp::{HttpServer, http_server_with, status, stop, text_of};
use crate::{ready_tau, tau};

/// A GET over a plain TCP connection, as a browser would send it: the status, the
/// `Location` header (redirects are not followed) and the body.
fn get(url: &str) -> (u16, Option<String>, String) {
    let rest = url.strip_prefix("http://").expect("an http:// address");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = TcpStream::connect(host).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let location = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("location")
            .then(|| value.trim().to_string())
    });
    (status, location, body.to_string())
}

fn settings(server: &HttpServer) -> String {
    json!({"mcpServers": {"srv": {"url": server.url}}}).to_string()
}

/// The stored file, parsed.
fn auth_file(dirs: &Dirs) -> Value {
    let text = std::fs::read_to_string(dirs.agent_dir().join("mcp-auth.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn access_token(dirs: &Dirs) -> String {
    auth_file(dirs)["servers"]["srv"]["credentials"]["token_response"]["access_token"]
        .as_str()
        .expect("an access token")
        .to_string()
}

/// `tau mcp login srv --no-browser`, the test acting as the browser: it opens the printed
/// address at the authorization server, which approves at once and redirects; with `paste`
/// the redirected address is pasted on tau's stdin (a browser on another machine), else the
/// browser follows it to tau's listener. tau's exit and its stderr.
fn login(dirs: &Dirs, server: &HttpServer, paste: bool) -> (ExitStatus, String) {
    let (mut child, _) = tau()
        .raw_args(["mcp", "login", "srv", "--no-browser"])
        .agent_file("settings.json", settings(server))
        .dirs(dirs.clone())
        .spawn_raw();
    let stderr = child.stderr.take().unwrap();
    let (lines_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut said = Vec::new();
    let address = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no address to open; stderr: {said:?}"));
        said.push(line.clone());
        if let Some(at) = line.find("http://") {
            let address = line[at..].trim().to_string();
            if address.contains("/authorize?") {
                break address;
            }
        }
    };
    let (code, location, _) = get(&address);
    assert_eq!(code, 303, "the authorization server redirects");
    let redirect = location.expect("a Location");
    assert!(redirect.contains("/callback?code="), "{redirect}");
    let mut stdin = child.stdin.take().unwrap();
    if paste {
        // A line that is no redirect is passed over; the address itself ends the login.
        writeln!(stdin, "not an address").unwrap();
        writeln!(stdin, "{redirect}").unwrap();
    } else {
        drop(stdin);
        let (code, _, body) = get(&redirect);
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("tau is authorized"), "{body}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "tau mcp login did not end");
        std::thread::sleep(Duration::from_millis(20));
    };
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(5)) {
        said.push(line);
    }
    (exit, said.join("\n"))
}

/// One prompt whose model calls `srv_echo` with `text`; the tool's end record.
fn call_echo(t: &mut tau_test_kit::Tau, id: &str) -> Value {
    t.send(&json!({"id": id, "type": "prompt", "message": "go"}));
    let ends: Vec<Value> = t
        .records_until("agent_settled", Duration::from_secs(60))
        .into_iter()
        .filter(|r| r["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends.len(), 1, "{ends:?}");
    ends[0].clone()
}

fn stats(server: &HttpServer) -> Value {
    let (code, _, body) = get(&format!(
        "{}/oauth/stats",
        server.url.trim_end_matches("/mcp")
    ));
    assert_eq!(code, 200);
    serde_json::from_str(&body).unwrap()
}

#[test]
fn a_login_through_the_browser_is_used_and_refreshed_by_a_session() {
    // Access tokens live one second: the second call needs a refreshed one.
    let server = http_server_with(&["--oauth", "--token-ttl", "1"]);
    let dirs = Dirs::new();
    let (exit, said) = login(&dirs, &server, false);
    assert!(exit.success(), "{said}");
    assert!(said.contains("Authorized"), "{said}");
    let path = dirs.agent_dir().join("mcp-auth.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let stored = auth_file(&dirs);
    let entry = &stored["servers"]["srv"];
    assert_eq!(entry["url"], server.url.as_str());
    let first_token = access_token(&dirs);
    let refresh_token = entry["credentials"]["token_response"]["refresh_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!said.contains(&first_token) && !said.contains(&refresh_token));
    assert_eq!(
        stats(&server)["registered"],
        1,
        "dynamic client registration"
    );

    let mock = MockServer::start_background().unwrap();
    mock.push(Reply::new().tool_call("c1", "srv_echo", json!({"text": "first"})));
    mock.push(Reply::text("done"));
    mock.push(Reply::new().tool_call("c2", "srv_echo", json!({"text": "second"})));
    mock.push(Reply::text("done"));
    let mut t = ready_tau(
        tau()
            .dirs(dirs.clone())
            .agent_file("models.json", crate::mock_models(&mock))
            .arg("--no-session"),
    );
    status(&mut t, "srv", "ready");
    let end = call_echo(&mut t, "p1");
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(text_of(&end), "first");
    std::thread::sleep(Duration::from_millis(2200));
    let end = call_echo(&mut t, "p2");
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(text_of(&end), "second");
    let refreshed = stats(&server)["refreshed"].as_u64().unwrap();
    assert!(refreshed >= 1, "{}", stats(&server));
    let now_token = access_token(&dirs);
    assert_ne!(now_token, first_token, "the refreshed token is stored");
    let stderr = stop(t);
    for token in [&first_token, &refresh_token, &now_token] {
        assert!(!stderr.contains(token.as_str()), "{stderr}");
    }
}

#[test]
fn without_a_login_the_server_fails_naming_the_command_and_logout_forgets_the_tokens() {
    let server = http_server_with(&["--oauth"]);
    let dirs = Dirs::new();
    let mut t = ready_tau(
        tau()
            .dirs(dirs.clone())
            .agent_file("settings.json", settings(&server))
            .arg("--no-session"),
    );
    let failed = status(&mut t, "srv", "failed");
    assert_eq!(
        failed["message"], "needs authorization: run `tau mcp login srv`",
        "{failed}"
    );
    stop(t);

    // The fallback without a browser here: the redirected address pasted on stdin.
    let (exit, said) = login(&dirs, &server, true);
    assert!(exit.success(), "{said}");
    assert!(auth_file(&dirs)["servers"].get("srv").is_some());

    let (exit, _, said, _) = tau()
        .raw_args(["mcp", "logout", "srv"])
        .dirs(dirs.clone())
        .run(b"");
    assert!(exit.success(), "{said}");
    assert!(said.contains("Removed"), "{said}");
    assert!(auth_file(&dirs)["servers"].get("srv").is_none());
    let (exit, _, said, _) = tau()
        .raw_args(["mcp", "logout", "srv"])
        .dirs(dirs.clone())
        .run(b"");
    assert!(exit.success(), "{said}");
    assert!(said.contains("No authorization"), "{said}");
}

#[test]
fn mcp_alone_prints_the_usage_and_login_refuses_what_it_cannot_authorize() {
    let (exit, stdout, _, _) = tau().raw_args(["mcp"]).run(b"");
    assert!(exit.success());
    let usage = String::from_utf8(stdout).unwrap();
    assert!(usage.contains("tau mcp login <server>"), "{usage}");
    assert!(usage.contains("tau mcp logout <server>"), "{usage}");

    let config = json!({"mcpServers": {
        "local": {"command": "true"},
        "keyed": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer k"}},
    }});
    for (server, expected) in [
        ("local", "not reached by URL"),
        ("keyed", "Authorization header of its own"),
        ("missing", "no MCP server named \"missing\""),
    ] {
        let (exit, _, said, _) = tau()
            .raw_args(["mcp", "login", server, "--no-browser"])
            .agent_file("settings.json", config.to_string())
            .run(b"");
        assert!(!exit.success(), "{server}: {said}");
        assert!(said.contains(expected), "{server}: {said}");
    }
}
