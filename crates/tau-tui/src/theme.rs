//! The colours and styles of the terminal UI, in one place. Colours are the terminal's own 16
//! (so its palette decides the exact shades), with one set for dark backgrounds and one for
//! light ones. `NO_COLOR` (any value) keeps the emphasis (bold, dim, italic, reverse) and drops
//! every colour.

use std::time::Duration;

use ratatui::style::{Color, Modifier, Style};

use crate::highlight::Class;

/// The terminal's background, as far as picking colours goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Background {
    Dark,
    Light,
}

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
    /// Highlighted code, by token class (`Class as usize`).
    syntax: [Style; 9],
}

impl Theme {
    /// The theme for a dark background; without colours when `no_color`.
    pub fn new(no_color: bool) -> Self {
        Self::for_background(no_color, Background::Dark)
    }

    /// The theme for `background`; without colours when `no_color`.
    pub fn for_background(no_color: bool, background: Background) -> Self {
        let c = |color: Color| {
            if no_color {
                Style::default()
            } else {
                Style::default().fg(color)
            }
        };
        let light = background == Background::Light;
        // Yellow and cyan wash out on white: their darker neighbours take their place.
        let (yellowish, cyanish) = if light {
            (Color::Magenta, Color::Blue)
        } else {
            (Color::Yellow, Color::Cyan)
        };
        let dim = Style::default().add_modifier(Modifier::DIM);
        let mut syntax = [Style::default(); 9];
        syntax[Class::Comment as usize] = c(if light { Color::DarkGray } else { Color::Gray })
            .add_modifier(Modifier::ITALIC)
            .add_modifier(Modifier::DIM);
        syntax[Class::Keyword as usize] = c(Color::Magenta);
        syntax[Class::String as usize] = c(Color::Green);
        syntax[Class::Constant as usize] = c(if light { Color::Red } else { Color::Yellow });
        syntax[Class::Function as usize] = c(Color::Blue);
        syntax[Class::Type as usize] = c(cyanish);
        syntax[Class::Added as usize] = c(Color::Green);
        syntax[Class::Removed as usize] = c(Color::Red);
        Self {
            user: c(cyanish).add_modifier(Modifier::BOLD),
            heading: c(Color::Magenta).add_modifier(Modifier::BOLD),
            inline_code: c(yellowish),
            code_block: c(Color::Green),
            quote: dim,
            bullet: c(cyanish),
            rule: dim,
            link: c(Color::Blue).add_modifier(Modifier::UNDERLINED),
            dim,
            thinking: dim.add_modifier(Modifier::ITALIC),
            tool: c(Color::Blue).add_modifier(Modifier::BOLD),
            tool_error: c(Color::Red).add_modifier(Modifier::BOLD),
            error: c(Color::Red),
            notice: c(yellowish),
            added: c(Color::Green),
            removed: c(Color::Red),
            footer: dim,
            accent: c(cyanish),
            syntax,
        }
    }

    /// The style of a highlighted token.
    pub fn syntax(&self, class: Class) -> Style {
        self.syntax[class as usize]
    }

    /// The theme the environment asks for: `NO_COLOR`, then the background from the `theme`
    /// setting (`"light"` or `"dark"`), `COLORFGBG`, or the terminal's answer to a query of
    /// its background colour; dark when nothing tells.
    pub fn from_env(setting: Option<&str>) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let background = if no_color {
            Background::Dark
        } else {
            detect_background(setting)
        };
        Self::for_background(no_color, background)
    }
}

/// How long the terminal may take to say its background colour. Terminals that do not know the
/// query answer the one sent after it at once, so only a terminal that answers nothing waits
/// this long; over SSH the answer takes a round trip. An answer later than this would reach
/// the editor as keys, so it is generous (the crate's own default); the `theme` setting skips
/// the question.
const QUERY_TIMEOUT: Duration = Duration::from_secs(1);

fn detect_background(setting: Option<&str>) -> Background {
    if let Some(background) = setting.and_then(parse_background) {
        return background;
    }
    if let Some(background) = std::env::var("COLORFGBG")
        .ok()
        .and_then(|v| from_colorfgbg(&v))
    {
        return background;
    }
    let options = {
        let mut options = terminal_colorsaurus::QueryOptions::default();
        options.timeout = QUERY_TIMEOUT;
        options
    };
    match terminal_colorsaurus::theme_mode(options) {
        Ok(terminal_colorsaurus::ThemeMode::Light) => Background::Light,
        _ => Background::Dark,
    }
}

fn parse_background(setting: &str) -> Option<Background> {
    match setting.to_ascii_lowercase().as_str() {
        "light" => Some(Background::Light),
        "dark" => Some(Background::Dark),
        _ => None,
    }
}

/// `COLORFGBG` is `fg;bg` (rxvt, some others; sometimes `fg;x;bg`): a background of 7 or 15
/// (white) or 9-14 is light, 0-6 and 8 are dark.
fn from_colorfgbg(value: &str) -> Option<Background> {
    let bg: u8 = value.rsplit(';').next()?.trim().parse().ok()?;
    Some(match bg {
        7 | 9..=15 => Background::Light,
        _ => Background::Dark,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colorfgbg_and_the_setting_name_the_background() {
        assert_eq!(from_colorfgbg("0;15"), Some(Background::Light));
        assert_eq!(from_colorfgbg("15;0"), Some(Background::Dark));
        assert_eq!(from_colorfgbg("12;default;7"), Some(Background::Light));
        assert_eq!(from_colorfgbg("nonsense"), None);
        assert_eq!(parse_background("Light"), Some(Background::Light));
        assert_eq!(parse_background("my-theme"), None);
        assert_eq!(detect_background(Some("light")), Background::Light);
    }

    #[test]
    fn a_light_background_trades_yellow_for_a_darker_colour() {
        let dark = Theme::for_background(false, Background::Dark);
        let light = Theme::for_background(false, Background::Light);
        assert_eq!(dark.inline_code.fg, Some(Color::Yellow));
        assert_ne!(light.inline_code.fg, Some(Color::Yellow));
        assert_ne!(light.syntax(Class::Constant).fg, Some(Color::Yellow));
        let plain = Theme::for_background(true, Background::Light);
        assert_eq!(plain.syntax(Class::Keyword).fg, None);
    }
}
