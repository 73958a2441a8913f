//! Where the session works and what it read from there: the startup configuration (whose
//! working directory moves with a switched-to session), the context files, the skills and
//! prompt templates. The system prompt and the slash-command list are made from these, so
//! they live here too; the session decides when to read the disk again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::resources::Resources;
use crate::{SessionConfig, Settings};

/// The session's directory and what was read from it.
#[derive(Debug)]
pub struct Workspace {
    config: SessionConfig,
    /// Context files (`AGENTS.md`, …), read at startup and when the directory changes.
    context_files: Vec<(PathBuf, String)>,
    /// Skills and prompt templates of the working directory.
    resources: Resources,
}

impl Workspace {
    /// Reads the context files, and the skills and templates unless `defer_resources` (a
    /// session still being opened reads them when it settles, as a switched-to one does).
    pub(crate) fn new(config: SessionConfig, defer_resources: bool) -> Self {
        let resources = if defer_resources {
            Resources::default()
        } else {
            Resources::load(&config.agent_dir, &config.cwd, &config.resources)
        };
        let context_files = if config.no_context_files {
            Vec::new()
        } else {
            crate::system_prompt::load_context_files(
                &config.agent_dir,
                &config.cwd,
                config.resources.project.trusted_by_user(),
            )
        };
        Self {
            config,
            context_files,
            resources,
        }
    }

    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// The session's working directory.
    pub fn cwd(&self) -> &Path {
        &self.config.cwd
    }

    /// The skills and prompt templates `get_commands` lists.
    pub fn resources(&self) -> &Resources {
        &self.resources
    }

    pub fn project_trusted(&self) -> bool {
        self.config.resources.project.trusted()
    }

    /// Skills and templates read again (`ctx.reload()`, a new session): added ones count.
    pub(crate) fn reload_resources(&mut self) {
        self.resources = Resources::load(
            &self.config.agent_dir,
            &self.config.cwd,
            &self.config.resources,
        );
    }

    /// Skills and prompt templates the extensions' `resources_discover` handlers named: added
    /// to the sources (as `--skill`/`--prompt-template` would) and loaded again.
    pub(crate) fn add_resource_paths(&mut self, skills: Vec<String>, prompts: Vec<String>) {
        if skills.is_empty() && prompts.is_empty() {
            return;
        }
        let options = &mut self.config.resources;
        for path in skills {
            if !options.skills.contains(&path) {
                options.skills.push(path);
            }
        }
        for path in prompts {
            if !options.prompt_templates.contains(&path) {
                options.prompt_templates.push(path);
            }
        }
        self.reload_resources();
    }

    /// A switched-to session works in its own directory; its context files replace these.
    pub(crate) fn move_to(&mut self, cwd: PathBuf) {
        if cwd == self.config.cwd {
            return;
        }
        self.config.cwd = cwd;
        if !self.config.no_context_files {
            // Trust was given to the folder tau started in, not to this one.
            self.context_files = crate::system_prompt::load_context_files(
                &self.config.agent_dir,
                &self.config.cwd,
                false,
            );
        }
    }

    /// The directory new sessions go to: next to `current_file`, else the configured one.
    pub(crate) fn sessions_dir(&self, current_file: Option<&Path>, settings: &Settings) -> PathBuf {
        if let Some(dir) = current_file.and_then(Path::parent) {
            return dir.to_path_buf();
        }
        self.config
            .session_dir
            .clone()
            .or_else(|| {
                settings
                    .session_dir()
                    .map(|d| tau_base::paths::expand_tilde(&d))
            })
            .unwrap_or_else(|| {
                crate::paths::default_session_dir(&self.config.agent_dir, &self.config.cwd)
            })
    }

    /// The system prompt for the tools a run offers (tools-resources §2), asking for replies
    /// in `locale` when one is set.
    pub fn system_prompt(
        &self,
        tools: &[Arc<dyn tau_agent::AgentTool>],
        locale: Option<&str>,
    ) -> String {
        use crate::system_prompt::{
            PromptInputs, PromptTool, build_system_prompt, builtin_prompt_tool,
        };
        let prompt_tools = tools
            .iter()
            .map(|tool| {
                let builtin = builtin_prompt_tool(tool.name());
                if builtin.snippet.is_some() {
                    builtin
                } else {
                    PromptTool {
                        name: tool.name().to_string(),
                        snippet: tool.prompt_snippet(),
                        guidelines: tool.prompt_guidelines(),
                    }
                }
            })
            .collect();
        let config = &self.config;
        let trusted_project = config
            .resources
            .project
            .trusted()
            .then_some(config.cwd.as_path());
        build_system_prompt(&PromptInputs {
            custom: crate::system_prompt::resolve_custom_prompt(
                config.system_prompt.as_deref(),
                trusted_project,
                &config.agent_dir,
            ),
            append: crate::system_prompt::resolve_append(
                &config.append_system_prompt,
                trusted_project,
                &config.agent_dir,
            ),
            context_files: self.context_files.clone(),
            skills: tools
                .iter()
                .any(|t| t.name() == "read")
                .then(|| crate::resources::skills::prompt_block(&self.resources.skills))
                .flatten(),
            tools: prompt_tools,
            cwd: config.cwd.clone(),
            date: chrono::Utc::now().date_naive().to_string(),
            locale: locale.map(str::to_string),
        })
    }

    /// The slash commands, as `get_commands` and an extension's `pi.getCommands()` list
    /// them (ext §6.2): extension commands, then prompt templates, then skills, each with
    /// its `source` and `sourceInfo`.
    pub fn slash_commands(&self, extensions: Option<&tau_extensions::Extensions>) -> Vec<Value> {
        let extension_commands = extensions
            .map(|e| e.commands())
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                let mut command = serde_json::Map::new();
                command.insert("name".into(), c.name.into());
                if let Some(description) = c.description {
                    command.insert("description".into(), description.into());
                }
                command.insert("source".into(), "extension".into());
                // pi names a settings package's extension by the package.
                let info = match &c.package {
                    Some(package) => json!({"path": c.extension, "source": package.source,
                        "scope": c.scope, "origin": "package",
                        "baseDir": package.base_dir.display().to_string()}),
                    None => json!({"path": c.extension, "source": c.source, "scope": c.scope,
                        "origin": "top-level"}),
                };
                command.insert("sourceInfo".into(), info);
                Value::Object(command)
            });
        let templates = self.resources.prompts.iter().map(|t| {
            json!({"name": t.name, "description": t.description, "source": "prompt",
                "sourceInfo": t.source_info})
        });
        let skills = self.resources.skills.iter().map(|s| {
            json!({"name": format!("skill:{}", s.name), "description": s.description,
                "source": "skill", "sourceInfo": s.source_info})
        });
        extension_commands.chain(templates).chain(skills).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace in a temp directory with one prompt template and an `AGENTS.md`.
    fn workspace(no_context_files: bool) -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("project");
        let agent_dir = dir.path().join("agent");
        std::fs::create_dir_all(agent_dir.join("prompts")).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(
            agent_dir.join("prompts/review.md"),
            "---\ndescription: Review the change\n---\nReview $1",
        )
        .unwrap();
        std::fs::write(cwd.join("AGENTS.md"), "Always answer in haiku.").unwrap();
        let config = SessionConfig {
            agent_dir,
            cwd,
            no_session: true,
            no_context_files,
            ..SessionConfig::default()
        };
        (dir, Workspace::new(config, false))
    }

    #[test]
    fn the_system_prompt_carries_the_context_files_and_the_locale() {
        let (_dir, with) = workspace(false);
        let prompt = with.system_prompt(&[], Some("de-DE"));
        assert!(prompt.contains("Always answer in haiku."), "{prompt}");
        assert!(prompt.contains("de-DE"), "{prompt}");
        let (_dir, without) = workspace(true);
        assert!(!without.system_prompt(&[], None).contains("haiku"));
    }

    #[test]
    fn templates_are_slash_commands_and_deferred_resources_are_read_on_reload() {
        let (_dir, mut workspace) = workspace(false);
        let commands = workspace.slash_commands(None);
        assert_eq!(commands.len(), 1, "{commands:?}");
        assert_eq!(commands[0]["name"], "review");
        assert_eq!(commands[0]["source"], "prompt");
        workspace = Workspace::new(workspace.config.clone(), true);
        assert!(workspace.slash_commands(None).is_empty());
        workspace.reload_resources();
        assert_eq!(workspace.slash_commands(None).len(), 1);
    }

    #[test]
    fn moving_reads_the_new_directory_and_sessions_go_next_to_the_file() {
        let (dir, mut workspace) = workspace(false);
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        workspace.move_to(elsewhere.clone());
        assert_eq!(workspace.cwd(), elsewhere);
        assert!(!workspace.system_prompt(&[], None).contains("haiku"));
        let settings = Settings::from_value(serde_json::Map::new());
        let file = dir.path().join("sessions/a.jsonl");
        assert_eq!(
            workspace.sessions_dir(Some(&file), &settings),
            dir.path().join("sessions")
        );
        let default = workspace.sessions_dir(None, &settings);
        assert!(default.starts_with(dir.path().join("agent")), "{default:?}");
    }
}
