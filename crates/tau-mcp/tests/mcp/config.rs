//! The `mcpServers` configuration: shapes, `${VAR}` expansion, errors, layer merging, and
//! the tool-name sanitiser.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::{Value, json};
use tau_mcp::{
    ConfigErrorReason, ConfigFileError, HttpConfig, HttpTransport, McpServer, NameAllocator,
    ServerConfig, StdioConfig, expand_variables, is_valid_tool_name, merge_layers,
    parse_config_document, parse_servers, sanitize,
};

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

fn servers(value: Value, env: &dyn Fn(&str) -> Option<String>) -> tau_mcp::ParsedServers {
    match value {
        Value::Object(map) => parse_servers(&map, env),
        _ => panic!("test input must be an object"),
    }
}

#[test]
fn parses_the_claude_code_shapes() {
    let env = env_of(&[("HOME_DIR", "/home/me"), ("TOKEN", "s3cret")]);
    let parsed = servers(
        json!({
            "fs": {"command": "npx", "args": ["-y", "server-fs", "${HOME_DIR}/src"], "env": {"DEBUG": "1", "N": 3}, "cwd": "/tmp"},
            "typed": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]},
            "remote": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
            "untyped": {"url": "http://localhost:3000/mcp"},
            "streamable": {"type": "streamable-http", "url": "http://localhost:1/mcp"},
            "legacy": {"type": "sse", "url": "http://localhost:2/sse"}
        }),
        &env,
    );
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let names: Vec<&str> = parsed.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["fs", "typed", "remote", "untyped", "streamable", "legacy"]
    );
    assert_eq!(
        parsed.servers[0].config,
        ServerConfig::Stdio(StdioConfig {
            command: "npx".into(),
            args: vec!["-y".into(), "server-fs".into(), "/home/me/src".into()],
            env: BTreeMap::from([
                ("DEBUG".to_string(), "1".to_string()),
                ("N".to_string(), "3".to_string())
            ]),
            cwd: Some(PathBuf::from("/tmp")),
            inherit_env: Default::default(),
        })
    );
    assert_eq!(
        parsed.servers[2].config,
        ServerConfig::Http(HttpConfig {
            url: "https://example.com/mcp".into(),
            headers: BTreeMap::from([("Authorization".to_string(), "Bearer s3cret".to_string())]),
            transport: HttpTransport::StreamableHttp,
            oauth_client_id: None,
        })
    );
    assert!(
        matches!(&parsed.servers[3].config, ServerConfig::Http(http) if http.transport == HttpTransport::StreamableHttp)
    );
    assert!(
        matches!(&parsed.servers[5].config, ServerConfig::Http(http) if http.transport == HttpTransport::Sse)
    );
}

#[test]
fn secrets_stay_out_of_debug_output() {
    let env = env_of(&[("TOKEN", "s3cret")]);
    let parsed = servers(
        json!({
            "a": {"command": "x", "env": {"API_KEY": "${TOKEN}"}},
            "b": {"url": "https://h/mcp", "headers": {"X-Key": "${TOKEN}"}}
        }),
        &env,
    );
    let debug = format!("{:?}", parsed.servers);
    assert!(!debug.contains("s3cret"), "{debug}");
    assert!(debug.contains("API_KEY") && debug.contains("X-Key"));
}

#[test]
fn each_bad_entry_is_a_typed_error_and_the_rest_are_kept() {
    let env = env_of(&[]);
    let parsed = servers(
        json!({
            "ok": {"command": "x"},
            "not-object": 3,
            "nothing": {},
            "bad-type": {"type": "websocket", "url": "ws://x"},
            "stdio-no-command": {"type": "stdio", "url": "http://x"},
            "http-no-url": {"type": "http", "command": "x"},
            "args-not-array": {"command": "x", "args": "a b"},
            "arg-not-string": {"command": "x", "args": [1]},
            "env-not-object": {"command": "x", "env": ["A=1"]},
            "missing-var": {"command": "x", "args": ["${NOPE}"]},
            "bad-url": {"url": "ftp://x"},
            "bad-header": {"url": "http://x", "headers": {"bad header": "v"}},
            "bad-header-value": {"url": "http://x", "headers": {"h": "line\nbreak"}},
            "empty-command": {"command": "  "},
            "": {"command": "x"}
        }),
        &env,
    );
    assert_eq!(parsed.servers.len(), 1);
    let reasons: HashMap<&str, &ConfigErrorReason> = parsed
        .errors
        .iter()
        .map(|e| (e.server.as_str(), &e.reason))
        .collect();
    assert_eq!(reasons["not-object"], &ConfigErrorReason::NotAnObject);
    assert_eq!(reasons["nothing"], &ConfigErrorReason::NoCommandOrUrl);
    assert_eq!(
        reasons["bad-type"],
        &ConfigErrorReason::UnknownType("websocket".into())
    );
    assert_eq!(
        reasons["stdio-no-command"],
        &ConfigErrorReason::Missing {
            kind: "stdio",
            field: "command"
        }
    );
    assert_eq!(
        reasons["http-no-url"],
        &ConfigErrorReason::Missing {
            kind: "HTTP",
            field: "url"
        }
    );
    assert!(
        matches!(reasons["args-not-array"], ConfigErrorReason::WrongType { field, .. } if field == "args")
    );
    assert!(
        matches!(reasons["arg-not-string"], ConfigErrorReason::WrongType { field, .. } if field == "args[0]")
    );
    assert!(
        matches!(reasons["env-not-object"], ConfigErrorReason::WrongType { field, .. } if field == "env")
    );
    assert_eq!(
        reasons["missing-var"],
        &ConfigErrorReason::MissingVariable {
            field: "args[0]".into(),
            variable: "NOPE".into()
        }
    );
    assert_eq!(reasons["bad-url"], &ConfigErrorReason::BadUrl);
    assert_eq!(
        reasons["bad-header"],
        &ConfigErrorReason::BadHeaderName("bad header".into())
    );
    assert_eq!(
        reasons["bad-header-value"],
        &ConfigErrorReason::BadHeaderValue("h".into())
    );
    assert!(matches!(
        reasons["empty-command"],
        ConfigErrorReason::Empty { .. }
    ));
    assert_eq!(reasons[""], &ConfigErrorReason::EmptyName);
    let message = parsed
        .errors
        .iter()
        .find(|e| e.server == "missing-var")
        .map(ToString::to_string);
    assert_eq!(
        message.as_deref(),
        Some(
            "MCP server \"missing-var\": \"args[0]\" uses ${NOPE}, which is not set and has no default"
        )
    );
}

#[test]
fn error_messages_never_carry_header_values() {
    let env = env_of(&[("T", "s3cret\n")]);
    let parsed = servers(
        json!({"b": {"url": "http://x", "headers": {"Authorization": "${T}"}}}),
        &env,
    );
    assert_eq!(parsed.errors.len(), 1);
    assert!(!parsed.errors[0].to_string().contains("s3cret"));
}

#[test]
fn expansion_follows_claude_code() {
    let env = env_of(&[("A", "alpha"), ("EMPTY", "")]);
    assert_eq!(
        expand_variables("${A}/${A}", &env).as_deref(),
        Ok("alpha/alpha")
    );
    assert_eq!(expand_variables("${B:-beta}", &env).as_deref(), Ok("beta"));
    assert_eq!(expand_variables("${A:-beta}", &env).as_deref(), Ok("alpha"));
    // Set to the empty string is set.
    assert_eq!(expand_variables("[${EMPTY:-x}]", &env).as_deref(), Ok("[]"));
    assert_eq!(expand_variables("${B:-}", &env).as_deref(), Ok(""));
    assert_eq!(expand_variables("${B:-a:-b}", &env).as_deref(), Ok("a:-b"));
    // Not variables: left as written.
    assert_eq!(
        expand_variables("$A ${} ${A", &env).as_deref(),
        Ok("$A ${} ${A")
    );
    assert_eq!(
        expand_variables("x${MISSING}y", &env),
        Err("MISSING".to_string())
    );
    assert_eq!(
        expand_variables("ünï${A}cödé", &env).as_deref(),
        Ok("ünïalphacödé")
    );
}

#[test]
fn config_documents() {
    let env = env_of(&[]);
    let parsed = parse_config_document(r#"{"mcpServers": {"a": {"command": "x"}}}"#, &env);
    assert_eq!(parsed.map(|p| p.servers.len()), Ok(1));
    assert_eq!(
        parse_config_document("{}", &env).map(|p| p.servers.len()),
        Ok(0)
    );
    assert!(matches!(
        parse_config_document("{", &env),
        Err(ConfigFileError::Json(_))
    ));
    assert_eq!(
        parse_config_document("[]", &env),
        Err(ConfigFileError::NotAnObject)
    );
    assert_eq!(
        parse_config_document(r#"{"mcpServers": []}"#, &env),
        Err(ConfigFileError::ServersNotAnObject)
    );
}

#[test]
fn higher_layers_replace_whole_entries() {
    let server = |name: &str, command: &str| {
        McpServer::new(
            name,
            ServerConfig::Stdio(StdioConfig {
                command: command.into(),
                args: Vec::new(),
                env: BTreeMap::new(),
                cwd: None,
                inherit_env: Default::default(),
            }),
        )
    };
    let cli = vec![server("b", "cli-b")];
    let project = vec![server("a", "project-a"), server("b", "project-b")];
    let settings = vec![server("c", "settings-c"), server("a", "settings-a")];
    let merged = merge_layers([cli, project, settings]);
    let summary: Vec<(String, String)> = merged
        .iter()
        .map(|s| match &s.config {
            ServerConfig::Stdio(stdio) => (s.name.clone(), stdio.command.clone()),
            ServerConfig::Http(http) => (s.name.clone(), http.url.clone()),
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("b".into(), "cli-b".into()),
            ("a".into(), "project-a".into()),
            ("c".into(), "settings-c".into())
        ]
    );
}

#[test]
fn names_follow_the_scheme() {
    assert_eq!(sanitize("github_create.issue"), "github_create_issue");
    assert_eq!(sanitize(""), "_");
    assert_eq!(sanitize(&"x".repeat(100)).len(), 64);
    let mut names = NameAllocator::new(["read", "fs_read"]);
    assert_eq!(names.allocate("fs", "read"), "fs_read_2");
    assert_eq!(names.allocate("fs", "list"), "fs_list");
    assert_eq!(names.allocate("fs.x", "y"), "fs_x_y");
    assert_eq!(names.allocate("fs", "x.y"), "fs_x_y_2");
    let long = "t".repeat(80);
    let first = names.allocate("s", &long);
    let second = names.allocate("s", &format!("{long}2"));
    assert_eq!(first.len(), 64);
    assert_eq!(second.len(), 64);
    assert!(second.ends_with("_2"));
}

proptest! {
    #[test]
    fn sanitised_names_always_match_the_pattern(raw in any::<String>()) {
        prop_assert!(is_valid_tool_name(&sanitize(&raw)));
    }

    #[test]
    fn allocated_names_are_valid_and_distinct(
        pairs in proptest::collection::vec(("[a-z.]{0,3}|.{0,70}", "[a-z._ ]{0,3}|.{0,70}"), 0..40),
        reserved in proptest::collection::vec("[a-z_]{1,8}", 0..5),
    ) {
        let mut names = NameAllocator::new(reserved.clone());
        let mut seen: HashSet<String> = reserved.into_iter().collect();
        let mut given: HashMap<(String, String), String> = HashMap::new();
        for (server, tool) in pairs {
            // The same server and tool twice is the same tool; the manager never asks twice.
            if given.contains_key(&(server.clone(), tool.clone())) {
                continue;
            }
            let name = names.allocate(&server, &tool);
            prop_assert!(is_valid_tool_name(&name), "{name:?}");
            prop_assert!(seen.insert(name.clone()), "duplicate {name:?}");
            given.insert((server, tool), name);
        }
    }
}

fn stdio_of(parsed: &tau_mcp::ParsedServers, index: usize) -> &StdioConfig {
    match &parsed.servers[index].config {
        ServerConfig::Stdio(stdio) => stdio,
        other => panic!("not stdio: {other:?}"),
    }
}

#[test]
fn inherit_env_passes_the_base_list_and_what_the_entry_names() {
    let parsed = servers(
        json!({
            "base": {"command": "a"},
            "named": {"command": "b", "inheritEnv": ["AWS_*", "NODE_EXTRA_CA_CERTS"]},
            "all": {"command": "c", "inheritEnv": true},
            "none": {"command": "d", "inheritEnv": false},
            "bad": {"command": "e", "inheritEnv": "AWS_*"},
            "bad_item": {"command": "f", "inheritEnv": ["", 3]}
        }),
        &env_of(&[]),
    );
    let reasons: Vec<String> = parsed.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        reasons,
        [
            "MCP server \"bad\": \"inheritEnv\" must be true, false or an array of variable names",
            "MCP server \"bad_item\": \"inheritEnv[0]\" must be a variable name",
        ]
    );
    let base = &stdio_of(&parsed, 0).inherit_env;
    assert!(base.passes("PATH") && base.passes("HOME") && base.passes("LANG"));
    assert!(!base.passes("OPENAI_API_KEY"));
    let named = &stdio_of(&parsed, 1).inherit_env;
    assert!(named.passes("AWS_PROFILE") && named.passes("NODE_EXTRA_CA_CERTS"));
    assert!(!named.passes("NODE_EXTRA") && !named.passes("OPENAI_API_KEY"));
    assert!(stdio_of(&parsed, 2).inherit_env.passes("OPENAI_API_KEY"));
    assert!(!stdio_of(&parsed, 3).inherit_env.passes("OPENAI_API_KEY"));
    for name in tau_mcp::BASE_ENV {
        assert!(!name.contains("KEY") && !name.contains("TOKEN"), "{name}");
    }
}

#[test]
fn a_server_is_placed_in_the_folder_tau_chooses() {
    let parsed = servers(
        json!({
            "plain": {"command": "npx", "args": ["-y", "pkg"]},
            "relative": {"command": "./bin/server", "cwd": "srv"},
            "absolute": {"command": "node", "args": ["x.js"], "cwd": "/opt/srv"}
        }),
        &env_of(&[]),
    );
    let dir = std::path::Path::new("/home/me/.pi/agent");
    let placed: Vec<StdioConfig> = (0..3)
        .map(|i| stdio_of(&parsed, i).clone().placed_in(dir))
        .collect();
    assert_eq!(placed[0].cwd.as_deref(), Some(dir));
    assert_eq!(placed[0].command, "npx", "a bare name stays a PATH lookup");
    assert_eq!(placed[1].cwd, Some(dir.join("srv")));
    assert_eq!(placed[1].command, "/home/me/.pi/agent/srv/./bin/server");
    assert_eq!(placed[2].cwd, Some(PathBuf::from("/opt/srv")));
    assert_eq!(placed[2].args, ["x.js"]);
}
