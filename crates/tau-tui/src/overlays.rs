//! What shows above the editor besides the conversation: the slash-command list while a
//! `/name` is typed (drawn over the conversation's last rows, as a menu is), and the messages
//! queued while a reply streams, each marked steering or follow-up (lines for the layout to
//! give room to). Both are read from the [`App`], so they follow its rules without a terminal.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Widget};
use unicode_width::UnicodeWidthStr;

use crate::app::App;
use crate::text::one_line;

/// The most commands the list shows at once; it scrolls to keep the chosen one in view.
pub const PALETTE_ROWS: usize = 8;

/// The widest name column: a long skill name gives its description less room, not all of it.
const NAME_COLUMN: usize = 28;

/// The queued messages, one line each (steering first: it is delivered first), and how to take
/// them back; nothing when none wait.
pub fn queued_lines(app: &App, width: usize) -> Vec<Line<'static>> {
    let queued = app
        .queued_steering
        .iter()
        .map(|text| ("Steering", text))
        .chain(app.queued_follow_up.iter().map(|text| ("Follow-up", text)));
    let mut lines: Vec<Line<'static>> = queued
        .map(|(kind, text)| {
            let room = width.saturating_sub(kind.len() + 2).max(2);
            Line::from(vec![
                Span::styled(format!("{kind}: "), app.theme.accent),
                Span::styled(one_line(text, room), app.theme.dim),
            ])
        })
        .collect();
    if !lines.is_empty() {
        lines.push(Line::from(Span::styled(
            "↳ Alt+Up takes them back into the editor",
            app.theme.dim,
        )));
    }
    lines
}

/// The rows of the list for `width` cells, the chosen one marked; empty when it is closed.
pub fn palette_lines(app: &App, width: usize) -> Vec<Line<'static>> {
    let items = app.palette_items();
    if items.is_empty() {
        return Vec::new();
    }
    let selected = app.palette_selected(&items);
    let rows = items.len().min(PALETTE_ROWS);
    let first = selected.saturating_sub(rows - 1);
    let shown = &items[first..first + rows];
    let column = shown
        .iter()
        .map(|item| item.name.width())
        .max()
        .unwrap_or(0)
        .min(NAME_COLUMN);
    let mut lines: Vec<Line<'static>> = shown
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let chosen = first + i == selected;
            let name_style = if chosen {
                app.theme.accent.add_modifier(Modifier::REVERSED)
            } else {
                app.theme.accent
            };
            let name = one_line(&item.name, NAME_COLUMN.max(2));
            let pad = column.saturating_sub(name.width());
            let room = width.saturating_sub(column + 4).max(2);
            Line::from(vec![
                Span::raw(if chosen { "› " } else { "  " }),
                Span::styled(name, name_style),
                Span::raw(" ".repeat(pad + 2)),
                Span::styled(one_line(&item.description, room), app.theme.dim),
            ])
        })
        .collect();
    let more = if items.len() > rows {
        format!("  {}/{} • ", selected + 1, items.len())
    } else {
        "  ".to_string()
    };
    lines.push(Line::from(Span::styled(
        format!("{more}↑↓ move • Tab complete • Enter run • Esc close"),
        app.theme.dim,
    )));
    lines
}

/// Draws the list at the bottom of `area` (the rows just above the editor), over what is
/// there; nothing when it is closed.
pub fn render_palette(app: &App, area: Rect, buf: &mut Buffer) {
    let lines = palette_lines(app, area.width as usize);
    if lines.is_empty() || area.height == 0 {
        return;
    }
    let height = (lines.len() as u16).min(area.height);
    let skip = lines.len() - height as usize;
    let rect = Rect {
        x: area.x,
        y: area.y + area.height - height,
        width: area.width,
        height,
    };
    Clear.render(rect, buf);
    // In a screen too short for it all, the top rows are left out, the hint kept.
    Paragraph::new(lines.into_iter().skip(skip).collect::<Vec<_>>()).render(rect, buf);
}
