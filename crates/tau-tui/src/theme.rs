//! The colours and styles of the terminal UI, in one place. `NO_COLOR` (any value) keeps the
//! emphasis (bold, dim, italic, reverse) and drops every colour.

use ratatui::style::{Color, Modifier, Style};

/// Every style the UI draws with.
#[derive(Debug, Clone)]
pub struct Theme {
    pub user: Style,
    pub heading: Style,
    pub inline_code: Style,
    pub code_block: Style,
    pub quote: Style,
    pub bullet: Style,
    pub rule: Style,
    pub link: Style,
    pub dim: Style,
    pub thinking: Style,
    pub tool: Style,
    pub tool_error: Style,
    pub error: Style,
    pub notice: Style,
    pub added: Style,
    pub removed: Style,
    pub footer: Style,
    pub accent: Style,
}

impl Theme {
    /// The theme; without colours when `no_color`.
    pub fn new(no_color: bool) -> Self {
        let c = |color: Color| {
            if no_color {
                Style::default()
            } else {
                Style::default().fg(color)
            }
        };
        let dim = Style::default().add_modifier(Modifier::DIM);
        Self {
            user: c(Color::Cyan).add_modifier(Modifier::BOLD),
            heading: c(Color::Magenta).add_modifier(Modifier::BOLD),
            inline_code: c(Color::Yellow),
            code_block: c(Color::Green),
            quote: dim,
            bullet: c(Color::Cyan),
            rule: dim,
            link: c(Color::Blue).add_modifier(Modifier::UNDERLINED),
            dim,
            thinking: dim.add_modifier(Modifier::ITALIC),
            tool: c(Color::Blue).add_modifier(Modifier::BOLD),
            tool_error: c(Color::Red).add_modifier(Modifier::BOLD),
            error: c(Color::Red),
            notice: c(Color::Yellow),
            added: c(Color::Green),
            removed: c(Color::Red),
            footer: dim,
            accent: c(Color::Cyan),
        }
    }

    /// The theme the environment asks for.
    pub fn from_env() -> Self {
        Self::new(std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()))
    }
}
