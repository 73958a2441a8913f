//! Skills and prompt templates through the binary: what `get_commands` lists (and the flags
//! that leave resources out), how `/template args` and `/skill:name args` reach the model,
//! and the skills list in the system prompt.

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::{Tau, TauBuilder};

use crate::{ready_tau, tau};

const USER_SKILL: &str =
    "---\nname: user-skill\ndescription: A user skill\n---\n\nDo user things.\n";
const QUIET_SKILL: &str =
    "---\ndescription: Project skill\ndisable-model-invocation: true\n---\nProject body\n";
const AGENTS_SKILL: &str = "---\ndescription: From the agents folder\n---\nagents body\n";
const REVIEW: &str =
    "---\ndescription: Review code\nargument-hint: <file>\n---\nReview $1 please; all: $@\n";
const PLAN: &str =
    "First line of the project prompt that is quite long and goes past sixty chars\nmore\n";

/// A tau with skills and templates in the agent directory, the project's `.pi/` and `.tau/`
/// and `.agents/`, talking to a mock, without a session file.
fn builder(mock: &BackgroundMock) -> TauBuilder {
    with_resources(mock).arg("--no-session")
}

fn with_resources(mock: &BackgroundMock) -> TauBuilder {
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.url()), "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "mock-1", "contextWindow": 100000, "maxTokens": 4096}],
    }}});
    tau()
        .agent_file("models.json", models.to_string())
        .agent_file("skills/user-skill/SKILL.md", USER_SKILL)
        .agent_file("prompts/rev.md", REVIEW)
        .cwd_file(".pi/skills/proj-skill/SKILL.md", QUIET_SKILL)
        .cwd_file(".agents/skills/agents-skill/SKILL.md", AGENTS_SKILL)
        .cwd_file(".pi/prompts/plan.md", PLAN)
        .cwd_file(
            ".tau/prompts/tau-only.md",
            "---\ndescription: tau's own\n---\nfrom .tau\n",
        )
        .cwd_file(
            "extra/clip.md",
            "---\ndescription: cli one\n---\ncli body $ARGUMENTS\n",
        )
        .cwd_file(".git/HEAD", "ref: refs/heads/main\n")
}

fn commands(t: &mut Tau) -> Vec<Value> {
    let r = t.request(json!({"type": "get_commands"}));
    assert_eq!(r["success"], true, "{r}");
    r["data"]["commands"].as_array().unwrap().clone()
}

fn names(commands: &[Value]) -> Vec<String> {
    commands
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// Sends a prompt and returns the text of the user message the model received.
fn sent_text(mock: &BackgroundMock, t: &mut Tau, message: &str) -> String {
    mock.push(Reply::text("ok"));
    let r = t.request(json!({"type": "prompt", "message": message}));
    assert_eq!(r["success"], true, "{r}");
    t.event("agent_settled");
    let body = mock.requests().last().unwrap().body.clone();
    let user = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(user["role"], "user");
    match &user["content"] {
        Value::String(text) => text.clone(),
        content => content[0]["text"].as_str().unwrap().to_string(),
    }
}

#[test]
fn get_commands_lists_templates_then_skills_with_their_sources() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock).arg("--prompt-template").arg("extra/clip.md"));
    let cwd = t.cwd().to_path_buf();
    let agent = t.agent_dir().to_path_buf();
    let list = commands(&mut t);
    assert_eq!(
        names(&list),
        [
            "tau-only",
            "plan",
            "rev",
            "clip",
            "skill:proj-skill",
            "skill:agents-skill",
            "skill:user-skill"
        ]
    );
    let plan = &list[1];
    assert_eq!(
        plan["description"],
        "First line of the project prompt that is quite long and goes..."
    );
    assert_eq!(plan["source"], "prompt");
    assert_eq!(
        plan["sourceInfo"],
        json!({"path": cwd.join(".pi/prompts/plan.md"), "source": "auto", "scope": "project",
            "origin": "top-level", "baseDir": cwd.join(".pi")})
    );
    assert_eq!(
        list[2]["sourceInfo"],
        json!({"path": agent.join("prompts/rev.md"), "source": "auto", "scope": "user",
            "origin": "top-level", "baseDir": agent})
    );
    assert_eq!(
        list[3]["sourceInfo"],
        json!({"path": cwd.join("extra/clip.md"), "source": "local", "scope": "temporary",
            "origin": "top-level", "baseDir": cwd.join("extra")})
    );
    let quiet = &list[4];
    assert_eq!(quiet["description"], "Project skill");
    assert_eq!(quiet["source"], "skill");
    assert_eq!(
        list[5]["sourceInfo"]["baseDir"],
        json!(cwd.join(".agents")),
        "{list:#?}"
    );
    assert_eq!(list[6]["sourceInfo"]["scope"], "user");
    let keys: Vec<&str> = list[6]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["name", "description", "source", "sourceInfo"]);
}

#[test]
fn flags_leave_resources_out() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        builder(&mock)
            .arg("--no-skills")
            .arg("--no-prompt-templates")
            .arg("--prompt-template")
            .arg("extra/clip.md"),
    );
    assert_eq!(names(&commands(&mut t)), ["clip"]);

    let mut t = ready_tau(builder(&mock).arg("--no-approve"));
    assert_eq!(names(&commands(&mut t)), ["rev", "skill:user-skill"]);

    // Nothing installed: an empty list.
    let mut t = ready_tau(tau().arg("--no-session"));
    assert_eq!(commands(&mut t), Vec::<Value>::new());
}

#[test]
fn templates_and_skills_expand_before_the_model_sees_them() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock));
    assert_eq!(
        sent_text(&mock, &mut t, "/rev src/main.rs \"and tests\""),
        "Review src/main.rs please; all: src/main.rs and tests"
    );
    let skill_file = t.agent_dir().join("skills/user-skill/SKILL.md");
    let skill_dir = t.agent_dir().join("skills/user-skill");
    let expanded = sent_text(&mock, &mut t, "/skill:user-skill  fix the build ");
    assert_eq!(
        expanded,
        format!(
            "<skill name=\"user-skill\" location=\"{}\">\nPaths in this skill are relative to {}.\n\nDo user things.\n</skill>\n\nfix the build",
            skill_file.display(),
            skill_dir.display()
        )
    );
    // Unknown names go to the model as they are.
    assert_eq!(sent_text(&mock, &mut t, "/nope a b"), "/nope a b");
    assert_eq!(sent_text(&mock, &mut t, "/skill:nope"), "/skill:nope");
    // The history keeps the expanded text.
    let r = t.request(json!({"type": "get_messages"}));
    let first = &r["data"]["messages"][0]["content"][0]["text"];
    assert_eq!(
        first,
        "Review src/main.rs please; all: src/main.rs and tests"
    );
}

#[test]
fn the_system_prompt_lists_the_skills_the_model_may_load() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock));
    sent_text(&mock, &mut t, "hello");
    let system = mock.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let skill_file = t.agent_dir().join("skills/user-skill/SKILL.md");
    assert!(system.contains(&format!(
        "<available_skills>\n  <skill>\n    <name>agents-skill</name>\n    <description>From the agents folder</description>\n    <location>{}</location>\n  </skill>\n  <skill>\n    <name>user-skill</name>\n    <description>A user skill</description>\n    <location>{}</location>\n  </skill>\n</available_skills>",
        t.cwd().join(".agents/skills/agents-skill/SKILL.md").display(),
        skill_file.display()
    )), "{system}");
    assert!(
        !system.contains("proj-skill"),
        "disable-model-invocation hides it"
    );
    assert!(system.find("<available_skills>") < system.find("Current date:"));

    // Without the read tool the model could not load one: no list.
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock).arg("--tools").arg("bash"));
    sent_text(&mock, &mut t, "hello");
    let system = mock.requests()[0].body["messages"][0]["content"].to_string();
    assert!(!system.contains("available_skills"), "{system}");
}

#[test]
fn a_new_session_sees_resources_added_meanwhile() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock));
    assert!(!names(&commands(&mut t)).contains(&"later".to_string()));
    let dir = t.agent_dir().join("prompts");
    std::fs::write(dir.join("later.md"), "added later $1").unwrap();
    let r = t.request(json!({"type": "new_session"}));
    assert_eq!(r["success"], true, "{r}");
    assert!(names(&commands(&mut t)).contains(&"later".to_string()));
    assert_eq!(sent_text(&mock, &mut t, "/later x"), "added later x");
}

#[test]
fn settings_list_more_folders_relative_to_their_file() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(
        builder(&mock)
            .agent_file(
                "settings.json",
                json!({
                    "skills": ["extra-skills", "!*-old", "+extra-skills/keep-old",
                        "-skills/user-skill"],
                    "prompts": ["more-prompts", "more-prompts/**/nested*.md"],
                })
                .to_string(),
            )
            .agent_file(
                "extra-skills/listed/SKILL.md",
                "---\ndescription: Listed in settings\n---\nx",
            )
            .agent_file(
                "extra-skills/retired-old/SKILL.md",
                "---\ndescription: Left out by !*-old\n---\nx",
            )
            .agent_file(
                "extra-skills/keep-old/SKILL.md",
                "---\ndescription: Brought back by +\n---\nx",
            )
            .agent_file("more-prompts/deep/down/nested.md", "nested one")
            .agent_file("more-prompts/other.md", "not matched by the glob")
            // A trusted project's settings list a folder outside it.
            .arg("--approve")
            .cwd_file(
                ".pi/settings.json",
                json!({"prompts": ["../team-prompts"]}).to_string(),
            )
            .cwd_file("team-prompts/team.md", "team one")
            .cwd_file(".pi/prompts/secret.md", "kept out")
            .cwd_file(".pi/prompts/.gitignore", "secret.md\n"),
    );
    let cwd = t.cwd().to_path_buf();
    let agent = t.agent_dir().to_path_buf();
    let list = commands(&mut t);
    assert_eq!(
        names(&list),
        [
            "team",
            "tau-only",
            "plan",
            "nested",
            "rev",
            "skill:proj-skill",
            "skill:agents-skill",
            "skill:keep-old",
            "skill:listed",
        ]
    );
    assert_eq!(
        list[0]["sourceInfo"],
        json!({"path": cwd.join("team-prompts/team.md"), "source": "local", "scope": "project",
            "origin": "top-level", "baseDir": cwd.join(".pi")})
    );
    assert_eq!(
        list[8]["sourceInfo"],
        json!({"path": agent.join("extra-skills/listed/SKILL.md"), "source": "local",
            "scope": "user", "origin": "top-level", "baseDir": agent})
    );
}

#[test]
fn a_skill_file_gone_since_startup_is_reported_and_the_text_kept() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(builder(&mock));
    // Answered only once the session (and its resources) exist.
    assert!(names(&commands(&mut t)).contains(&"skill:user-skill".to_string()));
    let file = t.agent_dir().join("skills/user-skill/SKILL.md");
    std::fs::remove_file(&file).unwrap();
    mock.push(Reply::text("ok"));
    t.send(&json!({"id": "p", "type": "prompt", "message": "/skill:user-skill go"}));
    let error = t.event("extension_error");
    assert_eq!(error["extensionPath"], json!(file));
    assert_eq!(error["event"], "skill_expansion");
    assert!(!error["error"].as_str().unwrap().is_empty());
    assert_eq!(t.response("p")["success"], true);
    t.event("agent_settled");
    let body = mock.requests().last().unwrap().body.clone();
    let user = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert!(user["content"].to_string().contains("/skill:user-skill go"));
}

#[test]
fn a_session_opened_at_startup_has_its_resources() {
    let mock = MockServer::start_background().unwrap();
    let dirs = tau_test_kit::Dirs::new();
    let cwd = dirs.cwd().canonicalize().unwrap();
    let header = json!({"type": "session", "version": 3,
        "id": "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0002", "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": cwd});
    let message = json!({"type": "message", "id": "aaaaaaaa", "parentId": null,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": "earlier", "timestamp": 1}});
    let path = cwd.join("opened.jsonl");
    std::fs::write(&path, format!("{header}\n{message}\n")).unwrap();
    let mut t = ready_tau(
        with_resources(&mock)
            .dirs(dirs)
            .arg("--session")
            .arg(path.to_str().unwrap()),
    );
    assert!(names(&commands(&mut t)).contains(&"skill:user-skill".to_string()));
    assert_eq!(
        sent_text(&mock, &mut t, "/rev a.rs"),
        "Review a.rs please; all: a.rs"
    );
}
