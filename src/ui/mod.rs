//! `retrace ui`: a terminal interface over a workspace's sessions, their timelines and the
//! diffs of what each entry changed, with undo, redo, revert and restores behind a
//! confirmation.
//!
//! [`app`] holds the state and what each key does, [`view`] draws it, and [`run`] owns the
//! terminal: raw mode and the alternate screen on the way in, restored on the way out
//! whatever the way out is (quit, an error, Ctrl-C, a panic).

pub mod app;
#[cfg(test)]
mod tests;
pub mod view;

use std::io::Write;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyCode, KeyEventKind, KeyModifiers,
    MouseEventKind,
};
use ratatui::crossterm::execute;

pub use app::App;
use app::{Key, Pane};

/// How often the UI looks for what other processes recorded.
const POLL: Duration = Duration::from_millis(500);
/// How often it looks for what a reload read, while one runs.
const GLANCE: Duration = Duration::from_millis(50);

/// Why the UI could not run.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// Standard input or output is not a terminal (a pipe, a file, a CI job).
    #[error(
        "`retrace ui` needs an interactive terminal (standard input and output are not both \
         one); `retrace log`, `retrace show` and `retrace diff` print the same history"
    )]
    NotATerminal,
    /// The terminal could not be set up, read or drawn on.
    #[error("the terminal: {0} (`retrace ui` needs an interactive terminal)")]
    Terminal(#[from] std::io::Error),
    /// The workspace's history could not be read.
    #[error(transparent)]
    Retrace(#[from] crate::Error),
}

/// The terminal in raw mode on the alternate screen, with the mouse captured; restored
/// when dropped, and by the panic hook it installs.
struct Screen {
    terminal: ratatui::DefaultTerminal,
}

impl Screen {
    fn enter() -> std::io::Result<Screen> {
        // `ratatui::try_init` restores the terminal on panic; the mouse too, here.
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = execute!(std::io::stdout(), DisableMouseCapture);
            before(info);
        }));
        let screen = Screen {
            terminal: ratatui::try_init()?,
        };
        // Dropped on failure: the terminal is given back.
        execute!(std::io::stdout(), EnableMouseCapture)?;
        Ok(screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(std::io::stdout(), DisableMouseCapture);
        ratatui::restore();
        let _ = std::io::stdout().flush();
    }
}

/// Maps a terminal key onto the UI's keys.
fn key_of(code: KeyCode) -> Option<Key> {
    Some(match code {
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Tab => Key::Tab,
        KeyCode::BackTab => Key::BackTab,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        _ => return None,
    })
}

/// Runs the UI on the terminal until the user quits; redraws when another process records.
///
/// # Errors
/// [`UiError::NotATerminal`] without a terminal; [`UiError::Terminal`] when it fails.
pub fn run(mut app: App) -> Result<(), UiError> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(UiError::NotATerminal);
    }
    let mut screen = Screen::enter()?;
    drive(
        &mut app,
        &mut |app| screen.terminal.draw(|f| view::draw(f, app)).map(|_| ()),
        &mut |wait| {
            if event::poll(wait)? {
                event::read().map(Some)
            } else {
                Ok(None)
            }
        },
    )?;
    Ok(())
}

/// The loop of [`run`]: draws, waits up to a look's interval for the next event (`next`
/// gives None when none came in time) and answers it, takes in background work, and every
/// [`POLL`] starts a reload. Nothing here waits for the store: a reload and the GC estimate
/// read on threads of their own (a read can wait for another process's commit), so a key
/// is answered at once whatever they are doing.
fn drive(
    app: &mut App,
    draw: &mut impl FnMut(&App) -> std::io::Result<()>,
    next: &mut impl FnMut(Duration) -> std::io::Result<Option<Event>>,
) -> std::io::Result<()> {
    let mut looked: Option<Instant> = None;
    while !app.quit {
        if looked.is_none_or(|t| t.elapsed() >= POLL) {
            app.start_reload(false);
            looked = Some(Instant::now());
        }
        draw(app)?;
        let mut wait = looked.map_or(POLL, |t| POLL.saturating_sub(t.elapsed()));
        if app.reloading() {
            // What it reads is shown soon after it is there.
            wait = wait.min(GLANCE);
        }
        if let Some(event) = next(wait)? {
            answer(app, &event);
        }
        app.poll();
    }
    Ok(())
}

/// What a terminal event does: a key, or the mouse wheel.
fn answer(app: &mut App, event: &Event) {
    match event {
        Event::Key(k) if k.kind != KeyEventKind::Release => {
            if let Some(key) = key_of(k.code) {
                app.key(key, k.modifiers.contains(KeyModifiers::CONTROL));
            }
        }
        // The wheel moves things only while browsing (never answers a question).
        Event::Mouse(m) if app.mode == app::Input::Browse => {
            let by = match m.kind {
                MouseEventKind::ScrollUp => Key::Up,
                MouseEventKind::ScrollDown => Key::Down,
                _ => Key::Char('\0'),
            };
            // The wheel scrolls the diff when one is open, else the timeline.
            let focus = app.focus;
            app.focus = if app.diff.is_some() {
                Pane::Diff
            } else {
                focus
            };
            app.key(by, false);
            if app.focus == Pane::Diff && focus != Pane::Diff {
                app.focus = focus;
            }
        }
        _ => {}
    }
}
