//! Skills (tools-resources §3): folders holding a `SKILL.md` (or, at the top of a skills
//! folder, plain `.md` files) whose description is listed in the system prompt and whose body
//! a `/skill:name` message expands to.

pub(crate) mod walk;

use std::path::{Path, PathBuf};

use tau_protocol::rpc::SourceInfo;

use super::{Named, Root, frontmatter, push_unless_taken};

/// A loaded skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The `SKILL.md` (or `.md`) file, absolute.
    pub file_path: PathBuf,
    /// Its directory, which the skill's relative paths are relative to.
    pub base_dir: PathBuf,
    pub source_info: SourceInfo,
    /// `disable-model-invocation: true`: only a `/skill:` message uses it; the system prompt
    /// does not list it.
    pub disable_model_invocation: bool,
}

impl Named for Skill {
    fn name(&self) -> &str {
        &self.name
    }
    fn file(&self) -> &Path {
        &self.file_path
    }
}

/// How a skills folder is scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// tau's and pi's own folders: plain `.md` files at the top are skills too.
    Own,
    /// `.agents/skills`: only `SKILL.md` folders.
    Agents,
}

/// Loads the skills under each root in order; on a name collision the first one stays.
pub fn load(roots: &[(Root, Layout)]) -> Vec<Skill> {
    let mut skills: Vec<Skill> = Vec::new();
    let mut seen_files = Vec::new();
    let mut budgets = walk::Budgets::default();
    for (root, layout) in roots {
        for file in skill_files(root, *layout, &mut budgets) {
            let real = std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
            if seen_files.contains(&real) {
                continue; // the same file reached twice (a symlink)
            }
            seen_files.push(real);
            if !root.keeps(&file) {
                continue;
            }
            let Some(skill) = read_skill(&file, root) else {
                continue;
            };
            push_unless_taken(&mut skills, skill, "skill ");
        }
    }
    skills
}

/// The skill files of a package's folder, found as in tau's and pi's own skills folders.
pub(crate) fn files_in(dir: &Path) -> Vec<PathBuf> {
    let root = Root::auto(dir.to_path_buf(), "user", dir.to_path_buf());
    skill_files(&root, Layout::Own, &mut walk::Budgets::default())
}

/// The skill files under the root (a folder, or one `.md` file), in a stable order.
fn skill_files(root: &Root, layout: Layout, budgets: &mut walk::Budgets) -> Vec<PathBuf> {
    let path = root.path.as_path();
    if path.is_file() {
        if path.extension().is_some_and(|e| e == "md") {
            return vec![path.to_path_buf()];
        }
        tracing::warn!("skill path is not a markdown file: {}", path.display());
        return Vec::new();
    }
    if !path.is_dir() {
        if let Err(e) = tau_base::bounded::check_regular(path)
            && !matches!(e, tau_base::bounded::BoundedReadError::NotFound)
        {
            tracing::warn!("skill {} skipped: {e}", path.display());
        }
        return Vec::new();
    }
    let own_skill = path.join("SKILL.md");
    if own_skill.is_file() {
        return if walk::stays_inside(root, &own_skill) {
            vec![own_skill]
        } else {
            Vec::new()
        };
    }
    // gitignore-style files are honoured in every folder scanned, as pi does.
    let mut builder = ignore::WalkBuilder::new(path);
    builder
        .standard_filters(false)
        .ignore(true)
        .git_ignore(true)
        .require_git(false)
        .add_custom_ignore_filename(".fdignore")
        .sort_by_file_name(std::cmp::Ord::cmp);
    let mut found: Vec<PathBuf> = Vec::new();
    for entry in budgets.files(root, builder, outside_skill_folders) {
        let name = entry.file_name();
        let top_level_md = layout == Layout::Own
            && entry.depth() == 1
            && Path::new(name).extension().is_some_and(|e| e == "md");
        if name == "SKILL.md" || top_level_md {
            found.push(entry.into_path());
        }
    }
    // A folder with a SKILL.md is one skill: nothing below it counts.
    let skill_dirs: Vec<PathBuf> = found
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "SKILL.md"))
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    found
        .into_iter()
        .filter(|f| {
            let dir = f.parent().unwrap_or(Path::new(""));
            !skill_dirs.iter().any(|d| dir != d && dir.starts_with(d))
        })
        .collect()
}

/// Inside a skill's folder only its `SKILL.md` counts, so the walk does not spend its budget
/// on the skill's scripts and references (or a virtual environment left in it).
fn outside_skill_folders(entry: &ignore::DirEntry) -> bool {
    warn_if_not_regular(entry);
    entry.depth() < 2
        || entry.file_name() == "SKILL.md"
        || !entry
            .path()
            .parent()
            .is_some_and(|dir| dir.join("SKILL.md").is_file())
}

/// The walk keeps regular files only, silently; a `SKILL.md` (or a top-level `.md`) that is
/// a FIFO or a device is named, so that a skill that does not load says why. Checked from
/// the entry's metadata: opening it to find out would already signal a FIFO's writer.
fn warn_if_not_regular(entry: &ignore::DirEntry) {
    let name = entry.file_name();
    let candidate = name == "SKILL.md"
        || (entry.depth() == 1 && Path::new(name).extension().is_some_and(|e| e == "md"));
    if !candidate || entry.file_type().is_none_or(|t| t.is_file() || t.is_dir()) {
        return;
    }
    if let Err(e) = tau_base::bounded::check_regular(entry.path()) {
        tracing::warn!("skill {} skipped: {e}", entry.path().display());
    }
}

fn read_skill(file: &Path, root: &Root) -> Option<Skill> {
    let text = tau_base::bounded::read_to_string(file, tau_base::bounded::TEXT_CAP)
        .map_err(|e| tracing::warn!("cannot read skill {}: {e}", file.display()))
        .ok()?;
    let header = frontmatter::parse(&text)
        .map_err(|e| tracing::warn!("skill {} skipped: {e}", file.display()))
        .ok()?;
    let parent = file.parent().unwrap_or(Path::new(""));
    let parent_name = parent
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = header
        .text("name")
        .map(str::to_string)
        .unwrap_or_else(|| parent_name.clone());
    let description = header.text("description").unwrap_or_default().trim();
    if description.is_empty() {
        tracing::warn!("skill {} skipped: description is required", file.display());
        return None;
    }
    for problem in name_problems(&name, &parent_name, description) {
        tracing::warn!("skill {}: {problem}", file.display());
    }
    let file_path = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    let base_dir = file_path.parent().unwrap_or(Path::new("")).to_path_buf();
    Some(Skill {
        name,
        description: description.to_string(),
        source_info: root.source_info(&file_path),
        file_path,
        base_dir,
        disable_model_invocation: header.is_true("disable-model-invocation"),
    })
}

/// pi's naming rules; breaking them is reported, and the skill still loads.
fn name_problems(name: &str, parent: &str, description: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name != parent {
        problems.push(format!(
            "name \"{name}\" does not match parent directory \"{parent}\""
        ));
    }
    if name.chars().count() > 64 {
        problems.push(format!(
            "name exceeds 64 characters ({})",
            name.chars().count()
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        problems.push(
            "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)".into(),
        );
    }
    if name.starts_with('-') || name.ends_with('-') {
        problems.push("name must not start or end with a hyphen".into());
    }
    if name.contains("--") {
        problems.push("name must not contain consecutive hyphens".into());
    }
    if description.chars().count() > 1024 {
        problems.push(format!(
            "description exceeds 1024 characters ({})",
            description.chars().count()
        ));
    }
    problems
}

/// `/skill:name args`: the skill's body in a `<skill>` block (the shape clients recognise),
/// then the arguments. `Ok(None)` when the text is not a skill command or names no skill;
/// `Err` (the file and why) when the skill's file cannot be read.
pub fn expand(text: &str, skills: &[Skill]) -> Result<Option<String>, (PathBuf, String)> {
    let Some(rest) = text.strip_prefix("/skill:") else {
        return Ok(None);
    };
    let (name, args) = match rest.split_once(' ') {
        Some((name, args)) => (name, args.trim()),
        None => (rest, ""),
    };
    let Some(skill) = skills.iter().find(|s| s.name == name) else {
        return Ok(None);
    };
    let text = tau_base::bounded::read_to_string(&skill.file_path, tau_base::bounded::TEXT_CAP)
        .map_err(|e| (skill.file_path.clone(), e.to_string()))?;
    let body = frontmatter::body_of(&text);
    let block = format!(
        "<skill name=\"{}\" location=\"{}\">\nPaths in this skill are relative to {}.\n\n{body}\n</skill>",
        skill.name,
        skill.file_path.display(),
        skill.base_dir.display()
    );
    Ok(Some(if args.is_empty() {
        block
    } else {
        format!("{block}\n\n{args}")
    }))
}

/// The system prompt's list of the skills the model may load itself; `None` when there is
/// none.
pub fn prompt_block(skills: &[Skill]) -> Option<String> {
    let visible: Vec<&Skill> = skills
        .iter()
        .filter(|s| !s.disable_model_invocation)
        .collect();
    if visible.is_empty() {
        return None;
    }
    let mut lines = vec![
        "\n\nSkills hold instructions for particular kinds of task.".to_string(),
        "When a task fits a skill's description, read its file with the read tool before you start, and follow it.".to_string(),
        "A skill's relative paths are relative to the folder its file is in.".to_string(),
        String::new(),
        "<available_skills>".to_string(),
    ];
    for skill in visible {
        lines.push("  <skill>".into());
        lines.push(format!("    <name>{}</name>", xml_escape(&skill.name)));
        lines.push(format!(
            "    <description>{}</description>",
            xml_escape(&skill.description)
        ));
        lines.push(format!(
            "    <location>{}</location>",
            xml_escape(&skill.file_path.display().to_string())
        ));
        lines.push("  </skill>".into());
    }
    lines.push("</available_skills>".into());
    Some(lines.join("\n"))
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(path: &Path) -> Root {
        Root::auto(path.to_path_buf(), "user", path.to_path_buf())
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).ok();
        std::fs::write(path, text).ok();
    }

    #[test]
    fn folders_with_skill_md_and_top_level_files_are_skills() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        write(
            &d.join("alpha/SKILL.md"),
            "---\ndescription: Alpha\n---\nA body",
        );
        write(
            &d.join("alpha/inner/SKILL.md"),
            "---\ndescription: Hidden\n---\nx",
        );
        write(
            &d.join("group/beta/SKILL.md"),
            "---\nname: beta\ndescription: Beta\n---\nB",
        );
        write(
            &d.join("top.md"),
            "---\nname: top\ndescription: Top\n---\nT",
        );
        write(&d.join("nodesc/SKILL.md"), "---\nname: nodesc\n---\nN");
        write(&d.join(".hidden/SKILL.md"), "---\ndescription: H\n---\nH");
        write(
            &d.join("node_modules/x/SKILL.md"),
            "---\ndescription: X\n---\nX",
        );
        write(&d.join("ignored/SKILL.md"), "---\ndescription: I\n---\nI");
        write(&d.join(".gitignore"), "ignored/\n");
        let names = |layout| -> Vec<String> {
            load(&[(root(d), layout)])
                .into_iter()
                .map(|s| s.name)
                .collect()
        };
        assert_eq!(names(Layout::Own), ["alpha", "beta", "top"]);
        assert_eq!(names(Layout::Agents), ["alpha", "beta"]);
        let skills = load(&[(root(d), Layout::Own)]);
        assert_eq!(skills[0].base_dir, d.join("alpha"));
        assert_eq!(skills[0].description, "Alpha");
    }

    #[test]
    fn the_first_root_wins_a_collision() {
        let a = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let b = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        write(
            &a.path().join("same/SKILL.md"),
            "---\ndescription: first\n---\n1",
        );
        write(
            &b.path().join("same/SKILL.md"),
            "---\ndescription: second\n---\n2",
        );
        let skills = load(&[(root(a.path()), Layout::Own), (root(b.path()), Layout::Own)]);
        assert_eq!(skills.len(), 1);
        assert_eq!(skills[0].description, "first");
    }

    #[test]
    fn expansion_and_prompt_block() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        write(
            &dir.path().join("deploy/SKILL.md"),
            "---\ndescription: Ship <it> & \"go\"\n---\n\nStep one.\n",
        );
        write(
            &dir.path().join("quiet/SKILL.md"),
            "---\ndescription: Q\ndisable-model-invocation: true\n---\nq",
        );
        let skills = load(&[(root(dir.path()), Layout::Own)]);
        let file = dir.path().join("deploy/SKILL.md");
        let expanded = expand("/skill:deploy  now please ", &skills);
        assert_eq!(
            expanded,
            Ok(Some(format!(
                "<skill name=\"deploy\" location=\"{}\">\nPaths in this skill are relative to {}.\n\nStep one.\n</skill>\n\nnow please",
                file.display(),
                dir.path().join("deploy").display()
            )))
        );
        assert_eq!(expand("/skill:missing x", &skills), Ok(None));
        assert_eq!(expand("hello", &skills), Ok(None));
        let block = prompt_block(&skills).unwrap_or_default();
        assert!(block.contains("<description>Ship &lt;it&gt; &amp; &quot;go&quot;</description>"));
        assert!(!block.contains("<name>quiet</name>"));
        assert!(block.starts_with("\n\n") && block.ends_with("</available_skills>"));
        std::fs::remove_file(&file).ok();
        assert!(expand("/skill:deploy", &skills).is_err());
    }
}
