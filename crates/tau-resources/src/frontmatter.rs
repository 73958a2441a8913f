//! The YAML header that skills and prompt templates may start with (tools-resources §3.3):
//! `---`, YAML, a line starting `---`, then the body.

use yaml_rust2::{Yaml, YamlLoader};

/// A file split into its header fields and its trimmed body.
#[derive(Debug, Default, PartialEq)]
pub struct Frontmatter {
    fields: Vec<(String, Yaml)>,
    pub body: String,
}

impl Frontmatter {
    /// A string field (numbers and booleans are refused, as a string is what is meant).
    pub fn text(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Yaml::as_str)
    }

    /// True only for the YAML boolean `true`.
    pub fn is_true(&self, key: &str) -> bool {
        matches!(self.get(key), Some(Yaml::Boolean(true)))
    }

    fn get(&self, key: &str) -> Option<&Yaml> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// Splits `text`; an unreadable header is an error with the parser's message. Text without a
/// closing marker has no header.
pub fn parse(text: &str) -> Result<Frontmatter, String> {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let Some((yaml, body)) = split(&text) else {
        return Ok(Frontmatter {
            fields: Vec::new(),
            body: text.trim().to_string(),
        });
    };
    let docs = YamlLoader::load_from_str(yaml).map_err(|e| e.to_string())?;
    let fields = match docs.into_iter().next() {
        Some(Yaml::Hash(hash)) => hash
            .into_iter()
            .filter_map(|(k, v)| Some((k.into_string()?, v)))
            .collect(),
        // An empty header, or one that is not a mapping, has no fields.
        _ => Vec::new(),
    };
    Ok(Frontmatter {
        fields,
        body: body.trim().to_string(),
    })
}

/// The body alone (what a skill expands to); a file whose header does not parse still has
/// its text after the header.
pub fn body_of(text: &str) -> String {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    match split(&text) {
        Some((_, body)) => body.trim().to_string(),
        None => text.trim().to_string(),
    }
}

fn split(text: &str) -> Option<(&str, &str)> {
    if !text.starts_with("---") {
        return None;
    }
    let close = 3 + text.get(3..)?.find("\n---")?;
    Some((text.get(4.min(close)..close)?, text.get(close + 4..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields_and_trimmed_body() {
        let f = parse("---\r\nname: a-skill\r\ndescription: Does \"things\"\r\ndisable-model-invocation: true\r\n---\r\n\r\nBody text\r\n\r\n")
            .unwrap_or_default();
        assert_eq!(f.text("name"), Some("a-skill"));
        assert_eq!(f.text("description"), Some("Does \"things\""));
        assert!(f.is_true("disable-model-invocation"));
        assert!(!f.is_true("name"));
        assert_eq!(f.body, "Body text");
    }

    #[test]
    fn no_closing_marker_means_no_header() {
        let f = parse("---\nname: x\nno end\n").unwrap_or_default();
        assert_eq!(f.text("name"), None);
        assert_eq!(f.body, "---\nname: x\nno end");
        assert_eq!(parse("plain\n").unwrap_or_default().body, "plain");
    }

    #[test]
    fn broken_yaml_is_an_error_but_the_body_survives() {
        let text = "---\nname: [unclosed\n---\nbody";
        assert!(parse(text).is_err());
        assert_eq!(body_of(text), "body");
        assert!(
            !parse("---\n- a\n- b\n---\nx")
                .unwrap_or_default()
                .is_true("a")
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Any text parses or fails without panicking, and a body without a header is the
        /// text trimmed.
        #[test]
        fn any_text_is_handled(text in "(---\n)?\\PC{0,80}(\n---\n)?\\PC{0,40}") {
            let _ = parse(&text);
            let _ = body_of(&text);
            if !text.starts_with("---") {
                proptest::prop_assert_eq!(body_of(&text), text.trim());
            }
        }
    }
}
