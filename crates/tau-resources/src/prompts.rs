//! Prompt templates (tools-resources §4): `.md` files whose name is a slash command; a
//! message `/name args` is replaced by the file's text with the arguments put in.

use std::path::{Path, PathBuf};

use tau_protocol::rpc::SourceInfo;

use super::skills::walk;
use super::{Named, Root, frontmatter, push_unless_taken};

/// A loaded template.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptTemplate {
    /// The file name without `.md`.
    pub name: String,
    pub description: String,
    pub argument_hint: Option<String>,
    pub content: String,
    pub source_info: SourceInfo,
    pub file_path: PathBuf,
}

/// Loads the `.md` files directly inside each root (or the root itself when it is a file),
/// in order; on a name collision the first one stays. Unreadable files are skipped.
pub fn load(roots: &[Root]) -> Vec<PromptTemplate> {
    let mut templates: Vec<PromptTemplate> = Vec::new();
    let mut budgets = walk::Budgets::default();
    let mut seen_files = std::collections::HashSet::new();
    for root in roots {
        for file in template_files(root, &mut budgets) {
            if !root.keeps(&file) {
                continue;
            }
            // The same file reached twice (a package named by `-e` and by the settings) is
            // one template, as pi merges paths.
            if !seen_files.insert(std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone())) {
                continue;
            }
            let Some(template) = read_template(&file, root) else {
                continue;
            };
            push_unless_taken(&mut templates, template, "prompt template /");
        }
    }
    templates
}

impl Named for PromptTemplate {
    fn name(&self) -> &str {
        &self.name
    }
    fn file(&self) -> &Path {
        &self.file_path
    }
}

/// The templates of a root: its direct `.md` files (all of them below a folder listed in
/// settings), honouring gitignore-style files except in a command-line folder.
fn template_files(root: &Root, budgets: &mut walk::Budgets) -> Vec<PathBuf> {
    if root.path.is_file() {
        return vec![root.path.clone()];
    }
    let mut builder = ignore::WalkBuilder::new(&root.path);
    builder
        .standard_filters(false)
        .max_depth(if root.listed { None } else { Some(1) })
        .sort_by_file_name(std::cmp::Ord::cmp);
    if root.source == "auto" || root.listed {
        builder
            .ignore(true)
            .git_ignore(true)
            .require_git(false)
            .add_custom_ignore_filename(".fdignore");
    }
    budgets
        .files(root, builder, warn_if_not_regular)
        .into_iter()
        .map(ignore::DirEntry::into_path)
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect()
}

/// Keeps every entry, as [`walk::keep_all`] does, but names a `.md` entry that is a FIFO or
/// a device: the walk drops it silently, and a template that does not load should say why.
/// Checked from the metadata: opening a FIFO to find out would already signal its writer.
fn warn_if_not_regular(entry: &ignore::DirEntry) -> bool {
    let md = entry.path().extension().is_some_and(|e| e == "md");
    if md
        && entry
            .file_type()
            .is_some_and(|t| !t.is_file() && !t.is_dir())
        && let Err(e) = tau_base::bounded::check_regular(entry.path())
    {
        tracing::warn!("prompt template {} skipped: {e}", entry.path().display());
    }
    walk::keep_all(entry)
}

fn read_template(file: &Path, root: &Root) -> Option<PromptTemplate> {
    // Unreadable and malformed templates are skipped quietly, as pi does; one refused for
    // what the file is (a FIFO, a device, over the cap) is named.
    let text = match tau_base::bounded::read_to_string(file, tau_base::bounded::TEXT_CAP) {
        Ok(text) => text,
        Err(
            e @ (tau_base::bounded::BoundedReadError::NotRegular { .. }
            | tau_base::bounded::BoundedReadError::TooLarge { .. }),
        ) => {
            tracing::warn!("prompt template {} skipped: {e}", file.display());
            return None;
        }
        Err(_) => return None,
    };
    let header = frontmatter::parse(&text).ok()?;
    let name = file.file_stem()?.to_string_lossy().into_owned();
    let description = match header.text("description").map(str::trim) {
        Some(d) if !d.is_empty() => d.to_string(),
        _ => first_line_summary(&header.body),
    };
    let file_path = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    Some(PromptTemplate {
        name,
        description,
        argument_hint: header.text("argument-hint").map(str::to_string),
        content: header.body,
        source_info: root.source_info(&file_path),
        file_path,
    })
}

/// The first non-empty line, cut to 60 characters.
fn first_line_summary(body: &str) -> String {
    let line = body.lines().map(str::trim).find(|l| !l.is_empty());
    let line = line.unwrap_or_default();
    if line.chars().count() > 60 {
        format!("{}...", line.chars().take(60).collect::<String>())
    } else {
        line.to_string()
    }
}

/// `/name args` for a template named exactly `name`: its content with the arguments put
/// in; `None` otherwise.
pub fn expand(text: &str, templates: &[PromptTemplate]) -> Option<String> {
    let rest = text.strip_prefix('/')?;
    let (name, args) = rest.split_once(' ').unwrap_or((rest, ""));
    let template = templates.iter().find(|t| t.name == name)?;
    Some(substitute(&template.content, &parse_args(args)))
}

/// Splits on spaces and tabs (not newlines); `'…'` and `"…"` group, also when glued to
/// other text; no escapes; empty arguments are dropped.
pub fn parse_args(text: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut quote = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == ' ' || c == '\t' => {
                if !current.is_empty() {
                    args.push(std::mem::take(&mut current));
                }
            }
            None => current.push(c),
        }
    }
    if !current.is_empty() {
        args.push(current);
    }
    args
}

/// Puts `args` into `content` in four passes over the whole text, in this order: `$N`,
/// `${@:N}` / `${@:N:L}`, `$ARGUMENTS`, `$@` (so a later pass also sees what an earlier one
/// put in, as in pi).
pub fn substitute(content: &str, args: &[String]) -> String {
    let all = args.join(" ");
    let text = replace_dollar(content, |rest| {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: usize = rest[..digits].parse().unwrap_or(0);
        let value = n
            .checked_sub(1)
            .and_then(|i| args.get(i))
            .cloned()
            .unwrap_or_default();
        Some((digits, value))
    });
    let text = replace_dollar(&text, |rest| {
        let inner = rest.strip_prefix("{@:")?;
        let close = inner.find('}')?;
        let spec = &inner[..close];
        let (start, len) = match spec.split_once(':') {
            Some((s, l)) => (s, Some(l)),
            None => (spec, None),
        };
        if start.is_empty()
            || !start.bytes().all(|b| b.is_ascii_digit())
            || len.is_some_and(|l| l.is_empty() || !l.bytes().all(|b| b.is_ascii_digit()))
        {
            return None;
        }
        let from = start.parse::<usize>().unwrap_or(1).max(1) - 1;
        let from = from.min(args.len());
        let to = match len.map(|l| l.parse::<usize>().unwrap_or(usize::MAX)) {
            Some(l) => from.saturating_add(l).min(args.len()),
            None => args.len(),
        };
        Some((3 + close + 1, args[from..to].join(" ")))
    });
    let text = replace_dollar(&text, |rest| {
        rest.starts_with("ARGUMENTS")
            .then(|| ("ARGUMENTS".len(), all.clone()))
    });
    replace_dollar(&text, |rest| {
        rest.starts_with('@').then(|| (1, all.clone()))
    })
}

/// Replaces each `$` for which `at` (given the text after the `$`) returns how many bytes
/// after it to consume and what to put in.
fn replace_dollar(text: &str, mut at: impl FnMut(&str) -> Option<(usize, String)>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match at(after) {
            Some((used, value)) => {
                out.push_str(&value);
                rest = &after[used..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_split_like_pi() {
        assert_eq!(
            parse_args("a \"b c\" d'e f'g  h\ti\nj"),
            strings(&["a", "b c", "de fg", "h", "i\nj"])
        );
        assert_eq!(parse_args(" \"\" ''  "), Vec::<String>::new());
        assert_eq!(parse_args(" foo"), strings(&["foo"]));
    }

    #[test]
    fn substitution_passes_run_in_order() {
        let args = strings(&["x", "$@", "y"]);
        assert_eq!(substitute("2=$2", &args), "2=x $@ y");
        let args = strings(&["a", "b", "c", "d"]);
        assert_eq!(substitute("$1-$4-$5-$0-$10", &args), "a-d---");
        assert_eq!(
            substitute("${@:2}|${@:2:2}|${@:0:1}|${@:9}", &args),
            "b c d|b c|a|"
        );
        assert_eq!(
            substitute("$ARGUMENTS / $@ / $x / ${@:}", &args),
            "a b c d / a b c d / $x / ${@:}"
        );
        assert_eq!(substitute("cost $", &args), "cost $");
    }

    #[test]
    fn templates_expand_by_exact_name() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            dir.path().join("rev.md"),
            "---\ndescription: Review\nargument-hint: <file>\n---\nReview $1 then $@\n",
        )
        .ok();
        std::fs::write(
            dir.path().join("plan.md"),
            "\n\nA first line that is longer than sixty characters, by quite a margin\nmore",
        )
        .ok();
        std::fs::write(dir.path().join(".hidden.md"), "x").ok();
        std::fs::write(dir.path().join("notes.txt"), "x").ok();
        let root = Root::auto(dir.path().to_path_buf(), "user", dir.path().to_path_buf());
        let templates = load(&[root]);
        let names: Vec<&str> = templates.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["plan", "rev"]);
        assert_eq!(
            templates[0].description,
            "A first line that is longer than sixty characters, by quite ..."
        );
        assert_eq!(templates[1].argument_hint.as_deref(), Some("<file>"));
        assert_eq!(
            expand("/rev main.rs  \"and tests\"", &templates),
            Some("Review main.rs then main.rs and tests".into())
        );
        assert_eq!(expand("/rev", &templates), Some("Review  then ".into()));
        assert_eq!(expand("/Rev x", &templates), None);
        assert_eq!(expand("rev x", &templates), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Plain words separated by runs of spaces and tabs come back as they were; any
        /// text splits without panicking and never yields an empty argument.
        #[test]
        fn words_round_trip_and_nothing_is_empty(
            words in proptest::collection::vec("[a-z0-9$@{}:\n.é]{1,8}", 0..6),
            gaps in proptest::collection::vec("[ \t]{1,3}", 6),
            any in "\\PC{0,40}",
        ) {
            let mut text = String::new();
            for (word, gap) in words.iter().zip(&gaps) {
                text.push_str(gap);
                text.push_str(word);
            }
            proptest::prop_assert_eq!(parse_args(&text), words);
            proptest::prop_assert!(parse_args(&any).iter().all(|a| !a.is_empty()));
        }

        /// Text without a `$` is left alone, whatever the arguments.
        #[test]
        fn text_without_placeholders_is_unchanged(
            text in "[^$]{0,60}",
            args in proptest::collection::vec("\\PC{0,8}", 0..4),
        ) {
            proptest::prop_assert_eq!(substitute(&text, &args), text);
        }
    }
}
