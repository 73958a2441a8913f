//! Extension calls that move or rebuild the session: `ctx.navigateTree` with the
//! `session_before_tree` / `session_tree` events, and `ctx.reload`. Driven through a
//! TypeScript extension of our own (`fixtures/extensions/tree.ts`) in the Node host.

use std::time::Duration;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::Tau;

use crate::{ready_tau, tau};

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/extensions/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn start() -> (BackgroundMock, Tau) {
    let mock = MockServer::start_background().unwrap();
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "m", "contextWindow": 100000, "maxTokens": 4096}],
    }}});
    let t = ready_tau(
        tau()
            .agent_file("models.json", models.to_string())
            .arg("--no-session")
            .arg("-e")
            .arg(fixture("tree.ts")),
    );
    (mock, t)
}

/// The text of the next `notify` dialog (other records are skipped).
fn notice(t: &mut Tau) -> String {
    loop {
        let record = t
            .next_record(Duration::from_secs(30))
            .expect("a notify within 30 s");
        let json = record.json.expect("JSON");
        if json["type"] == "extension_ui_request" && json["method"] == "notify" {
            return json["message"].as_str().unwrap_or_default().to_string();
        }
    }
}

fn settle(t: &mut Tau) {
    t.event("agent_settled");
}

/// Two exchanges; returns the ids of the first user message, the first reply and the leaf.
fn two_exchanges(mock: &BackgroundMock, t: &mut Tau) -> (String, String, String) {
    for text in ["first", "second"] {
        mock.push(Reply::text(format!("reply to {text}")));
        t.send(&json!({"id": text, "type": "prompt", "message": text}));
        settle(t);
    }
    let entries = t.request(json!({"id": "e", "type": "get_entries"}));
    let entries = entries["data"]["entries"].as_array().unwrap().clone();
    let id_of = |role: &str, nth: usize| {
        entries
            .iter()
            .filter(|e| e["type"] == "message" && e["message"]["role"] == role)
            .nth(nth)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let leaf = entries.last().unwrap()["id"].as_str().unwrap().to_string();
    (id_of("user", 0), id_of("assistant", 0), leaf)
}

fn message_texts(t: &mut Tau) -> Vec<String> {
    let messages = t.request(json!({"id": "m", "type": "get_messages"}));
    messages["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match &m["content"] {
            _ if m["role"] == "branchSummary" => m["summary"].as_str().unwrap().to_string(),
            Value::String(s) => s.clone(),
            blocks => blocks[0]["text"].as_str().unwrap_or_default().to_string(),
        })
        .collect()
}

#[test]
fn navigate_tree_moves_the_leaf_with_the_events_around_it() {
    let (mock, mut t) = start();
    assert!(notice(&mut t).starts_with("start startup"));
    let (first_user, first_reply, leaf) = two_exchanges(&mock, &mut t);

    // To an assistant reply: it becomes the leaf; the second exchange is left behind.
    t.send(&json!({"id": "g", "type": "prompt",
        "message": format!("/goto {first_reply} no -")}));
    assert_eq!(
        notice(&mut t),
        format!(
            "before_tree target={first_reply} old={leaf} common={first_reply} entries=2 summary=false"
        )
    );
    assert_eq!(
        notice(&mut t),
        format!("tree new={first_reply} old={leaf} summary=none fromExtension=undefined")
    );
    assert_eq!(
        notice(&mut t),
        format!(r#"result {{"cancelled":false}} leaf={first_reply}"#)
    );
    assert_eq!(t.response("g")["success"], true);
    assert_eq!(message_texts(&mut t), ["first", "reply to first"]);
    // The next prompt continues from there.
    mock.push(Reply::text("reply to third"));
    t.send(&json!({"id": "third", "type": "prompt", "message": "third"}));
    settle(&mut t);
    assert_eq!(
        message_texts(&mut t),
        ["first", "reply to first", "third", "reply to third"]
    );

    // To a user message: the leaf goes to its parent (pi re-enters the message); a label of
    // "refuse" makes the extension cancel, and nothing moves.
    t.send(&json!({"id": "r", "type": "prompt",
        "message": format!("/goto {first_user} no refuse")}));
    assert!(notice(&mut t).starts_with("before_tree"));
    assert!(notice(&mut t).starts_with(r#"result {"cancelled":true}"#));
    assert_eq!(message_texts(&mut t).len(), 4);
    t.send(&json!({"id": "u", "type": "prompt", "message": format!("/goto {first_user}")}));
    assert!(notice(&mut t).starts_with("before_tree"));
    // The first user message follows the model and thinking-level entries.
    assert!(notice(&mut t).starts_with("tree new="));
    assert!(notice(&mut t).starts_with(r#"result {"cancelled":false}"#));
    assert_eq!(message_texts(&mut t), Vec::<String>::new());

    // An unknown entry rejects the call: the command fails with pi's text.
    t.send(&json!({"id": "x", "type": "prompt", "message": "/goto nope"}));
    let error = t.event("extension_error");
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("Entry nope not found")
    );
}

#[test]
fn navigate_tree_can_summarise_the_branch_left() {
    let (mock, mut t) = start();
    notice(&mut t);
    let (_, first_reply, leaf) = two_exchanges(&mock, &mut t);

    // The model writes the summary: one request holding the abandoned branch.
    mock.push(Reply::text("they asked a second question"));
    t.send(&json!({"id": "s", "type": "prompt",
        "message": format!("/goto {first_reply} yes sum focus")}));
    assert!(notice(&mut t).ends_with("entries=2 summary=true"));
    let tree_note = notice(&mut t);
    assert!(
        tree_note.contains(&format!(
            "old={leaf} summary=branch_summary fromExtension=false"
        )),
        "{tree_note}"
    );
    assert_eq!(t.response("s")["success"], true);
    assert!(notice(&mut t).starts_with(r#"result {"cancelled":false}"#));
    let request = mock.requests().last().unwrap().body.to_string();
    assert!(request.contains("second"), "{request}");
    assert!(
        request.contains("Also pay attention to: focus"),
        "{request}"
    );
    let texts = message_texts(&mut t);
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(
        texts[2].contains("they asked a second question"),
        "{texts:?}"
    );
    let entries = t.request(json!({"id": "e", "type": "get_entries"}));
    let summary = entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "branch_summary")
        .unwrap()
        .clone();
    assert_eq!(summary["fromId"], first_reply.as_str());
    assert_eq!(summary["parentId"], first_reply.as_str());
    // The label goes on the summary entry.
    let tree = t.request(json!({"id": "t", "type": "get_tree"}));
    assert!(tree.to_string().contains("\"label\":\"sum\""), "{tree}");

    // An extension's own summary: no model call, written `fromHook`.
    let before = mock.requests().len();
    let leaf = entries["data"]["leafId"].as_str().unwrap().to_string();
    t.send(&json!({"id": "o", "type": "prompt",
        "message": format!("/goto {first_reply} yes - mine")}));
    notice(&mut t);
    let tree_note = notice(&mut t);
    assert!(
        tree_note.ends_with("summary=branch_summary fromExtension=true"),
        "{tree_note}"
    );
    assert_eq!(t.response("o")["success"], true);
    assert_eq!(mock.requests().len(), before);
    let entries = t.request(json!({"id": "e2", "type": "get_entries", "since": leaf}));
    let written = &entries["data"]["entries"][0];
    assert_eq!(written["summary"], "written by the extension");
    assert_eq!(written["fromHook"], true);
    assert_eq!(written["details"], json!({"mine": true}));
}

#[test]
fn reload_imports_the_extensions_afresh_between_shutdown_and_start() {
    let (_mock, mut t) = start();
    let first = notice(&mut t);
    let token = first.rsplit('=').next().unwrap().to_string();
    t.send(&json!({"id": "r", "type": "prompt", "message": "/again"}));
    assert_eq!(notice(&mut t), "shutdown reload");
    let started = notice(&mut t);
    assert!(started.starts_with("start reload token="), "{started}");
    assert_ne!(started.rsplit('=').next().unwrap(), token);
    assert_eq!(t.response("r")["success"], true);
    // The new instance answers the command list; the old one is stale but harmless.
    let commands = t.request(json!({"id": "c", "type": "get_commands"}));
    assert!(commands.to_string().contains("\"goto\""));
}

const PROJECT_EXTENSION: &str = r#"
export default function (pi) {
    pi.registerCommand("proj", { description: "From the project", handler: async () => {} });
}
"#;

/// Whether the project's extension (its `proj` command) is loaded in a tau started in
/// `dirs` with these arguments and environment.
fn project_loaded(
    dirs: &tau_test_kit::Dirs,
    args: &[&str],
    env: &[(&str, &str)],
) -> (bool, String) {
    let mut builder = tau().dirs(dirs.clone()).arg("--no-session");
    for arg in args {
        builder = builder.arg(*arg);
    }
    for (key, value) in env {
        builder = builder.env(*key, *value);
    }
    let mut t = ready_tau(builder);
    let commands = t.request(json!({"id": "c", "type": "get_commands"}));
    let loaded = commands.to_string().contains("\"proj\"");
    t.close_stdin();
    t.wait_exit(Duration::from_secs(10));
    (loaded, t.stderr())
}

#[test]
fn a_projects_extensions_wait_for_trust() {
    let dirs = tau_test_kit::Dirs::new();
    let project = dirs.cwd().join(".pi/extensions");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("proj.js"), PROJECT_EXTENSION).unwrap();
    let decider = fixture("trust-decider.ts");

    // RPC mode cannot ask: untrusted by default, trusted with --approve.
    assert!(!project_loaded(&dirs, &[], &[]).0);
    assert!(project_loaded(&dirs, &["--approve"], &[]).0);
    // An undecided extension leaves it to the defaults; "no" keeps the project out.
    assert!(!project_loaded(&dirs, &["-e", &decider], &[("TRUST_ANSWER", "undecided")]).0);
    assert!(!project_loaded(&dirs, &["-e", &decider], &[("TRUST_ANSWER", "no")]).0);
    // "yes" lets it in, with the trust context pi gives (no UI; notify on stderr).
    let (loaded, stderr) = project_loaded(&dirs, &["-e", &decider], &[("TRUST_ANSWER", "yes")]);
    assert!(loaded);
    assert!(stderr.contains("hasUI=false"), "{stderr}");
    assert!(!dirs.agent_dir().join("trust.json").exists());
    // Remembered, the decision holds without the extension, in pi's trust.json.
    let remember = [("TRUST_ANSWER", "yes"), ("TRUST_REMEMBER", "1")];
    assert!(project_loaded(&dirs, &["-e", &decider], &remember).0);
    let store = std::fs::read_to_string(dirs.agent_dir().join("trust.json")).unwrap();
    let store: Value = serde_json::from_str(&store).unwrap();
    let cwd = std::fs::canonicalize(dirs.cwd()).unwrap();
    assert_eq!(store[cwd.display().to_string()], true);
    assert!(project_loaded(&dirs, &[], &[]).0);
    // --no-approve wins over the store.
    assert!(!project_loaded(&dirs, &["--no-approve"], &[]).0);
}

#[test]
fn default_project_trust_setting_decides_when_nothing_else_does() {
    let dirs = tau_test_kit::Dirs::new();
    std::fs::create_dir_all(dirs.cwd().join(".tau/extensions")).unwrap();
    std::fs::write(
        dirs.cwd().join(".tau/extensions/proj.js"),
        PROJECT_EXTENSION,
    )
    .unwrap();
    std::fs::write(
        dirs.agent_dir().join("settings.json"),
        r#"{"defaultProjectTrust": "always"}"#,
    )
    .unwrap();
    assert!(project_loaded(&dirs, &[], &[]).0);
    std::fs::write(
        dirs.agent_dir().join("settings.json"),
        r#"{"defaultProjectTrust": "never"}"#,
    )
    .unwrap();
    assert!(!project_loaded(&dirs, &[], &[]).0);
}

fn model_ids(t: &mut Tau) -> Vec<String> {
    let models = t.request(json!({"id": "am", "type": "get_available_models"}));
    models["data"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["provider"].as_str().unwrap(),
                m["id"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn providers_registered_by_an_extension_serve_the_run() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        tau()
            .env("MOCK_URL", mock.url())
            .arg("--no-session")
            .arg("-e")
            .arg(fixture("provider.ts"))
            .arg("--model")
            .arg("ext-llm/ext-model"),
    );
    // Registered while loading: there before the model was chosen.
    let state = t.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["data"]["model"]["id"], "ext-model");
    assert_eq!(state["data"]["model"]["name"], "Model ext-model");
    mock.push(Reply::text("from the extension's provider"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    t.event("agent_settled");
    let request = mock.requests().last().unwrap().clone();
    assert_eq!(request.body["model"], "ext-model");
    assert!(
        format!("{:?}", request.headers).contains("ext-key"),
        "{:?}",
        request.headers
    );

    // Registered and unregistered later, from a command.
    assert!(!model_ids(&mut t).contains(&"late-llm/late-model".to_string()));
    t.send(&json!({"id": "m", "type": "prompt", "message": "/more"}));
    assert_eq!(t.response("m")["success"], true);
    assert!(model_ids(&mut t).contains(&"late-llm/late-model".to_string()));
    let set = t.request(
        json!({"id": "sm", "type": "set_model", "provider": "late-llm",
        "modelId": "late-model"}),
    );
    assert_eq!(set["success"], true, "{set}");
    t.send(&json!({"id": "l", "type": "prompt", "message": "/less"}));
    assert_eq!(t.response("l")["success"], true);
    assert!(!model_ids(&mut t).contains(&"late-llm/late-model".to_string()));
}

#[test]
fn a_provider_config_models_json_would_refuse_stops_tau_at_start() {
    let dirs = tau_test_kit::Dirs::new();
    std::fs::write(
        dirs.cwd().join("bad.js"),
        r#"export default (pi) => pi.registerProvider("bad", { models: [{ id: "m" }] });"#,
    )
    .unwrap();
    let mut t = tau()
        .dirs(dirs.clone())
        .arg("-e")
        .arg(dirs.cwd().join("bad.js").display().to_string())
        .spawn();
    assert!(!t.wait_exit(Duration::from_secs(15)).success());
    let stderr = t.stderr();
    assert!(stderr.contains("Extension \""), "{stderr}");
    assert!(stderr.contains("bad.js\" error:"), "{stderr}");
}

#[test]
fn installed_pi_packages_load_and_missing_ones_are_named() {
    let dirs = tau_test_kit::Dirs::new();
    let package = dirs.agent_dir().join("npm/node_modules/@acme/tools");
    std::fs::create_dir_all(package.join("src")).unwrap();
    std::fs::write(
        package.join("package.json"),
        r#"{"name": "@acme/tools", "pi": {"extensions": ["src/*.js"]}}"#,
    )
    .unwrap();
    std::fs::write(package.join("src/proj.js"), PROJECT_EXTENSION).unwrap();
    std::fs::write(
        dirs.agent_dir().join("settings.json"),
        r#"{"packages": ["npm:@acme/tools@1.0.0", "npm:not-installed"]}"#,
    )
    .unwrap();
    let (loaded, stderr) = project_loaded(&dirs, &[], &[]);
    assert!(loaded, "{stderr}");
    assert!(
        stderr.contains("Warning: Package npm:not-installed is not installed"),
        "{stderr}"
    );
    // `-e` of a package that is not installed is pi's load error.
    let (status, _, stderr, _) = tau()
        .dirs(dirs.clone())
        .arg("-e")
        .arg("npm:absent")
        .run(b"");
    assert_eq!(status.code(), Some(1));
    assert!(
        stderr.contains("Package npm:absent is not installed"),
        "{stderr}"
    );
}

/// `ctx.shutdown()` in the middle of a run (issue 22): tau finishes the run, answers the
/// command the host sends after `agent_end`, and only then ends, as pi does.
#[test]
fn a_shutdown_during_a_run_answers_the_next_command_then_ends() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        tau()
            .agent_file("models.json", crate::mock_models(&mock))
            .arg("--no-session")
            .arg("-e")
            .arg(fixture("shutdown.ts")),
    );
    mock.push(Reply::new().tool_call("call_1", "bash", json!({"command": "true"})));
    mock.push(Reply::text("done"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    t.event("agent_end");
    // tau has not left: the host's next command is read and answered.
    let state = t.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["success"], true);
    // Not `isStreaming`: the extensions' `agent_end` handlers are the run's post-run work, and
    // on a loaded machine the command can arrive while they still run (it is true then).
    let status = t.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
}

#[test]
fn rpc_navigate_tree_runs_the_extension_events_around_it() {
    // tau's `navigate_tree` command (the terminal's `/tree`) is `ctx.navigateTree` for a
    // client: the same `session_before_tree` and `session_tree` around the move.
    let (mock, mut t) = start();
    assert!(notice(&mut t).starts_with("start startup"));
    let (_, first_reply, leaf) = two_exchanges(&mock, &mut t);
    t.send(&json!({"id": "n", "type": "navigate_tree", "targetId": first_reply}));
    assert_eq!(
        notice(&mut t),
        format!(
            "before_tree target={first_reply} old={leaf} common={first_reply} entries=2 summary=false"
        )
    );
    assert!(notice(&mut t).starts_with(&format!("tree new={first_reply} old={leaf}")));
    let r = t.response("n");
    assert_eq!(r["data"], json!({"cancelled": false}));
    assert_eq!(message_texts(&mut t), ["first", "reply to first"]);
    // An extension cancelling it is answered as such, and nothing moves.
    t.send(&json!({"id": "c", "type": "navigate_tree", "targetId": leaf, "label": "refuse"}));
    assert!(notice(&mut t).starts_with("before_tree"));
    assert_eq!(t.response("c")["data"], json!({"cancelled": true}));
    assert_eq!(message_texts(&mut t), ["first", "reply to first"]);
}

#[test]
fn a_shortcut_runs_its_handler_with_dialogs_and_answers_when_done() {
    let mut t = ready_tau(
        tau()
            .arg("--no-session")
            .arg("-e")
            .arg(fixture("shortcut.ts")),
    );
    let listed = t.request(json!({"id": "l", "type": "get_shortcuts"}));
    let keys: Vec<&str> = listed["data"]["shortcuts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["ctrl+alt+k", "ctrl+c", "ctrl+alt+t"]);
    assert!(
        listed["data"]["shortcuts"][0]["extension"]
            .as_str()
            .unwrap()
            .ends_with("shortcut.ts")
    );

    // Any order of the modifiers names the same key.
    t.send(&json!({"id": "k", "type": "run_shortcut", "key": "alt+ctrl+K"}));
    let select = t.event("extension_ui_request");
    assert_eq!(select["method"], "select");
    assert_eq!(select["title"], "Shortcut menu");
    t.send(&json!({"type": "extension_ui_response", "id": select["id"], "value": "beta"}));
    assert_eq!(notice(&mut t), "shortcut chose beta mode=ui");
    assert_eq!(t.response("k")["success"], true);

    // A handler that throws is reported as pi reports a failing command, and answered.
    t.send(&json!({"id": "t", "type": "run_shortcut", "key": "ctrl+alt+t"}));
    let error = t.event("extension_error");
    assert_eq!(error["extensionPath"], "shortcut:ctrl+alt+t");
    assert_eq!(error["event"], "shortcut");
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("the shortcut broke"),
        "{error}"
    );
    assert_eq!(t.response("t")["success"], true);

    let r = t.request(json!({"id": "u", "type": "run_shortcut", "key": "ctrl+z"}));
    assert_eq!(r["success"], false);
    assert_eq!(r["error"], "Unknown shortcut: ctrl+z");
}
