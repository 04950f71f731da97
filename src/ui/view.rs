//! Drawing `retrace ui`: sessions and timeline on the left, the selected entry's paths and
//! a path's diff on the right, the last result and the store's figures at the bottom.
//!
//! Prompts, names, paths and file lines are drawn with what a terminal would act on shown
//! escaped ([`terminal_line`], and `first_line` for rows): the app keeps the exact text.

use std::fmt::Write as _;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Clear, List, ListItem, ListState, Paragraph, Wrap};

use super::app::{App, Input, Pane, Showing};
use crate::history::inspect::{first_line, time_text};
use crate::object::terminal_line;

/// Columns a string takes on a terminal (wide characters take two).
fn columns(text: &str) -> usize {
    Span::raw(text).width()
}

/// The first line of `text` in exactly `cols` terminal columns (escaped as `first_line`
/// escapes it): cut with `…`, or padded.
fn fit(text: &str, cols: usize) -> String {
    let line = first_line(text, usize::MAX);
    let mut out = String::new();
    let mut used = 0;
    let cut = columns(&line) > cols;
    let room = if cut { cols.saturating_sub(1) } else { cols };
    for c in line.chars() {
        let w = columns(c.encode_utf8(&mut [0; 4]));
        if used + w > room {
            break;
        }
        out.push(c);
        used += w;
    }
    if cut && cols > 0 {
        out.push('…');
        used += 1;
    }
    out.extend(std::iter::repeat_n(' ', cols.saturating_sub(used)));
    out
}
use crate::history::timeline::{Moment, TimelineEntry};

/// The keys, as the help screen and the README list them.
pub const KEYS: &[(&str, &str)] = &[
    ("↑/↓ j/k", "move in the pane"),
    ("PgUp/PgDn g/G", "page, first, last"),
    ("Tab / Shift-Tab", "next / previous pane"),
    (
        "Enter",
        "open: a session's timeline, an entry's paths, a path's diff",
    ),
    ("Esc", "close the diff, back to the entry's change"),
    ("/", "filter the timeline by prompt text or path"),
    ("u / U", "undo / redo (files)"),
    ("v", "revert the selected turn, keeping later changes"),
    ("s", "restore the whole workspace to the selected entry"),
    ("p", "restore the selected path as the entry has it"),
    ("c", "checkpoint now"),
    ("d", "diff the selected entry against the disk"),
    ("r", "reload"),
    ("?", "this help"),
    ("q / Ctrl-C", "quit"),
];

/// The mark of the selected row of each list (seen without colour too).
const SYMBOL: &str = "▸ ";
/// Its width in columns.
const SYMBOL_WIDTH: u16 = 2;

/// Styles, or none of them without colour.
struct Paint {
    colour: bool,
}

impl Paint {
    fn fg(&self, c: Color) -> Style {
        if self.colour {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }
    fn selected() -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    fn border(&self, focused: bool) -> Style {
        if focused {
            self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        }
    }
}

/// A byte count in at most five characters: `512B`, `12K`, `3.4M`, `1.2G`.
#[must_use]
pub fn short_bytes(n: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let f = n as f64;
    match n {
        0..1024 => format!("{n}B"),
        1024..10_240 => format!("{:.1}K", f / 1024.0),
        10_240..1_048_576 => format!("{:.0}K", f / 1024.0),
        1_048_576..10_485_760 => format!("{:.1}M", f / 1_048_576.0),
        10_485_760..1_073_741_824 => format!("{:.0}M", f / 1_048_576.0),
        _ => format!("{:.1}G", f / 1_073_741_824.0),
    }
}

/// `MM-DD HH:MM` of Unix milliseconds (UTC).
fn short_time(ms: u64) -> String {
    let t = time_text(ms, false);
    t.get(5..).unwrap_or(&t).to_string()
}

/// Draws the whole screen.
pub fn draw(f: &mut Frame, app: &App) {
    let paint = Paint { colour: app.colour };
    let columns = usize::from(f.area().width.max(1));
    let message_lines = app.message.as_ref().map_or(0, |m| {
        terminal_line(&m.line)
            .chars()
            .count()
            .div_ceil(columns)
            .max(1)
            + m.paths.len().min(3)
    });
    let [body, message, footer] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(u16::try_from(message_lines).unwrap_or(4)),
        Constraint::Length(1),
    ])
    .areas(f.area());
    // An open diff takes most of the width: code lines are long.
    let left_share = if app.diff.is_some() { 38 } else { 58 };
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(left_share), Constraint::Fill(1)]).areas(body);
    let sessions_height = u16::try_from(
        (app.sessions.len() + usize::from(app.bursts > 0)).max(1) + 2,
    )
        .unwrap_or(u16::MAX)
        .min(left.height / 3)
        .max(3);
    let [sessions, timeline] =
        Layout::vertical([Constraint::Length(sessions_height), Constraint::Fill(1)]).areas(left);
    draw_sessions(f, app, &paint, sessions);
    draw_timeline(f, app, &paint, timeline);
    if app.diff.is_some() {
        let paths_height = u16::try_from(app.paths.len() + 2)
            .unwrap_or(u16::MAX)
            .min(right.height / 3)
            .max(3);
        let [paths, diff] =
            Layout::vertical([Constraint::Length(paths_height), Constraint::Fill(1)]).areas(right);
        draw_paths(f, app, &paint, paths);
        draw_diff(f, app, &paint, diff);
    } else {
        draw_paths(f, app, &paint, right);
    }
    draw_message(f, app, &paint, message);
    draw_footer(f, app, footer);
    match &app.mode {
        Input::Help => draw_help(f, &paint),
        Input::Confirm(action) => {
            let text = vec![
                Line::from(terminal_line(&action.question()).into_owned()),
                Line::from(""),
                Line::from("y: yes    any other key: no"),
            ];
            draw_modal(f, " confirm ", text, &paint);
        }
        Input::Browse | Input::Filter => {}
    }
}

fn draw_sessions(f: &mut Frame, app: &App, paint: &Paint, area: Rect) {
    let width = usize::from(area.width.saturating_sub(2 + SYMBOL_WIDTH));
    let mut items: Vec<ListItem> = app
        .sessions
        .iter()
        .map(|s| {
            let tail = format!(
                " {:>3} turn{} {}",
                s.turns,
                if s.turns == 1 { " " } else { "s" },
                short_time(s.touched_ms)
            );
            let name_width = width.saturating_sub(columns(&tail)).max(4);
            let name = match &s.agent {
                Some(a) if columns(s.shown()) + columns(a) + 3 <= name_width => {
                    format!("{} ({a})", s.shown())
                }
                _ => s.shown().to_string(),
            };
            ListItem::new(format!("{}{tail}", fit(&name, name_width)))
        })
        .collect();
    if app.bursts > 0 {
        let tail = format!(
            " {:>3} burst{}",
            app.bursts,
            if app.bursts == 1 { " " } else { "s" }
        );
        let name_width = width.saturating_sub(columns(&tail)).max(4);
        items.push(ListItem::new(Line::styled(
            format!("{}{tail}", fit("local history (no session)", name_width)),
            paint.fg(Color::Magenta),
        )));
    }
    let title = format!(" sessions ({}) ", app.sessions.len());
    let empty = items.is_empty();
    let list = List::new(items)
        .block(
            Block::bordered()
                .title(focused(title, app.focus == Pane::Sessions))
                .border_style(paint.border(app.focus == Pane::Sessions)),
        )
        .highlight_style(Paint::selected())
        .highlight_symbol(SYMBOL);
    let mut state = ListState::default().with_selected(Some(app.session));
    if empty {
        let empty = Paragraph::new("no sessions yet: an agent's turns appear here").block(
            Block::bordered()
                .title(focused(" sessions ", app.focus == Pane::Sessions))
                .border_style(paint.border(app.focus == Pane::Sessions)),
        );
        f.render_widget(empty, area);
    } else {
        f.render_stateful_widget(list, area, &mut state);
    }
}

/// The session's position as `retrace status` says it: the cursor and the redo stack.
fn position(app: &App) -> String {
    if app.on_local() {
        return "local history, newest first".into();
    }
    let Some(t) = &app.timeline else {
        return String::new();
    };
    let s = &t.status;
    let mut out = match s.cursor {
        Some(n) => format!("at turn {n}"),
        None => "before the first turn".into(),
    };
    if let Some((n, _)) = s.redo_turn {
        let _ = write!(out, ", redo turn {n}");
    }
    if let Some(p) = s.pending {
        let _ = write!(out, ", turn {p} running");
    }
    out
}

/// The short word of a row: `turn 3`, `ckpt 1`, `undo 3`, `restore→2`.
fn what_of(e: &TimelineEntry) -> String {
    let log = e.entry.as_ref();
    match (e.moment, log) {
        (Moment::Checkpoint, Some(l)) => format!("ckpt {}", l.number),
        (Moment::Navigate, _) => format!("restore→{}", e.to.unwrap_or(0)),
        (m, Some(l)) => format!("{} {}", m.word(), l.number),
        (m, None) => m.word().to_string(),
    }
}

/// One timeline row, fitted to `width` columns: the date only when there is room for it
/// and for some of the prompt.
fn timeline_row(e: &TimelineEntry, cursor: Option<u64>, width: usize) -> (String, char) {
    let log = e.entry.as_ref();
    let mark = match (e.moment, log) {
        (Moment::Turn | Moment::Revert, Some(l)) if Some(l.number) == cursor => '●',
        (Moment::Turn | Moment::Revert, Some(l)) if l.undone => '↶',
        _ => ' ',
    };
    let text = match (e.moment, log) {
        (Moment::Revert, Some(l)) => match (l.reverts, &l.text) {
            (Some(n), None) => format!("reverts turn {n}"),
            (_, Some(t)) => t.clone(),
            (None, None) => String::new(),
        },
        (_, Some(l)) => l.text.clone().unwrap_or_default(),
        (Moment::Burst, None) => match &e.burst {
            Some(b) if b.files() == 0 => "directories only".into(),
            // The log's first snapshot names no path: everything in it is new.
            Some(b) if b.paths.is_empty() => {
                format!("{} file{}", b.files(), if b.files() == 1 { "" } else { "s" })
            }
            Some(b) => b.listed(),
            None => String::new(),
        },
        (_, None) => String::new(),
    };
    let wide = width >= 64;
    let counts = match (e.moment, log) {
        (Moment::Turn | Moment::Revert | Moment::Checkpoint, Some(l)) => format!(
            " +{} ~{} -{} {:>5}",
            l.counts.added,
            l.counts.modified,
            l.counts.deleted,
            short_bytes(l.bytes_added)
        ),
        (Moment::Burst, _) => e.burst.as_ref().map_or_else(String::new, |b| {
            format!(
                " +{} ~{} -{}",
                b.counts.added, b.counts.modified, b.counts.deleted
            )
        }),
        _ => String::new(),
    };
    let time = short_time(e.time_ms);
    let time = if wide {
        time.as_str()
    } else {
        time.get(6..).unwrap_or(&time)
    };
    let head = format!("{mark} {time} {:<9} ", what_of(e));
    let room = width
        .saturating_sub(columns(&head) + columns(&counts))
        .max(1);
    (format!("{head}{}{counts}", fit(&text, room)), mark)
}

fn draw_timeline(f: &mut Frame, app: &App, paint: &Paint, area: Rect) {
    let width = usize::from(area.width.saturating_sub(2 + SYMBOL_WIDTH));
    let cursor = app.timeline.as_ref().and_then(|t| t.status.cursor);
    let rows = app.rows();
    let items: Vec<ListItem> = rows
        .iter()
        .map(|e| {
            let (text, mark) = timeline_row(e, cursor, width);
            let style = match (mark, e.moment) {
                ('↶', _) => paint.fg(Color::DarkGray),
                (_, Moment::Undo | Moment::Redo | Moment::Navigate) => paint.fg(Color::Yellow),
                (_, Moment::Checkpoint) => paint.fg(Color::Blue),
                (_, Moment::Burst) => paint.fg(Color::Magenta),
                _ => Style::default(),
            };
            ListItem::new(Line::styled(text, style))
        })
        .collect();
    let mut title = format!(" timeline: {} ", position(app));
    if app.mode == Input::Filter || !app.filter.is_empty() {
        title = format!(
            " timeline /{}{} ",
            terminal_line(&app.filter),
            if app.mode == Input::Filter { "_" } else { "" }
        );
    }
    let block = Block::bordered()
        .title(focused(title, app.focus == Pane::Timeline))
        .border_style(paint.border(app.focus == Pane::Timeline));
    if rows.is_empty() {
        let why = if app.filter.is_empty() {
            "nothing recorded in this session yet"
        } else {
            "no entry matches the filter (Esc clears it)"
        };
        f.render_widget(Paragraph::new(why).block(block), area);
        return;
    }
    let list = List::new(items)
        .block(block)
        .highlight_style(Paint::selected())
        .highlight_symbol(SYMBOL);
    let mut state = ListState::default().with_selected(Some(app.entry));
    f.render_stateful_widget(list, area, &mut state);
}

fn draw_paths(f: &mut Frame, app: &App, paint: &Paint, area: Rect) {
    let width = usize::from(area.width.saturating_sub(2 + SYMBOL_WIDTH));
    let title = match (&app.showing, app.selected_entry()) {
        (Showing::AgainstDisk(id), _) => format!(" the disk against {} ", id.short()),
        (Showing::Change, Some(e)) => match (&e.entry, e.moment) {
            (Some(l), Moment::Undo | Moment::Redo) => {
                format!(" {} of turn {}: its change ", e.moment.word(), l.number)
            }
            (Some(l), m) => format!(" {} {}: {} path(s) ", m.word(), l.number, app.paths.len()),
            (None, Moment::Burst) => format!(" burst: {} path(s) ", app.paths.len()),
            (None, _) => format!(" {} ", e.moment.word()),
        },
        (Showing::Change, None) => " paths ".into(),
    };
    let block = Block::bordered()
        .title(focused(title, app.focus == Pane::Paths))
        .border_style(paint.border(app.focus == Pane::Paths));
    if app.paths.is_empty() {
        let why = match app.selected_entry() {
            None => String::new(),
            Some(e) if e.entry.is_none() && e.moment != Moment::Burst => {
                format!(
                    "a {} moves the session; select a turn to see a change",
                    e.moment.word()
                )
            }
            Some(_) if matches!(app.showing, Showing::AgainstDisk(_)) => {
                "the disk equals this snapshot".into()
            }
            Some(_) => "no file changed".into(),
        };
        f.render_widget(
            Paragraph::new(why).wrap(Wrap { trim: true }).block(block),
            area,
        );
        return;
    }
    let items: Vec<ListItem> = app
        .paths
        .iter()
        .map(|p| {
            let lines = if p.binary {
                " binary".to_string()
            } else if p.added + p.removed > 0 {
                format!(" +{} -{}", p.added, p.removed)
            } else {
                String::new()
            };
            let room = width.saturating_sub(2 + columns(&lines)).max(1);
            let path = fit(&p.path, room);
            let colour = match p.change {
                "A" => Color::Green,
                "D" => Color::Red,
                _ => Color::Yellow,
            };
            ListItem::new(Line::from(vec![
                Span::styled(format!("{} ", p.change), paint.fg(colour)),
                Span::raw(format!("{path}{lines}")),
            ]))
        })
        .collect();
    let list = List::new(items)
        .block(block)
        .highlight_style(Paint::selected())
        .highlight_symbol(SYMBOL);
    let mut state = ListState::default().with_selected(Some(app.path));
    f.render_stateful_widget(list, area, &mut state);
}

fn draw_diff(f: &mut Frame, app: &App, paint: &Paint, area: Rect) {
    let Some(patches) = &app.diff else {
        return;
    };
    let mut lines: Vec<Line> = Vec::new();
    for p in patches {
        for l in p.text.lines() {
            let style = if l.starts_with("+++") || l.starts_with("---") {
                Style::default().add_modifier(Modifier::BOLD)
            } else if l.starts_with('+') {
                paint.fg(Color::Green)
            } else if l.starts_with('-') {
                paint.fg(Color::Red)
            } else if l.starts_with("@@") {
                paint.fg(Color::Cyan)
            } else {
                Style::default()
            };
            // A terminal cell cannot hold a tab: four spaces keep the indentation.
            let l = l.replace('\t', "    ");
            lines.push(Line::styled(terminal_line(&l).into_owned(), style));
        }
    }
    if lines.is_empty() {
        lines.push(Line::from(
            "no content change (a directory, or the same bytes)",
        ));
    }
    let title = app.paths.get(app.path).map_or(" diff ".into(), |p| {
        format!(" diff {} ", terminal_line(&p.path))
    });
    let para = Paragraph::new(Text::from(lines))
        .scroll((app.scroll, 0))
        .block(
            Block::bordered()
                .title(focused(title, app.focus == Pane::Diff))
                .border_style(paint.border(app.focus == Pane::Diff)),
        );
    f.render_widget(para, area);
}

fn draw_message(f: &mut Frame, app: &App, paint: &Paint, area: Rect) {
    let Some(m) = &app.message else {
        return;
    };
    let style = if m.refused {
        paint.fg(Color::Red)
    } else {
        paint.fg(Color::Green)
    };
    let mut lines = vec![Line::styled(terminal_line(&m.line).into_owned(), style)];
    let shown = m.paths.len().min(3);
    for (i, p) in m.paths.iter().take(shown).enumerate() {
        let p = terminal_line(p);
        if i + 1 == shown && m.paths.len() > shown {
            lines.push(Line::from(format!(
                "  {p} ... and {} more",
                m.paths.len() - shown
            )));
        } else {
            lines.push(Line::from(format!("  {p}")));
        }
    }
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
}

fn draw_footer(f: &mut Frame, app: &App, area: Rect) {
    let ft = &app.footer;
    let gc = match ft.gc_frees {
        Some(b) => format!(" · gc frees {}", short_bytes(b)),
        None if app.estimating() => " · gc frees …".into(),
        None => String::new(),
    };
    let text = format!(
        " store {} of {}{gc} · ? help · q quit",
        short_bytes(ft.store_bytes),
        short_bytes(ft.budget)
    );
    f.render_widget(
        Paragraph::new(text).style(Style::default().add_modifier(Modifier::REVERSED)),
        area,
    );
}

fn draw_help(f: &mut Frame, paint: &Paint) {
    let mut lines: Vec<Line> = KEYS
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!("{k:<16}"), paint.fg(Color::Cyan)),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::from(
        "Actions ask first and keep the CLI's guards; any key closes this.",
    ));
    draw_modal(f, " keys ", lines, paint);
}

/// A box in the middle of the screen, over what is there.
fn draw_modal(f: &mut Frame, title: &str, lines: Vec<Line>, paint: &Paint) {
    let area = f.area();
    let width = lines
        .iter()
        .map(Line::width)
        .max()
        .unwrap_or(0)
        .saturating_add(4)
        .min(usize::from(area.width));
    let inner = width.saturating_sub(2).max(1);
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(inner).max(1)).sum();
    let height = (rows + 2).min(usize::from(area.height));
    let w = u16::try_from(width).unwrap_or(area.width);
    let h = u16::try_from(height).unwrap_or(area.height);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::bordered()
                .title(title)
                .border_style(paint.border(true)),
        ),
        r,
    );
}

/// A pane's title, marked `▶` when the pane has the focus (not by the border's colour
/// alone, which a terminal without colour does not show).
fn focused(title: impl Into<String>, focus: bool) -> String {
    let title = title.into();
    if focus { format!("▶{title}") } else { title }
}
