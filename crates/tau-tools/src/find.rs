//! The `find` tool (tools-resources §1.6): lists files and directories whose names match a
//! glob, with fd's glob rules as pi invokes fd (`--glob --hidden`, smart case, patterns with a
//! `/` matched against the whole path behind an implied `**/`), walked in-process. Results
//! are sorted by path and `.git/` is never entered (decision 17).

use std::path::PathBuf;
use std::sync::LazyLock;
use std::sync::atomic::AtomicBool;

use globset::{GlobBuilder, GlobMatcher};
use serde_json::{Map, Value, json};
use tau_protocol::AgentToolResult;

use crate::ToolEnv;
use crate::call::ABORTED;
use crate::tool::builtin_tool;
use crate::walk::{
    Args, HeadOutput, Notice, display_key, existing_dir, listing_result, sort_key, text_result,
    walk_parallel, walker,
};

const DEFAULT_LIMIT: usize = 1000;

const DESCRIPTION: &str = "Find files and directories by glob pattern. A pattern without '/' \
is matched against names ('*.rs'); one with '/' against the whole path ('src/**/*.rs'). \
Matching ignores case unless the pattern has an upper-case letter. Paths are printed relative \
to the search directory, sorted, with a trailing '/' on directories. Files ignored by \
.gitignore are left out and .git is never searched. At most 1000 results (change with limit) \
or 50KB are returned.";

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "required": ["pattern"],
        "properties": {
            "pattern": {"type": "string", "description": "Which files to list, as a glob such as '*.rs', '**/*.toml' or 'src/**/mod.rs'"},
            "path": {"type": "string", "description": "Where to look (the working directory if left out)"},
            "limit": {"type": "number", "description": "Stop after this many paths (1000 if left out)"}
        }
    })
});

builtin_tool!(
    /// The `find` tool.
    FindTool,
    "find",
    request: Request
);

struct Request {
    pattern: String,
    root: PathBuf,
    cwd: PathBuf,
    limit: usize,
}

/// How a candidate is tested against the pattern.
enum Matcher {
    /// An empty pattern: fd lists everything.
    All,
    /// fd's default: the glob against the entry's name.
    Name(GlobMatcher),
    /// fd's `--full-path`: the glob against the entry's absolute path.
    FullPath(GlobMatcher),
}

impl Matcher {
    fn new(pattern: &str) -> Result<Self, String> {
        if pattern.is_empty() {
            return Ok(Self::All);
        }
        let full_path = pattern.contains('/');
        // pi anchors a relative path pattern anywhere below the root (and above it: fd
        // compares absolute paths) by prefixing `**/`.
        let effective = if full_path
            && !pattern.starts_with('/')
            && !pattern.starts_with("**/")
            && pattern != "**"
        {
            format!("**/{pattern}")
        } else {
            pattern.to_string()
        };
        let glob = GlobBuilder::new(&effective)
            .literal_separator(true)
            // fd's smart case: any upper-case letter makes the match case-sensitive.
            .case_insensitive(!pattern.chars().any(char::is_uppercase))
            .build()
            .map_err(|err| err.to_string())?
            .compile_matcher();
        Ok(if full_path {
            Self::FullPath(glob)
        } else {
            Self::Name(glob)
        })
    }

    fn is_match(&self, entry: &ignore::DirEntry) -> bool {
        match self {
            Self::All => true,
            Self::Name(glob) => glob.is_match(entry.file_name()),
            Self::FullPath(glob) => glob.is_match(entry.path()),
        }
    }
}

impl Request {
    fn parse(env: &ToolEnv, arguments: &Map<String, Value>) -> Result<Self, String> {
        let args = Args::new("find", arguments);
        Ok(Self {
            pattern: args.required_string("pattern")?,
            root: args.path(env)?,
            cwd: env.cwd.clone(),
            limit: args.limit("limit", DEFAULT_LIMIT)?,
        })
    }

    fn execute(self, stop: &AtomicBool) -> Result<AgentToolResult, String> {
        existing_dir(&self.root)?;
        let matcher = Matcher::new(&self.pattern)?;
        let builder = walker(&self.root, &self.cwd, ".fdignore", None);
        let root = &self.root;
        let matcher = &matcher;
        let mut found = walk_parallel(&builder, stop, &|| {
            |entry: &ignore::DirEntry| {
                if !matcher.is_match(entry) {
                    return None;
                }
                let key = sort_key(entry.path().strip_prefix(root).ok()?);
                // Directories themselves, not links to them, get the slash, as fd prints them.
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                Some((key, is_dir))
            }
        });
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(ABORTED.to_string());
        }
        if found.is_empty() {
            return Ok(text_result(
                "No files found matching pattern".to_string(),
                Map::new(),
            ));
        }
        found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let limit_reached = found.len() >= self.limit;
        found.truncate(self.limit);

        let mut output = HeadOutput::new();
        for (key, is_dir) in &found {
            let mut line = display_key(key);
            if *is_dir {
                line.push('/');
            }
            output.push_line(&line);
        }
        let limit = limit_reached.then(|| {
            Notice::limit_reached(
                self.limit,
                "results",
                ", or refine pattern",
                "resultLimitReached",
            )
        });
        Ok(listing_result(output, limit, None))
    }
}
