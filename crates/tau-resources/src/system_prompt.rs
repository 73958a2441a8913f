//! The system prompt (tools-resources §2), in tau's own words but with pi's structure: an
//! identity paragraph, the active tools, guidelines, appended text, the project's context
//! files, then the date and working directory. A custom prompt (`--system-prompt` or a
//! `SYSTEM.md`) replaces the first part; everything from the appended text on still follows.

use std::path::{Path, PathBuf};

use tau_base::bounded;

/// A tool as the prompt presents it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTool {
    pub name: String,
    /// One line for the tool list; tools without one are left out of the list.
    pub snippet: Option<String>,
    pub guidelines: Vec<String>,
}

/// Everything the prompt is built from.
#[derive(Debug, Clone, Default)]
pub struct PromptInputs {
    /// Replaces tau's base prompt.
    pub custom: Option<String>,
    pub append: Option<String>,
    /// `(absolute path, contents)` in load order.
    pub context_files: Vec<(PathBuf, String)>,
    /// The list of skills the model may load (only when `read` is active).
    pub skills: Option<String>,
    pub tools: Vec<PromptTool>,
    pub cwd: PathBuf,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// A BCP 47 tag from `set_locale` / `prompt.locale` (xcsh), already normalised.
    pub locale: Option<String>,
}

const IDENTITY: &str = "You are an expert coding assistant working inside tau, a coding agent. \
You help people with their software by reading files, running commands, editing code and \
writing new files.";

/// The snippet and guidelines tau gives each built-in tool.
pub fn builtin_prompt_tool(name: &str) -> PromptTool {
    let (snippet, guidelines): (&str, &[&str]) = match name {
        "read" => (
            "Read a file (text, or an image) from the project",
            &["Use read to look at files rather than cat or sed."],
        ),
        "bash" => (
            "Run a shell command (ls, rg, find, git, build and test tools)",
            &[],
        ),
        "edit" => (
            "Change a file by replacing exact text; several separate edits can go in one call",
            &[
                "Read a file before you edit it.",
                "Each oldText must match the file exactly, whitespace included, and occur only once.",
                "Keep each edit small and unambiguous; make separate edits for separate places.",
                "Prefer edit to rewriting a whole file.",
            ],
        ),
        "write" => (
            "Create a file, or replace a file's whole content",
            &["Use write for new files or complete rewrites only."],
        ),
        "grep" => (
            "Search file contents with a regular expression (respects .gitignore)",
            &[],
        ),
        "find" => ("Find files by glob pattern (respects .gitignore)", &[]),
        "ls" => ("List the entries of a directory", &[]),
        _ => ("", &[]),
    };
    PromptTool {
        name: name.to_string(),
        snippet: (!snippet.is_empty()).then(|| snippet.to_string()),
        guidelines: guidelines.iter().map(|g| (*g).to_string()).collect(),
    }
}

/// Builds the prompt.
pub fn build_system_prompt(inputs: &PromptInputs) -> String {
    let mut prompt = match &inputs.custom {
        Some(custom) => custom.clone(),
        None => base_prompt(&inputs.tools),
    };
    if let Some(append) = inputs.append.as_deref().filter(|a| !a.is_empty()) {
        prompt.push_str("\n\n");
        prompt.push_str(append);
    }
    if let Some(locale) = &inputs.locale {
        let language = language_name(locale)
            .map(|name| format!("{name} ({locale})"))
            .unwrap_or_else(|| locale.clone());
        prompt.push_str(&format!(
            "\n\nThe user's language is {language}. Write your replies in it unless the user \
             writes to you in another language; keep code, identifiers and commands as they are."
        ));
    }
    if !inputs.context_files.is_empty() {
        prompt
            .push_str("\n\n# Project Context\n\nProject-specific instructions and guidelines:\n\n");
        for (path, content) in &inputs.context_files {
            prompt.push_str(&format!("## {}\n\n{content}\n\n", path.display()));
        }
    }
    if let Some(skills) = &inputs.skills {
        prompt.push_str(skills);
    }
    prompt.push_str(&format!("\nCurrent date: {}", inputs.date));
    prompt.push_str(&format!(
        "\nCurrent working directory: {}",
        inputs.cwd.display().to_string().replace('\\', "/")
    ));
    prompt
}

fn base_prompt(tools: &[PromptTool]) -> String {
    let mut out = String::from(IDENTITY);
    out.push_str("\n\nAvailable tools:\n");
    let listed: Vec<String> = tools
        .iter()
        .filter_map(|t| {
            t.snippet.as_deref().map(|s| {
                format!(
                    "- {}: {}",
                    t.name,
                    s.split_whitespace().collect::<Vec<_>>().join(" ")
                )
            })
        })
        .collect();
    if listed.is_empty() {
        out.push_str("(none)");
    } else {
        out.push_str(&listed.join("\n"));
    }
    out.push_str("\n\nOther tools may be available as well; use them as their descriptions say.");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let explorers = names.iter().any(|n| matches!(*n, "grep" | "find" | "ls"));
    let mut guidelines: Vec<String> = Vec::new();
    if names.contains(&"bash") && !explorers {
        guidelines.push("Use bash for file operations such as ls, rg and find.".into());
    }
    if names.contains(&"bash") && explorers {
        guidelines.push(
            "Prefer the grep, find and ls tools to bash for exploring files: they are faster and respect .gitignore."
                .into(),
        );
    }
    for tool in tools {
        for g in &tool.guidelines {
            let g = g.trim().to_string();
            if !g.is_empty() && !guidelines.contains(&g) {
                guidelines.push(g);
            }
        }
    }
    guidelines.push("Be concise.".into());
    guidelines.push("Show file paths clearly when you work with files.".into());
    out.push_str("\n\nGuidelines:\n");
    out.push_str(
        &guidelines
            .iter()
            .map(|g| format!("- {g}"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    out
}

/// xcsh's locales arrive in many spellings (`de`, `de_DE`, `de-de.UTF-8`); they are never
/// refused, only normalised to a BCP 47 tag. Empty means "no locale".
pub fn normalize_locale(raw: &str) -> Option<String> {
    let tag = raw.trim().split(['.', '@']).next().unwrap_or_default();
    let mut parts = tag.split(['_', '-']).filter(|p| !p.is_empty());
    let language = parts.next()?.to_ascii_lowercase();
    if !language.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let mut out = language;
    for part in parts {
        if !part.chars().all(|c| c.is_ascii_alphanumeric()) {
            break;
        }
        out.push('-');
        match part.len() {
            2 => out.push_str(&part.to_ascii_uppercase()),
            4 => {
                let mut chars = part.chars();
                if let Some(first) = chars.next() {
                    out.push(first.to_ascii_uppercase());
                    out.push_str(&chars.as_str().to_ascii_lowercase());
                }
            }
            _ => out.push_str(&part.to_ascii_lowercase()),
        }
    }
    Some(out)
}

/// English names of common languages, for the prompt's language line.
fn language_name(tag: &str) -> Option<&'static str> {
    let language = tag.split('-').next().unwrap_or(tag);
    Some(match language {
        "ar" => "Arabic",
        "bn" => "Bengali",
        "cs" => "Czech",
        "da" => "Danish",
        "de" => "German",
        "el" => "Greek",
        "en" => "English",
        "es" => "Spanish",
        "fa" => "Persian",
        "fi" => "Finnish",
        "fr" => "French",
        "he" => "Hebrew",
        "hi" => "Hindi",
        "hu" => "Hungarian",
        "id" => "Indonesian",
        "it" => "Italian",
        "ja" => "Japanese",
        "ko" => "Korean",
        "nl" => "Dutch",
        "no" | "nb" => "Norwegian",
        "pl" => "Polish",
        "pt" => "Portuguese",
        "ro" => "Romanian",
        "ru" => "Russian",
        "sv" => "Swedish",
        "th" => "Thai",
        "tr" => "Turkish",
        "uk" => "Ukrainian",
        "vi" => "Vietnamese",
        "zh" => "Chinese",
        _ => return None,
    })
}

const CONTEXT_NAMES: [&str; 4] = ["AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD"];

fn context_file_in(dir: &Path) -> Option<PathBuf> {
    CONTEXT_NAMES
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// The folder a project's context files must stay in until the user trusts it: the
/// repository root (the nearest folder above `cwd` holding `.git`), else `cwd` itself.
fn project_root(cwd: &Path) -> &Path {
    cwd.ancestors()
        .find(|dir| dir.join(".git").symlink_metadata().is_ok())
        .unwrap_or(cwd)
}

/// `AGENTS.md` (else `CLAUDE.md`) from the agent directory, then from every directory from
/// the filesystem root down to `cwd` (pi walks all the way to `/`).
///
/// Until the user trusts the project (`trusted_by_user`), a context file inside the project
/// (the repository root down to `cwd`) whose real path lies outside it is not read: a
/// cloned `AGENTS.md` linking to `~/.ssh/id_rsa` or `/proc/self/environ` would otherwise go
/// to the model in every request. The agent directory's file and those of the folders above
/// the project are the user's own and may link anywhere. Every file is read only if it is a
/// regular file within [`bounded::TEXT_CAP`].
pub fn load_context_files(
    agent_dir: &Path,
    cwd: &Path,
    trusted_by_user: bool,
) -> Vec<(PathBuf, String)> {
    let root = project_root(cwd);
    let real_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut candidates = Vec::new();
    if let Some(global) = context_file_in(agent_dir) {
        candidates.push((global, false));
    }
    let mut dirs: Vec<&Path> = cwd.ancestors().collect();
    dirs.reverse();
    candidates.extend(
        dirs.into_iter()
            .filter_map(|dir| context_file_in(dir).map(|file| (file, dir.starts_with(root)))),
    );
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (path, in_project) in candidates {
        let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
        if seen.contains(&canonical) {
            continue;
        }
        seen.push(canonical.clone());
        if in_project && !trusted_by_user && !canonical.starts_with(&real_root) {
            tracing::warn!(
                "{} is not read: it links to {}, outside the project {} (trust the project to \
                 follow it)",
                path.display(),
                canonical.display(),
                root.display()
            );
            continue;
        }
        match bounded::read_to_string(&path, bounded::TEXT_CAP) {
            Ok(content) => out.push((path, content)),
            Err(err) => tracing::warn!("skipping context file {}: {err}", path.display()),
        }
    }
    out
}

/// A CLI value that names an existing file means the file's contents.
fn file_or_literal(value: &str) -> String {
    let path = Path::new(value);
    if path.is_file()
        && let Ok(content) = std::fs::read_to_string(path)
    {
        return content;
    }
    value.to_string()
}

/// `--system-prompt`, else the first existing `SYSTEM.md` of the trusted project (`.tau/`,
/// `.pi/`) or the agent directory. `project` is `None` until the project is trusted: its
/// `SYSTEM.md` would replace tau's own instructions, not add to them as `AGENTS.md` does.
pub fn resolve_custom_prompt(
    cli: Option<&str>,
    project: Option<&Path>,
    agent_dir: &Path,
) -> Option<String> {
    if let Some(value) = cli {
        return Some(file_or_literal(value));
    }
    first_file(project, agent_dir, "SYSTEM.md")
}

/// `--append-system-prompt` values (joined by a blank line), else the first existing
/// `APPEND_SYSTEM.md` (the trusted project, then agent directory).
pub fn resolve_append(cli: &[String], project: Option<&Path>, agent_dir: &Path) -> Option<String> {
    if !cli.is_empty() {
        return Some(
            cli.iter()
                .map(|v| file_or_literal(v))
                .collect::<Vec<_>>()
                .join("\n\n"),
        );
    }
    first_file(project, agent_dir, "APPEND_SYSTEM.md")
}

fn first_file(project: Option<&Path>, agent_dir: &Path, name: &str) -> Option<String> {
    let project = project
        .into_iter()
        .flat_map(|cwd| [cwd.join(".tau").join(name), cwd.join(".pi").join(name)]);
    project.chain([agent_dir.join(name)]).find_map(|p| {
        match bounded::read_optional(&p, bounded::TEXT_CAP) {
            Ok(text) => text,
            Err(err) => {
                tracing::warn!("{err}; it is not used");
                None
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(tools: &[&str]) -> PromptInputs {
        PromptInputs {
            locale: None,
            tools: tools.iter().map(|t| builtin_prompt_tool(t)).collect(),
            cwd: PathBuf::from("/home/u/proj"),
            date: "2026-11-22".into(),
            ..PromptInputs::default()
        }
    }

    #[test]
    fn default_layout() {
        let p = build_system_prompt(&inputs(&["read", "bash", "edit", "write"]));
        assert!(p.starts_with(IDENTITY));
        assert!(p.contains("Available tools:\n- read: "));
        assert!(p.contains("- Use bash for file operations such as ls, rg and find."));
        assert!(p.ends_with("\nCurrent date: 2026-11-22\nCurrent working directory: /home/u/proj"));
        let with_grep = build_system_prompt(&inputs(&["bash", "grep"]));
        assert!(with_grep.contains("Prefer the grep, find and ls tools"));
        assert!(build_system_prompt(&inputs(&[])).contains("Available tools:\n(none)"));
    }

    #[test]
    fn custom_prompt_keeps_the_tail_sections() {
        let mut i = inputs(&["read"]);
        i.custom = Some("CUSTOM".into());
        i.append = Some("APPENDED".into());
        i.context_files = vec![(
            PathBuf::from("/home/u/proj/AGENTS.md"),
            "Project rules".into(),
        )];
        let p = build_system_prompt(&i);
        assert_eq!(
            p,
            "CUSTOM\n\nAPPENDED\n\n# Project Context\n\nProject-specific instructions and guidelines:\n\n## /home/u/proj/AGENTS.md\n\nProject rules\n\n\nCurrent date: 2026-11-22\nCurrent working directory: /home/u/proj"
        );
    }

    #[test]
    fn context_files_from_agent_dir_then_root_down() {
        let agent = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let cwd = root.path().join("a/b");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(agent.path().join("AGENTS.md"), "global").unwrap();
        std::fs::write(root.path().join("a/CLAUDE.md"), "claude").unwrap();
        std::fs::write(cwd.join("AGENTS.md"), "agents").unwrap();
        std::fs::write(cwd.join("CLAUDE.md"), "ignored").unwrap();
        let files = load_context_files(agent.path(), &cwd, false);
        let contents: Vec<&str> = files.iter().map(|(_, c)| c.as_str()).collect();
        assert_eq!(contents, ["global", "claude", "agents"]);
    }

    #[test]
    fn an_untrusted_projects_context_files_stay_inside_it() {
        let agent = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "KEY=1").unwrap();
        let repo = tempfile::tempdir().unwrap();
        let cwd = repo.path().join("sub");
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        std::os::unix::fs::symlink(&secret, repo.path().join("AGENTS.md")).unwrap();
        std::fs::write(repo.path().join("notes.md"), "inside").unwrap();
        std::os::unix::fs::symlink("../notes.md", cwd.join("AGENTS.md")).unwrap();
        // The user's own file may link anywhere.
        let mine = outside.path().join("mine");
        std::fs::write(&mine, "mine").unwrap();
        std::os::unix::fs::symlink(&mine, agent.path().join("AGENTS.md")).unwrap();
        let contents = |trusted| -> Vec<String> {
            load_context_files(agent.path(), &cwd, trusted)
                .into_iter()
                .map(|(_, c)| c)
                .collect()
        };
        assert_eq!(contents(false), ["mine", "inside"]);
        assert_eq!(contents(true), ["mine", "KEY=1", "inside"]);
    }

    #[test]
    fn locales_are_normalised_never_refused() {
        assert_eq!(normalize_locale("de_DE.UTF-8").as_deref(), Some("de-DE"));
        assert_eq!(
            normalize_locale(" zh-hant-tw ").as_deref(),
            Some("zh-Hant-TW")
        );
        assert_eq!(normalize_locale("FR").as_deref(), Some("fr"));
        assert_eq!(normalize_locale("klingon").as_deref(), Some("klingon"));
        assert_eq!(normalize_locale("  "), None);
    }

    #[test]
    fn a_locale_adds_a_language_line() {
        let mut with = inputs(&["read"]);
        with.locale = Some("de-DE".into());
        let prompt = build_system_prompt(&with);
        assert!(
            prompt.contains("The user's language is German (de-DE)."),
            "{prompt}"
        );
        assert!(!build_system_prompt(&inputs(&["read"])).contains("The user's language"));
    }
}
