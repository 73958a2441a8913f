//! pi packages through the binary: `tau install|remove|update|list` against local stand-ins
//! for the registry (a path, a tarball installed by the real npm offline, a fake `npmCommand`,
//! a local git repository behind a rewritten URL), a package loaded whole (its extension, skill
//! and prompt template reach the model and `get_commands`), project scope and trust, and
//! `--export`. No test uses the network.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use serde_json::{Value, json};
use tau_mock_llm::{BackgroundMock, MockServer, Reply};
use tau_test_kit::{Dirs, Tau, TauBuilder};

use crate::{mock_models, ready_tau, tau};

/// Settings as pi writes them (two-space JSON, no final newline), with a package list to come
/// back to byte for byte.
const USER_SETTINGS: &str = "{\n  \"defaultThinkingLevel\": \"low\",\n  \"packages\": []\n}";

/// A pi package in `dir`: an extension registering a tool and a command, a skill and a prompt
/// template, named by its manifest.
fn write_package(dir: &Path, name: &str, version: &str) {
    let files = [
        (
            "package.json",
            json!({"name": name, "version": version, "keywords": ["pi-package"],
                   "pi": {"extensions": ["./extensions"], "skills": ["./skills"],
                          "prompts": ["./prompts"]}})
            .to_string(),
        ),
        (
            "extensions/tool.ts",
            "export default function (pi: any) {\n\
             pi.registerTool({name: \"pkg_tool\", label: \"Package tool\",\n\
               description: \"A tool from the package\",\n\
               parameters: {type: \"object\", properties: {}},\n\
               execute: async () => ({content: [{type: \"text\", text: \"done\"}]})});\n\
             pi.registerCommand(\"pkg-cmd\", {description: \"From the package\",\n\
               handler: async () => {}});\n}\n"
                .to_string(),
        ),
        (
            "skills/pkg-skill/SKILL.md",
            format!("---\nname: pkg-skill\ndescription: Packaged skill {version}\n---\nUse it.\n"),
        ),
        (
            "prompts/greet.md",
            "---\ndescription: Greet someone\n---\nPlease greet $1 warmly.\n".to_string(),
        ),
    ];
    for (relative, text) in files {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// npm without the network or the machine's configuration.
fn offline_npm(builder: TauBuilder) -> TauBuilder {
    builder
        .env("npm_config_offline", "true")
        .env("npm_config_audit", "false")
        .env("npm_config_fund", "false")
        .env("npm_config_update_notifier", "false")
}

/// Runs `tau <args>` in `dirs` to its end: exit status, stdout, stderr.
fn command(dirs: &Dirs, args: &[&str]) -> (ExitStatus, String, String) {
    let builder = offline_npm(tau().dirs(dirs.clone()).raw_args(args.iter().copied()));
    let (status, out, err, _) = builder.run(b"");
    (status, String::from_utf8_lossy(&out).into_owned(), err)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn settings_packages(file: &Path) -> Value {
    serde_json::from_str::<Value>(&read(file)).unwrap()["packages"].clone()
}

fn host_installed() {
    let modules = format!(
        "{}/../../extensions/node-host/node_modules",
        env!("CARGO_MANIFEST_DIR")
    );
    assert!(
        Path::new(&modules).is_dir(),
        "the Node host's packages are not installed: run `npm ci` in extensions/node-host"
    );
}

fn rpc(mock: &BackgroundMock, dirs: &Dirs, extra: &[&str]) -> Tau {
    host_installed();
    let mut builder = tau()
        .dirs(dirs.clone())
        .agent_file("models.json", mock_models(mock))
        .arg("--no-session");
    for arg in extra {
        builder = builder.arg(*arg);
    }
    ready_tau(builder)
}

fn commands(t: &mut Tau) -> Vec<Value> {
    let r = t.request(json!({"type": "get_commands"}));
    assert_eq!(r["success"], true, "{r}");
    r["data"]["commands"].as_array().unwrap().clone()
}

fn find<'a>(commands: &'a [Value], name: &str) -> Option<&'a Value> {
    commands.iter().find(|c| c["name"] == name)
}

/// Sends `/greet Bob` and returns the request the model received.
fn greet(mock: &BackgroundMock, t: &mut Tau) -> Value {
    mock.push(Reply::text("hello Bob"));
    let r = t.request(json!({"type": "prompt", "message": "/greet Bob"}));
    assert_eq!(r["success"], true, "{r}");
    t.event("agent_settled");
    mock.requests().last().unwrap().body.clone()
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap()
}

#[test]
fn a_local_package_installs_lists_loads_whole_and_removes_to_the_same_bytes() {
    let dirs = Dirs::new();
    let pkg = dirs.cwd().join("pkgs/demo");
    write_package(&pkg, "demo", "1.0.0");
    let settings = dirs.agent_dir().join("settings.json");
    std::fs::write(&settings, USER_SETTINGS).unwrap();

    let (status, out, err) = command(&dirs, &["install", "./pkgs/demo"]);
    assert!(status.success(), "{err}");
    assert_eq!(out, "Installing ./pkgs/demo...\nInstalled ./pkgs/demo\n");
    // pi keeps a local path relative to the settings file's folder.
    let listed = settings_packages(&settings);
    let source = listed[0].as_str().unwrap().to_string();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(canonical(&dirs.agent_dir().join(&source)), canonical(&pkg));
    assert!(read(&settings).starts_with("{\n  \"defaultThinkingLevel\": \"low\",\n"));
    // Installing it again changes nothing.
    let before = read(&settings);
    assert!(command(&dirs, &["install", "./pkgs/demo"]).0.success());
    assert_eq!(read(&settings), before);

    let (status, out, _) = command(&dirs, &["list"]);
    assert!(status.success());
    assert_eq!(
        out,
        format!(
            "User packages:\n  {source}\n    {}\n",
            tau_base_normalized(&dirs.agent_dir().join(&source).display().to_string())
        )
    );

    // Loaded whole: the extension's command and tool, the template, the skill.
    let mock = MockServer::start_background().unwrap();
    let mut t = rpc(&mock, &dirs, &[]);
    let listed = commands(&mut t);
    let base = dirs.agent_dir().join(&source).display().to_string();
    let prompt = find(&listed, "greet").unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(
        prompt["sourceInfo"],
        json!({"path": pkg.join("prompts/greet.md").display().to_string(), "source": source,
               "scope": "user", "origin": "package",
               "baseDir": tau_base_normalized(&base)})
    );
    let skill = find(&listed, "skill:pkg-skill").unwrap();
    assert_eq!(skill["sourceInfo"]["origin"], "package");
    assert_eq!(skill["description"], "Packaged skill 1.0.0");
    // The extension is the package's too, as pi reports it.
    assert_eq!(
        find(&listed, "pkg-cmd").unwrap_or_else(|| panic!("{listed:?}"))["sourceInfo"],
        json!({"path": canonical(&pkg).join("extensions/tool.ts").display().to_string(),
               "source": source, "scope": "user", "origin": "package",
               "baseDir": tau_base_normalized(&base)})
    );
    let body = greet(&mock, &mut t);
    let messages = body["messages"].as_array().unwrap();
    let user = messages.last().unwrap();
    assert!(
        user.to_string().contains("Please greet Bob warmly."),
        "{user}"
    );
    let system = messages[0]["content"].as_str().unwrap();
    assert!(system.contains("<name>pkg-skill</name>"), "{system}");
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"pkg_tool"), "{tools:?}");
    t.close_stdin();
    drop(t);

    let (status, out, err) = command(&dirs, &["remove", "./pkgs/demo"]);
    assert!(status.success(), "{err}");
    assert_eq!(out, "Removing ./pkgs/demo...\nRemoved ./pkgs/demo\n");
    assert_eq!(read(&settings), USER_SETTINGS);
    let (status, _, err) = command(&dirs, &["uninstall", "./pkgs/demo"]);
    assert_eq!(status.code(), Some(1));
    assert!(
        err.contains("No matching package found for ./pkgs/demo"),
        "{err}"
    );
    assert_eq!(command(&dirs, &["list"]).1, "No packages installed.\n");

    let mock = MockServer::start_background().unwrap();
    let mut t = rpc(&mock, &dirs, &[]);
    let listed = commands(&mut t);
    assert!(find(&listed, "greet").is_none(), "{listed:?}");
}

/// The form pi reports a package folder in: the path as joined, `..` resolved.
fn tau_base_normalized(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            ".." => {
                parts.pop();
            }
            "." => {}
            other => parts.push(other),
        }
    }
    parts.join("/")
}

#[test]
fn e_of_a_package_folder_gives_its_skills_and_templates_as_pi_reports_them() {
    let dirs = Dirs::new();
    let pkg = dirs.cwd().join("demo");
    write_package(&pkg, "demo", "2.0.0");
    let mock = MockServer::start_background().unwrap();
    // Even without extension discovery and skill discovery, as in pi.
    let mut t = rpc(
        &mock,
        &dirs,
        &["-e", "./demo", "--no-extensions", "--no-skills"],
    );
    let listed = commands(&mut t);
    let prompt = find(&listed, "greet").unwrap_or_else(|| panic!("{listed:?}"));
    let dir = pkg.display().to_string();
    assert_eq!(
        prompt["sourceInfo"],
        json!({"path": format!("{dir}/prompts/greet.md"), "source": dir, "scope": "temporary",
               "origin": "package", "baseDir": dir})
    );
    assert_eq!(
        find(&listed, "skill:pkg-skill").unwrap()["sourceInfo"],
        json!({"path": format!("{dir}/skills/pkg-skill/SKILL.md"), "source": "cli",
               "scope": "temporary", "origin": "top-level"})
    );
    assert!(find(&listed, "pkg-cmd").is_some(), "{listed:?}");
    let body = greet(&mock, &mut t);
    assert!(body.to_string().contains("Please greet Bob warmly."));
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Packaged skill 2.0.0")
    );
}

/// `npm pack` of a package written in `dir`, into `into`; the tarball's path.
fn pack(dir: &Path, into: &Path) -> PathBuf {
    std::fs::create_dir_all(into).unwrap();
    let output = std::process::Command::new("npm")
        .args(["pack", "--pack-destination"])
        .arg(into)
        .current_dir(dir)
        .env("npm_config_offline", "true")
        .output()
        .expect("npm is installed");
    assert!(output.status.success(), "{output:?}");
    let name = String::from_utf8_lossy(&output.stdout).trim().to_string();
    into.join(name.lines().last().unwrap())
}

#[test]
fn npm_packages_install_update_and_remove_with_npm_itself() {
    let dirs = Dirs::new();
    let registry = dirs.home().join("registry");
    let src = dirs.home().join("src");
    write_package(&src, "demo-npm", "1.0.0");
    let tarball = pack(&src, &registry);
    let settings = dirs.agent_dir().join("settings.json");
    std::fs::write(&settings, USER_SETTINGS).unwrap();
    let source = format!("npm:demo-npm@file:{}", tarball.display());

    let (status, _, err) = command(&dirs, &["install", &source]);
    assert!(status.success(), "{err}");
    let installed = dirs.agent_dir().join("npm/node_modules/demo-npm");
    assert!(installed.join("skills/pkg-skill/SKILL.md").is_file());
    // pi's private npm project around it.
    let npm_root = dirs.agent_dir().join("npm");
    assert_eq!(read(&npm_root.join(".gitignore")), "*\n!.gitignore\n");
    assert_eq!(
        serde_json::from_str::<Value>(&read(&npm_root.join("package.json"))).unwrap()["name"],
        "pi-extensions"
    );
    assert_eq!(settings_packages(&settings), json!([source]));

    let mock = MockServer::start_background().unwrap();
    let mut t = rpc(&mock, &dirs, &[]);
    let listed = commands(&mut t);
    assert_eq!(
        find(&listed, "skill:pkg-skill").unwrap()["sourceInfo"]["baseDir"],
        installed.display().to_string()
    );
    drop(t);

    // A new version at the same place: `update` installs it again.
    write_package(&src, "demo-npm", "1.1.0");
    std::fs::remove_file(&tarball).unwrap();
    let repacked = pack(&src, &registry);
    std::fs::rename(repacked, &tarball).unwrap();
    let (status, out, err) = command(&dirs, &["update", "--extensions"]);
    assert!(status.success(), "{err}");
    assert!(out.ends_with("Updated packages\n"), "{out}");
    assert!(read(&installed.join("package.json")).contains("1.1.0"));

    let (status, _, err) = command(&dirs, &["remove", "npm:demo-npm"]);
    assert!(status.success(), "{err}");
    assert!(!installed.exists());
    assert_eq!(read(&settings), USER_SETTINGS);
}

#[test]
fn npm_command_is_honoured_and_a_failed_install_leaves_everything_as_it_was() {
    let dirs = Dirs::new();
    let log = dirs.home().join("npm.log");
    let fake = dirs.home().join("fake-npm.sh");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho \"$@\" >> {}\necho 'npm error 404 Not Found' >&2\nexit 1\n",
            log.display()
        ),
    )
    .unwrap();
    let settings_text = format!(
        "{{\n  \"npmCommand\": [\"sh\", \"{}\"],\n  \"packages\": [\n    \"npm:other@2.0.0\"\n  ]\n}}",
        fake.display()
    );
    let settings = dirs.agent_dir().join("settings.json");
    std::fs::write(&settings, &settings_text).unwrap();

    let (status, _, err) = command(&dirs, &["install", "npm:broken@1.0.0"]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("npm error 404 Not Found"), "{err}");
    assert!(
        err.contains(&format!(
            "Error: sh {} install broken@1.0.0 --prefix {} --legacy-peer-deps failed with exit code 1",
            fake.display(),
            dirs.agent_dir().join("npm").display()
        )),
        "{err}"
    );
    assert_eq!(
        read(&log),
        format!(
            "install broken@1.0.0 --prefix {} --legacy-peer-deps\n",
            dirs.agent_dir().join("npm").display()
        )
    );
    // Nothing half-written: settings as they were, no npm project left behind.
    assert_eq!(read(&settings), settings_text);
    assert!(!dirs.agent_dir().join("npm").exists());

    // A pinned version is left alone by `update`: npm does not even run.
    let (status, out, err) = command(&dirs, &["update", "--extensions"]);
    assert!(status.success(), "{err}");
    assert_eq!(out, "Updated packages\n");
    assert_eq!(read(&log).lines().count(), 1);
    let (status, _, err) = command(&dirs, &["update", "--extension", "npm:absent"]);
    assert_eq!(status.code(), Some(1));
    assert!(
        err.contains("No matching package found for npm:absent"),
        "{err}"
    );

    // A path that does not exist, and settings that do not parse: clear errors, no change.
    let (status, _, err) = command(&dirs, &["install", "./nowhere"]);
    assert_eq!(status.code(), Some(1));
    assert!(
        err.contains(&format!(
            "Error: Path does not exist: {}",
            dirs.cwd().join("nowhere").display()
        )),
        "{err}"
    );
    assert_eq!(read(&settings), settings_text);
    std::fs::create_dir_all(dirs.cwd().join("there")).unwrap();
    std::fs::write(&settings, "{ broken").unwrap();
    let (status, _, err) = command(&dirs, &["install", "./there"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("settings not changed: cannot parse"), "{err}");
    assert_eq!(read(&settings), "{ broken");

    // tau does not update itself, and says so.
    let (status, _, err) = command(&dirs, &["update"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("tau does not update itself"), "{err}");
    let (status, _, err) = command(&dirs, &["install"]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("Missing install source."), "{err}");
}

#[test]
fn project_packages_need_a_trusted_project_to_install_and_to_load() {
    let dirs = Dirs::new();
    write_package(&dirs.cwd().join("vendor/demo"), "demo", "1.0.0");
    // A project settings file waits for trust.
    let project = dirs.cwd().join(".pi/settings.json");
    std::fs::create_dir_all(project.parent().unwrap()).unwrap();
    std::fs::write(&project, "{}").unwrap();

    let (status, _, err) = command(&dirs, &["install", "-l", "./vendor/demo"]);
    assert_eq!(status.code(), Some(1));
    assert!(
        err.contains("Project is not trusted. Use --approve to modify local package config."),
        "{err}"
    );
    assert_eq!(read(&project), "{}");

    let (status, _, err) = command(&dirs, &["install", "-l", "--approve", "./vendor/demo"]);
    assert!(status.success(), "{err}");
    assert_eq!(settings_packages(&project), json!(["../vendor/demo"]));
    assert!(!dirs.agent_dir().join("settings.json").exists());
    let (_, out, _) = command(&dirs, &["list", "-a"]);
    assert!(
        out.starts_with("Project packages:\n  ../vendor/demo\n"),
        "{out}"
    );

    // Untrusted, the project's package does not load; trusted, it does, as the project's.
    let mock = MockServer::start_background().unwrap();
    let mut t = rpc(&mock, &dirs, &[]);
    assert!(find(&commands(&mut t), "greet").is_none());
    drop(t);
    let mut t = rpc(&mock, &dirs, &["--approve"]);
    let listed = commands(&mut t);
    let prompt = find(&listed, "greet").unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(prompt["sourceInfo"]["scope"], "project");
    assert_eq!(prompt["sourceInfo"]["source"], "../vendor/demo");
    drop(t);

    let (status, _, err) = command(&dirs, &["remove", "-l", "-a", "./vendor/demo"]);
    assert!(status.success(), "{err}");
    assert_eq!(settings_packages(&project), json!([]));
}

/// git with `https://example.test/` read as a folder of local repositories.
fn git_env(builder: TauBuilder, repos: &Path) -> TauBuilder {
    builder
        .env("GIT_CONFIG_COUNT", "1")
        .env(
            "GIT_CONFIG_KEY_0",
            format!("url.file://{}/.insteadOf", repos.display()),
        )
        .env("GIT_CONFIG_VALUE_0", "https://example.test/")
        .env("GIT_CONFIG_NOSYSTEM", "1")
}

fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.test")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.test")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

#[test]
fn git_packages_clone_update_and_remove_from_a_local_repository() {
    let dirs = Dirs::new();
    let repos = dirs.home().join("repos");
    let work = repos.join("team/demo");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    // No package.json: nothing for npm to install after the clone.
    let skill = work.join("skills/git-skill/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(&skill, "---\ndescription: From git v1\n---\nbody\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "v1"]);

    let run = |args: &[&str]| {
        let builder = git_env(
            tau().dirs(dirs.clone()).raw_args(args.iter().copied()),
            &repos,
        );
        let (status, out, err, _) = builder.run(b"");
        (status, String::from_utf8_lossy(&out).into_owned(), err)
    };
    let source = "git:example.test/team/demo";
    let (status, _, err) = run(&["install", source]);
    assert!(status.success(), "{err}");
    let clone = dirs.agent_dir().join("git/example.test/team/demo");
    assert!(clone.join("skills/git-skill/SKILL.md").is_file());
    assert_eq!(
        settings_packages(&dirs.agent_dir().join("settings.json")),
        json!([source])
    );

    // A repository that does not exist: git's error, then tau's, and nothing left behind.
    let settings_before = read(&dirs.agent_dir().join("settings.json"));
    let (status, _, err) = run(&["install", "git:example.test/team/missing"]);
    assert_eq!(status.code(), Some(1));
    assert!(
        err.contains("Error: git clone https://example.test/team/missing"),
        "{err}"
    );
    assert!(
        !dirs
            .agent_dir()
            .join("git/example.test/team/missing")
            .exists()
    );
    assert_eq!(
        read(&dirs.agent_dir().join("settings.json")),
        settings_before
    );

    std::fs::write(&skill, "---\ndescription: From git v2\n---\nbody\n").unwrap();
    git(&work, &["commit", "-q", "-am", "v2"]);
    let (status, out, err) = run(&["update", source]);
    assert!(status.success(), "{err}");
    assert_eq!(out, format!("Updating {source}...\nUpdated {source}\n"));
    assert!(read(&clone.join("skills/git-skill/SKILL.md")).contains("v2"));

    let (status, _, err) = run(&["remove", source]);
    assert!(status.success(), "{err}");
    assert!(!clone.exists());
    // Empty folders up to the install root go too.
    assert!(!dirs.agent_dir().join("git/example.test").exists());
    assert!(dirs.agent_dir().join("git").exists());
}

#[test]
fn export_writes_a_session_file_as_html_and_exits() {
    let mock = MockServer::start_background().unwrap();
    let mut t = ready_tau(tau().agent_file("models.json", mock_models(&mock)));
    mock.push(Reply::text("The answer is forty-two."));
    let r = t.request(json!({"type": "prompt", "message": "What is the answer?"}));
    assert_eq!(r["success"], true, "{r}");
    t.event("agent_settled");
    let state = t.request(json!({"type": "get_state"}));
    let file = state["data"]["sessionFile"].as_str().unwrap().to_string();
    let dirs = t.dirs();
    t.close_stdin();
    drop(t);

    let (status, out, err) = command(&dirs, &["--export", &file, "out.html"]);
    assert!(status.success(), "{err}");
    assert_eq!(out, "Exported to: out.html\n");
    let html = read(&dirs.cwd().join("out.html"));
    assert!(html.contains("The answer is forty-two."), "{}", html.len());
    assert!(html.contains("What is the answer?"));

    // Without an output name, pi's default name in the working directory.
    let (status, out, _) = command(&dirs, &["--export", &file]);
    assert!(status.success());
    let name = out
        .strip_prefix("Exported to: ")
        .unwrap()
        .trim()
        .to_string();
    assert!(
        name.starts_with("pi-session-") && name.ends_with(".html"),
        "{name}"
    );
    assert!(dirs.cwd().join(&name).is_file());

    let (status, _, err) = command(&dirs, &["--export", "missing.jsonl"]);
    assert_eq!(status.code(), Some(1));
    assert_eq!(
        err,
        format!(
            "Error: File not found: {}\n",
            dirs.cwd().join("missing.jsonl").display()
        )
    );
}
