//! Syntax highlighting of code blocks (syntect's grammars, Oniguruma regexes). Tokens come out
//! as a small set of classes (`Class`) that the theme colours with the terminal's own palette,
//! so a light or dark background, 16 colours and `NO_COLOR` all read well.
//!
//! A streaming reply re-renders its Markdown on every frame, so a code block being written is
//! highlighted again and again as it grows: the parser's state after each finished line is
//! kept per block, and a block that extends one seen before continues from there. A block
//! costs one pass over its lines however many frames it is drawn in.

use std::cell::RefCell;
use std::str::FromStr;
use std::sync::OnceLock;

use syntect::highlighting::{
    Color, HighlightIterator, HighlightState, Highlighter, ScopeSelectors, StyleModifier, Theme,
    ThemeItem, ThemeSettings,
};
use syntect::parsing::{ParseState, ScopeStack, SyntaxReference, SyntaxSet};

/// What a token is, as far as colour goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Class {
    Plain = 0,
    Comment,
    Keyword,
    String,
    Constant,
    Function,
    Type,
    Added,
    Removed,
}

impl Class {
    const ALL: [Class; 9] = [
        Class::Plain,
        Class::Comment,
        Class::Keyword,
        Class::String,
        Class::Constant,
        Class::Function,
        Class::Type,
        Class::Added,
        Class::Removed,
    ];
}

/// Which scopes get which class; syntect's selector scoring picks the most specific match.
const SCOPES: &[(&str, Class)] = &[
    ("comment, punctuation.definition.comment", Class::Comment),
    (
        "keyword, storage, keyword.operator.word, variable.language, entity.name.tag",
        Class::Keyword,
    ),
    ("keyword.operator, punctuation", Class::Plain),
    ("string, constant.character, markup.raw", Class::String),
    (
        "constant.numeric, constant.language, constant.other, support.constant",
        Class::Constant,
    ),
    (
        "entity.name.function, support.function, meta.function-call variable.function, entity.other.attribute-name",
        Class::Function,
    ),
    (
        "entity.name.type, entity.name.class, entity.name.struct, entity.name.enum, entity.name.trait, support.type, support.class, storage.type.primitive",
        Class::Type,
    ),
    ("markup.inserted", Class::Added),
    ("markup.deleted", Class::Removed),
];

/// One highlighted line: runs of text with their class.
pub type Tokens = Vec<(Class, String)>;

struct Grammars {
    syntaxes: SyntaxSet,
    theme: Theme,
}

fn grammars() -> &'static Grammars {
    static GRAMMARS: OnceLock<Grammars> = OnceLock::new();
    GRAMMARS.get_or_init(|| {
        // The class rides in the colour's red channel; alpha 0 marks it as not a colour.
        let class_colour = |class: Class| Color {
            r: class as u8,
            g: 0,
            b: 0,
            a: 0,
        };
        let scopes = SCOPES
            .iter()
            .filter_map(|(selector, class)| {
                Some(ThemeItem {
                    scope: ScopeSelectors::from_str(selector).ok()?,
                    style: StyleModifier {
                        foreground: Some(class_colour(*class)),
                        background: None,
                        font_style: None,
                    },
                })
            })
            .collect();
        Grammars {
            syntaxes: SyntaxSet::load_defaults_newlines(),
            theme: Theme {
                settings: ThemeSettings {
                    foreground: Some(class_colour(Class::Plain)),
                    ..ThemeSettings::default()
                },
                scopes,
                ..Theme::default()
            },
        }
    })
}

/// The grammar for a fence's language tag, with the aliases models write that syntect's
/// bundled grammars lack (TypeScript reads well enough as JavaScript).
fn syntax_for(language: &str) -> Option<&'static SyntaxReference> {
    let tag = language
        .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let token = match tag.as_str() {
        "" => return None,
        "ts" | "tsx" | "typescript" | "jsx" | "mjs" | "cjs" | "javascript" | "node" => "js",
        "jsonc" | "json5" => "json",
        "shell" | "zsh" | "console" | "shellscript" | "bash" | "sh" => "bash",
        "c++" | "cxx" | "hpp" => "cpp",
        "golang" => "go",
        "py3" | "python3" => "py",
        "patch" => "diff",
        "yml" => "yaml",
        other => other,
    };
    let grammars = grammars();
    grammars
        .syntaxes
        .find_syntax_by_token(token)
        .filter(|s| s.name != "Plain Text")
}

/// A block highlighted before: its finished lines and the state after the last of them.
struct Done {
    language: String,
    /// The source of the finished lines, newlines included.
    source: String,
    lines: Vec<Tokens>,
    parse: ParseState,
    highlight: HighlightState,
}

/// Blocks kept for reuse; a reply rarely has more, and the oldest go first.
const KEPT: usize = 64;

thread_local! {
    static DONE: RefCell<Vec<Done>> = const { RefCell::new(Vec::new()) };
}

/// `code`'s lines highlighted as `language`; `None` when no grammar knows the language.
pub fn highlight(language: &str, code: &str) -> Option<Vec<Tokens>> {
    let syntax = syntax_for(language)?;
    let grammars = grammars();
    let highlighter = Highlighter::new(&grammars.theme);
    // The finished lines (ending in a newline) and the one being written.
    let finished_len = code.rfind('\n').map_or(0, |i| i + 1);
    let (finished, partial) = code.split_at(finished_len);

    DONE.with(|done| {
        let mut done = done.borrow_mut();
        // The longest earlier block this one extends.
        let reuse = done
            .iter()
            .enumerate()
            .filter(|(_, d)| d.language == language && finished.starts_with(&d.source))
            .max_by_key(|(_, d)| d.source.len())
            .map(|(i, _)| i);
        // Taken, not copied: the shorter text was a frame of this same block.
        let mut entry = match reuse {
            Some(i) => done.remove(i),
            None => Done {
                language: language.to_string(),
                source: String::new(),
                lines: Vec::new(),
                parse: ParseState::new(syntax),
                highlight: HighlightState::new(&highlighter, ScopeStack::new()),
            },
        };
        let rest = &finished[entry.source.len()..];
        for line in rest.split_inclusive('\n') {
            let tokens = line_tokens(
                &mut entry.parse,
                &mut entry.highlight,
                &highlighter,
                line,
                &grammars.syntaxes,
            )?;
            entry.lines.push(tokens);
        }
        entry.source.push_str(rest);
        let mut lines = entry.lines.clone();
        if !partial.is_empty() {
            // Highlighted from a copy of the state: the line is not finished.
            let mut parse = entry.parse.clone();
            let mut state = entry.highlight.clone();
            let line = format!("{partial}\n");
            lines.push(line_tokens(
                &mut parse,
                &mut state,
                &highlighter,
                &line,
                &grammars.syntaxes,
            )?);
        }
        done.push(entry);
        if done.len() > KEPT {
            done.remove(0);
        }
        Some(lines)
    })
}

/// One line (newline included, which is left out of the tokens).
fn line_tokens(
    parse: &mut ParseState,
    state: &mut HighlightState,
    highlighter: &Highlighter<'_>,
    line: &str,
    syntaxes: &SyntaxSet,
) -> Option<Tokens> {
    let ops = parse.parse_line(line, syntaxes).ok()?;
    let mut tokens: Tokens = Vec::new();
    for (style, text) in HighlightIterator::new(state, &ops, line, highlighter) {
        let text = text.trim_end_matches(['\n', '\r']);
        if text.is_empty() {
            continue;
        }
        let class = Class::ALL
            .get(usize::from(style.foreground.r))
            .copied()
            .unwrap_or(Class::Plain);
        match tokens.last_mut() {
            Some((last, run)) if *last == class => run.push_str(text),
            _ => tokens.push((class, text.to_string())),
        }
    }
    Some(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classes(tokens: &Tokens) -> Vec<(Class, &str)> {
        tokens.iter().map(|(c, t)| (*c, t.as_str())).collect()
    }

    #[test]
    fn rust_keywords_strings_and_comments_get_their_classes() {
        let lines = highlight("rust", "fn main() {\n    let s = \"hi\"; // note\n}\n").unwrap();
        assert_eq!(lines.len(), 3);
        let second = classes(&lines[1]);
        assert!(second.contains(&(Class::Keyword, "let")), "{second:?}");
        assert!(
            second
                .iter()
                .any(|(c, t)| *c == Class::String && t.contains("hi"))
        );
        assert!(
            second
                .iter()
                .any(|(c, t)| *c == Class::Comment && t.contains("note"))
        );
        assert!(classes(&lines[0]).contains(&(Class::Function, "main")));
        // The text is all there, in order.
        let text: String = lines[1].iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(text, "    let s = \"hi\"; // note");
    }

    #[test]
    fn a_growing_block_gives_what_a_whole_one_does() {
        let code = "def f(x):\n    \"\"\"doc\n    more\"\"\"\n    return x + 1  # one\n";
        let whole = highlight("python", code).unwrap();
        let mut grown = Vec::new();
        for end in 1..=code.len() {
            if code.is_char_boundary(end) {
                grown = highlight("py", &code[..end]).unwrap();
            }
        }
        // A fresh thread has no kept blocks: the same text from scratch.
        let fresh = std::thread::spawn(move || highlight("python", code))
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(grown, whole);
        assert_eq!(fresh, whole);
        // The docstring's second line is still inside it: the state crossed the line.
        let class_of = |line: &Tokens, word: &str| {
            line.iter().find(|(_, t)| t.contains(word)).map(|(c, _)| *c)
        };
        assert_ne!(class_of(&whole[1], "doc"), Some(Class::Plain));
        assert_eq!(class_of(&whole[2], "more"), class_of(&whole[1], "doc"));
    }

    #[test]
    fn aliases_and_unknown_languages() {
        assert!(highlight("ts", "const x: number = 1;\n").is_some());
        assert!(highlight("tsx", "let a = <b/>;\n").is_some());
        assert!(highlight("rust,ignore", "fn f() {}\n").is_some());
        assert!(highlight("klingon", "qapla'\n").is_none());
        assert!(highlight("", "plain\n").is_none());
    }
}
