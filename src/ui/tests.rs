//! `retrace ui` drawn on ratatui's `TestBackend` over a fixture store (two sessions, turns,
//! a checkpoint, an undo, a conflict), the screens kept as insta snapshots; and its keys
//! driving real actions on the fixture's disk.

use std::fs;
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;

use super::app::{App, Input, Key, Pane};
use super::view;
use crate::{Config, Mode, Workspace};

/// The fixture: a workspace with a history, and its home.
struct Fixture {
    ws: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Fixture {
    fn write(&self, rel: &str, content: &[u8]) {
        let p = self.ws.path().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    fn open(&self) -> Workspace {
        Workspace::open(self.ws.path(), &Config::with_home(self.home.path())).unwrap()
    }

    fn app(&self, session: Option<&str>) -> App {
        let mut app = App::new(self.open(), session).unwrap();
        app.colour = false;
        app.settle();
        app
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.ws.path().join(rel)).unwrap_or_default()
    }
}

/// One turn of `session`: `work` runs between its begin and its end.
fn turn(ws: &Workspace, session: &str, agent: &str, prompt: &str, work: impl FnOnce()) {
    let s = ws.session(session).for_agent(agent);
    let t = s.begin_turn(None, Some(prompt.into())).unwrap();
    t.wait_before(Duration::from_mins(2)).unwrap();
    work();
    t.end(None).unwrap();
}

/// Two sessions: claude-1 with two turns, a checkpoint between them and the second turn
/// undone; codex-2 with one turn that changed a path claude-1's undone turn changed, so
/// redoing it conflicts.
fn fixture() -> Fixture {
    let f = Fixture {
        ws: tempfile::tempdir().unwrap(),
        home: tempfile::tempdir().unwrap(),
    };
    f.write("a.txt", b"one\n");
    f.write("src/lib.rs", b"pub fn lib() {}\n");
    f.write("logo.png", b"\x89PNG\r\n\x1a\n\0\0\0binary");
    let ws = f.open();
    turn(
        &ws,
        "claude-1",
        "claude-code",
        "add a greeting to a.txt",
        || {
            f.write("a.txt", b"one\nhello\n");
            f.write(
                "src/greet.rs",
                b"pub fn greet() -> &'static str {\n    \"hello\"\n}\n",
            );
        },
    );
    ws.session("claude-1")
        .checkpoint(Some("before the refactor".into()))
        .unwrap();
    turn(
        &ws,
        "claude-1",
        "claude-code",
        "refactor lib.rs and drop the logo\nwith a second line that is not shown",
        || {
            f.write("src/lib.rs", b"pub fn lib() -> u32 {\n    42\n}\n");
            fs::remove_file(f.ws.path().join("logo.png")).unwrap();
        },
    );
    ws.session("claude-1").undo(Mode::Files).unwrap();
    turn(&ws, "codex-2", "codex", "document the library", || {
        f.write("docs/guide.md", b"# Guide\n\nCall `lib()`.\n");
        f.write("src/lib.rs", b"/// The library.\npub fn lib() {}\n");
    });
    f
}

/// The screen as text, times and ids replaced so that it does not change between runs.
fn screen(app: &App, width: u16, height: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
    t.draw(|f| view::draw(f, app)).unwrap();
    t.backend().to_string()
}

fn assert_screen(name: &str, app: &mut App, width: u16, height: u16) {
    app.settle();
    let text = screen(app, width, height);
    insta::with_settings!({filters => vec![
        (r"\d\d-\d\d \d\d:\d\d", "MM-DD hh:mm"),
        (r"\b\d\d:\d\d\b", "hh:mm"),
        (r"store +\S+ of", "store [size] of"),
        (r"gc frees +\S+", "gc frees [size]"),
        (r"\b[0-9a-f]{12}\b", "[snapshot id]"),
    ]}, {
        insta::assert_snapshot!(name, text);
    });
}

fn keys(app: &mut App, keys: &[Key]) {
    for k in keys {
        app.key(*k, false);
    }
}

#[test]
fn the_main_view_lists_sessions_the_timeline_and_the_selected_entrys_paths() {
    let f = fixture();
    let mut app = f.app(Some("claude-1"));
    let rows: Vec<_> = app.rows().iter().map(|e| e.moment.word()).collect();
    assert_eq!(rows, ["undo", "turn", "checkpoint", "turn"]);
    // The footer's estimate is what a dry-run GC reports.
    let ws = f.open();
    let gc = ws.gc(ws.settings().gc_grace_secs.value, true).unwrap();
    assert_eq!(app.footer.gc_frees, Some(gc.stored_bytes_freed));
    assert!(app.footer.store_bytes > 0);
    assert_screen("main_80x24", &mut app, 80, 24);
    assert_screen("main_160x48", &mut app, 160, 48);
}

#[test]
fn a_paths_diff_opens_with_enter_and_names_a_binary_change() {
    let f = fixture();
    let mut app = f.app(Some("claude-1"));
    // The newest row is the undo of turn 2: its change is turn 2's.
    keys(&mut app, &[Key::Tab, Key::Enter]);
    assert_eq!(app.focus, Pane::Diff);
    let text: String = app.diff.iter().flatten().map(|p| p.text.clone()).collect();
    assert!(text.contains("Binary files"), "{text}");
    // Turn 1: a.txt's diff.
    keys(&mut app, &[Key::Esc, Key::Tab, Key::Tab]);
    assert_eq!(app.focus, Pane::Timeline);
    keys(
        &mut app,
        &[Key::Down, Key::Down, Key::Down, Key::Enter, Key::Enter],
    );
    let e = app.selected_entry().unwrap();
    assert_eq!(e.moment.word(), "turn");
    assert_eq!(app.paths[app.path].path, "a.txt");
    assert_screen("diff_80x24", &mut app, 80, 24);
    assert_screen("diff_160x48", &mut app, 160, 48);
}

#[test]
fn a_refused_redo_names_the_conflicting_path_and_writes_nothing() {
    let f = fixture();
    let mut app = f.app(Some("claude-1"));
    // The user's own edit of a path the redo would write: a conflict.
    f.write(
        "src/lib.rs",
        b"/// The library.\npub fn lib() -> u8 { 7 }\n",
    );
    let before = f.read("src/lib.rs");
    keys(&mut app, &[Key::Char('U')]);
    assert!(matches!(app.mode, Input::Confirm(_)));
    assert_screen("confirm_80x24", &mut app, 80, 24);
    keys(&mut app, &[Key::Char('y')]);
    let m = app.message.clone().unwrap();
    assert!(m.refused, "{m:?}");
    assert_eq!(m.paths, ["src/lib.rs"], "{m:?}");
    assert_eq!(f.read("src/lib.rs"), before);
    assert_screen("conflict_80x24", &mut app, 80, 24);
}

#[test]
fn a_redo_leaves_a_path_another_session_changed_since_and_names_its_writer() {
    let f = fixture();
    let mut app = f.app(Some("claude-1"));
    // codex-2 rewrote src/lib.rs after the undo, on the lines the turn changed.
    let before = f.read("src/lib.rs");
    keys(&mut app, &[Key::Char('U'), Key::Char('y')]);
    let m = app.message.clone().unwrap();
    assert!(!m.refused, "{m:?}");
    assert!(m.line.contains("1 left alone"), "{m:?}");
    assert!(
        m.paths.len() == 1 && m.paths[0].starts_with("src/lib.rs (last written by session codex-2"),
        "{m:?}"
    );
    assert_eq!(f.read("src/lib.rs"), before);
    assert!(!f.ws.path().join("logo.png").exists());
}

#[test]
fn help_lists_every_key() {
    let f = fixture();
    let mut app = f.app(None);
    keys(&mut app, &[Key::Char('?')]);
    let text = screen(&app, 80, 24);
    for (k, _) in view::KEYS {
        assert!(text.contains(k), "{k} missing from\n{text}");
    }
    assert_screen("help_80x24", &mut app, 80, 24);
    keys(&mut app, &[Key::Char('x')]);
    assert_eq!(app.mode, Input::Browse);
}

#[test]
fn reverting_a_turn_after_confirming_keeps_later_changes() {
    let f = fixture();
    let mut app = f.app(Some("codex-2"));
    // codex-2's turn: revert it, answering no first, then yes.
    keys(&mut app, &[Key::Char('v'), Key::Char('n')]);
    assert!(f.ws.path().join("docs/guide.md").exists());
    assert_eq!(app.message.as_ref().unwrap().line, "nothing done");
    keys(&mut app, &[Key::Char('v'), Key::Char('y')]);
    let m = app.message.clone().unwrap();
    assert!(!m.refused, "{m:?}");
    assert!(!f.ws.path().join("docs/guide.md").exists());
    assert_eq!(f.read("src/lib.rs"), "pub fn lib() {}\n");
    // The revert is on the timeline now, newest.
    assert_eq!(app.rows()[0].moment.word(), "revert");
}

#[test]
fn a_path_is_restored_alone_and_a_checkpoint_taken() {
    let f = fixture();
    let mut app = f.app(Some("claude-1"));
    // Turn 1 (the undo, turn 2 and the checkpoint are newer): restore greet.rs after the
    // user deleted it, nothing else.
    fs::remove_file(f.ws.path().join("src/greet.rs")).unwrap();
    keys(&mut app, &[Key::Char('c'), Key::Char('y')]);
    assert!(!app.message.as_ref().unwrap().refused, "{:?}", app.message);
    assert_eq!(app.rows()[0].moment.word(), "checkpoint");
    keys(&mut app, &[Key::End, Key::Tab, Key::Down]);
    assert_eq!(app.paths[app.path].path, "src/greet.rs");
    keys(&mut app, &[Key::Char('p'), Key::Char('y')]);
    assert!(!app.message.as_ref().unwrap().refused, "{:?}", app.message);
    assert!(f.read("src/greet.rs").contains("hello"));
    assert_eq!(f.read("a.txt"), "one\nhello\n");
}

#[test]
fn the_disk_is_diffed_against_an_entry_and_the_filter_finds_paths_and_prompts() {
    let f = fixture();
    let mut app = f.app(Some("claude-1"));
    f.write("a.txt", b"changed by hand\n");
    // The checkpoint against the disk: a.txt differs.
    keys(&mut app, &[Key::Down, Key::Down, Key::Char('d')]);
    assert!(
        app.paths.iter().any(|p| p.path == "a.txt"),
        "{:?}",
        app.paths
    );
    keys(&mut app, &[Key::Esc]);
    // `/greet` keeps turn 1 (it added src/greet.rs); `/refactor` turn 2, its undo and the
    // checkpoint labelled "before the refactor".
    keys(&mut app, &[Key::Char('/')]);
    for c in "greet".chars() {
        app.key(Key::Char(c), false);
    }
    keys(&mut app, &[Key::Enter]);
    let rows: Vec<_> = app.rows().iter().map(|e| e.moment.word()).collect();
    assert_eq!(rows, ["turn"]);
    keys(&mut app, &[Key::Char('/'), Key::Esc, Key::Char('/')]);
    for c in "REFACTOR".chars() {
        app.key(Key::Char(c), false);
    }
    let rows: Vec<_> = app.rows().iter().map(|e| e.moment.word()).collect();
    assert_eq!(rows, ["undo", "turn", "checkpoint"]);
    assert_screen("filter_80x24", &mut app, 80, 24);
}

#[test]
fn without_colour_no_cell_is_coloured() {
    let f = fixture();
    let mut app = f.app(Some("claude-1"));
    keys(&mut app, &[Key::Tab, Key::Enter]);
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|fr| view::draw(fr, &app)).unwrap();
    let plain = t
        .backend()
        .buffer()
        .content
        .iter()
        .all(|c| c.fg == Color::Reset);
    assert!(plain, "a cell has a colour with colour off");
    app.colour = true;
    t.draw(|fr| view::draw(fr, &app)).unwrap();
    let coloured = t
        .backend()
        .buffer()
        .content
        .iter()
        .any(|c| c.fg != Color::Reset);
    assert!(coloured, "nothing is coloured with colour on");
}

#[test]
fn another_process_recording_is_seen_by_refresh() {
    let f = fixture();
    let mut app = f.app(Some("codex-2"));
    assert!(!app.refresh(), "nothing changed yet");
    turn(&f.open(), "codex-2", "codex", "a second turn", || {
        f.write("b.txt", b"b\n");
    });
    assert!(app.refresh());
    assert_eq!(app.rows().len(), 2);
    assert_eq!(app.selected_session().unwrap().shown(), "codex-2");
    // The new turn came in above: the turn that was selected still is.
    let e = app.selected_entry().unwrap();
    assert_eq!(
        e.entry.as_ref().unwrap().text.as_deref(),
        Some("document the library")
    );
}

#[test]
fn each_row_restores_the_state_it_left_and_chords_do_nothing() {
    let f = fixture();
    let mut app = f.app(Some("claude-1"));
    // The newest turn is selected on open; above it, the undo of turn 2 left the disk as
    // before turn 2.
    keys(&mut app, &[Key::Up, Key::Char('s')]);
    assert_eq!(
        app.mode,
        Input::Confirm(super::app::Action::RestoreEntry("turn:2:before".into()))
    );
    keys(&mut app, &[Key::Char('n'), Key::Down, Key::Char('s')]);
    assert_eq!(
        app.mode,
        Input::Confirm(super::app::Action::RestoreEntry("turn:2".into()))
    );
    keys(&mut app, &[Key::Char('n')]);
    // Ctrl-U is not `u`.
    app.key(Key::Char('u'), true);
    assert_eq!(app.mode, Input::Browse);
    // A filter typed after `d` shows the new row's own change, not the old disk diff.
    keys(&mut app, &[Key::Char('d')]);
    assert!(matches!(app.showing, super::app::Showing::AgainstDisk(_)));
    keys(&mut app, &[Key::Char('/'), Key::Char('a')]);
    assert_eq!(app.showing, super::app::Showing::Change);
}

#[test]
fn short_bytes_fit_five_columns() {
    for (n, s) in [
        (0, "0B"),
        (1023, "1023B"),
        (1024, "1.0K"),
        (20 << 10, "20K"),
        (3 << 20, "3.0M"),
        (500 << 20, "500M"),
        (3 << 30, "3.0G"),
    ] {
        assert_eq!(view::short_bytes(n), s);
    }
}

/// Any terminal size draws, down to a single cell, with every overlay: nothing panics.
#[test]
fn tiny_terminals_draw_without_a_panic() {
    let f = fixture();
    let mut app = f.app(Some("claude-1"));
    for (w, h) in [(1, 1), (20, 5), (80, 3), (3, 40), (200, 60)] {
        screen(&app, w, h);
    }
    keys(&mut app, &[Key::Tab, Key::Enter]);
    keys(&mut app, &[Key::Char('?')]);
    for (w, h) in [(1, 1), (20, 5), (80, 3)] {
        screen(&app, w, h);
    }
    keys(&mut app, &[Key::Esc, Key::Char('v')]);
    for (w, h) in [(1, 1), (20, 5), (80, 3)] {
        screen(&app, w, h);
    }
    keys(&mut app, &[Key::Char('n'), Key::Char('q')]);
    assert!(app.quit, "q quits");
}

/// Wide characters take two columns: a row of them still fits its pane, counts included.
#[test]
fn wide_characters_are_fitted_by_their_columns() {
    let f = fixture();
    let ws = f.open();
    turn(
        &ws,
        "claude-1",
        "claude-code",
        &"日本語のプロンプト".repeat(8),
        || {
            f.write("日本/ファイル.txt", b"x\n");
        },
    );
    let app = f.app(Some("claude-1"));
    let text = screen(&app, 80, 24);
    let row = text
        .lines()
        .find(|l| l.contains("turn 3") && l.contains("日本語"))
        .unwrap_or_else(|| panic!("no row of turn 3 in\n{text}"));
    assert!(
        row.contains("+1 ~0 -0"),
        "the counts were pushed out: {row}"
    );
}

/// A prompt and a path holding what a terminal would act on (a title change, a screen
/// clear, a lone CR, a right-to-left override) are drawn escaped; the app keeps them exact.
#[test]
fn a_prompt_with_terminal_escapes_is_drawn_escaped() {
    let f = fixture();
    let prompt = "retitle \x1b]0;pwned\x07 clear \x1b[2J\rover \u{202e}txt.exe";
    turn(&f.open(), "claude-1", "claude-code", prompt, || {
        f.write("evil\x1b[31m.txt", b"x\n");
    });
    let mut app = f.app(Some("claude-1"));
    let e = app.selected_entry().unwrap();
    assert_eq!(e.entry.as_ref().unwrap().text.as_deref(), Some(prompt));
    assert_eq!(app.paths[0].path, "evil\x1b[31m.txt");
    let raw = ['\x1b', '\x07', '\r', '\u{202e}'];
    let text = screen(&app, 200, 40);
    let row = text
        .lines()
        .find(|l| l.contains("retitle"))
        .unwrap_or_else(|| panic!("no row of turn 3 in\n{text}"));
    assert!(
        row.contains(r"retitle \x1b]0;pwned\x07 clear \x1b[2J\rover \u{202e}txt.exe"),
        "{row}"
    );
    assert!(
        !text.contains(raw),
        "a raw escape reached the screen:\n{text}"
    );
    // The path in the paths pane, the diff's title and its headers.
    keys(&mut app, &[Key::Tab, Key::Enter]);
    let text = screen(&app, 200, 40);
    assert!(text.contains(r" diff evil\x1b[31m.txt "), "{text}");
    assert!(text.contains(r"A evil\x1b[31m.txt"), "{text}");
    assert!(
        !text.contains(raw),
        "a raw escape reached the screen:\n{text}"
    );
}

/// Keys are answered while a reload is still being read (a read can wait on another
/// process's commit): the loop starts the reload on a thread and `q` quits with it held.
#[test]
fn q_quits_while_a_reload_is_still_being_read() {
    use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
    use std::sync::mpsc;

    let f = fixture();
    let mut app = f.app(Some("claude-1"));
    turn(
        &f.open(),
        "claude-1",
        "claude-code",
        "from another process",
        || {
            f.write("b.txt", b"b\n");
        },
    );
    let (release, hold) = mpsc::channel();
    app.hold_next_reload(hold);
    // A guard against a hang, not a timing check: a loop that waited for the reload gets
    // it after this and fails the assertion below instead of hanging.
    let (done, finished) = mpsc::channel::<()>();
    let guard = std::thread::spawn(move || {
        if finished.recv_timeout(Duration::from_mins(2)).is_err() {
            let _ = release.send(());
        }
        release
    });
    let press = |c| Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    let mut script = vec![press('k'), press('q')].into_iter();
    super::drive(&mut app, &mut |_| Ok(()), &mut |_| {
        Ok(Some(script.next().expect("the loop did not quit on q")))
    })
    .unwrap();
    let held = app.reloading();
    done.send(()).unwrap();
    let release = guard.join().unwrap();
    assert!(app.quit);
    assert!(held, "the loop waited for the reload before it answered q");
    // Let go, the reload comes in: the new turn above, `j`'s row still selected.
    let _ = release.send(());
    app.settle();
    let rows: Vec<_> = app.rows().iter().map(|e| e.moment.word()).collect();
    assert_eq!(rows, ["turn", "undo", "turn", "checkpoint", "turn"]);
    assert_eq!(app.entry, 1, "k's row (the undo) stays selected");
}

#[test]
fn undo_and_redo_ask_naming_the_turn_and_only_when_there_is_one() {
    let f = fixture();
    let mut app = f.app(Some("claude-1"));
    assert!(
        matches!(
            app.selected_entry().map(|e| e.moment),
            Some(crate::history::timeline::Moment::Turn)
        ),
        "the newest turn is selected on open"
    );
    keys(&mut app, &[Key::Char('U')]);
    let Input::Confirm(action) = &app.mode else {
        panic!("{:?}", app.mode);
    };
    assert_eq!(
        action.question(),
        "Redo turn 2 'refactor lib.rs and drop the logo' (2 files)?"
    );
    keys(&mut app, &[Key::Char('n'), Key::Char('u')]);
    let Input::Confirm(action) = &app.mode else {
        panic!("{:?}", app.mode);
    };
    assert!(
        action.question().starts_with("Undo turn 1 "),
        "{}",
        action.question()
    );
    keys(&mut app, &[Key::Char('n')]);
    // A session with nothing undone: `U` says so at once, asking nothing.
    let mut app = f.app(Some("codex-2"));
    keys(&mut app, &[Key::Char('U')]);
    assert_eq!(app.mode, Input::Browse);
    let said = app
        .message
        .as_ref()
        .map(|m| m.line.clone())
        .unwrap_or_default();
    assert!(said.contains("nothing to redo"), "{said}");
}

/// A workspace whose local history keeps three bursts around a turn of one session:
/// a.txt written (burst 1), the turn adds b.txt, then a.txt changed and notes.md added
/// (burst 2), then a.txt changed again (burst 3).
fn local_fixture() -> Fixture {
    let f = Fixture {
        ws: tempfile::tempdir().unwrap(),
        home: tempfile::tempdir().unwrap(),
    };
    let ws = f.open();
    f.write("a.txt", b"v1\n");
    ws.capture_burst().unwrap();
    turn(&ws, "claude-1", "claude-code", "add b", || {
        f.write("b.txt", b"b\n");
    });
    f.write("a.txt", b"v2\n");
    f.write("notes.md", b"# notes\n");
    ws.capture_burst().unwrap();
    f.write("a.txt", b"v3\n");
    ws.capture_burst().unwrap();
    f
}

#[test]
fn the_local_history_is_a_row_below_the_sessions_and_its_bursts_restore() {
    let f = local_fixture();
    let mut app = f.app(None);
    assert_eq!(app.bursts, 3);
    assert!(!app.on_local(), "the session is selected first");
    keys(&mut app, &[Key::BackTab, Key::Down]);
    assert!(app.on_local());
    let rows: Vec<_> = app
        .rows()
        .iter()
        .map(|e| (e.moment.word(), e.burst.as_ref().map(crate::BurstSummary::listed)))
        .collect();
    assert_eq!(
        rows,
        [
            ("burst", Some("a.txt".into())),
            ("burst", Some("a.txt, notes.md".into())),
            // The log's first snapshot: everything new, no path named.
            ("burst", Some(String::new())),
        ]
    );
    // Its change is against the snapshot before it: the turn's after-state.
    keys(&mut app, &[Key::Tab, Key::Down]);
    let paths: Vec<_> = app
        .paths
        .iter()
        .map(|p| (p.path.as_str(), p.change))
        .collect();
    assert_eq!(paths, [("a.txt", "M"), ("notes.md", "A")]);
    assert_screen("local_history_80x24", &mut app, 80, 24);

    // No turns here: undo, redo, revert and checkpoint say what works instead.
    for k in ['u', 'U', 'v', 'c'] {
        keys(&mut app, &[Key::Char(k)]);
        let m = app.message.clone().unwrap();
        assert!(m.refused && m.line.contains("no turns"), "{k}: {m:?}");
        assert_eq!(app.mode, Input::Browse);
    }
    // A whole restore to burst 2, after a question.
    keys(&mut app, &[Key::Char('s')]);
    assert!(
        matches!(&app.mode, Input::Confirm(a) if a.question().contains("burst")),
        "{:?}",
        app.mode
    );
    keys(&mut app, &[Key::Char('y')]);
    let m = app.message.clone().unwrap();
    assert!(!m.refused, "{m:?}");
    assert_eq!(f.read("a.txt"), "v2\n");
    assert_eq!(f.read("notes.md"), "# notes\n");
    assert!(app.on_local(), "the local history stays selected");
    // One path of burst 1: a.txt as it first was, nothing else touched.
    keys(&mut app, &[Key::Down, Key::Tab]);
    assert_eq!(app.paths[app.path].path, "a.txt");
    keys(&mut app, &[Key::Char('p'), Key::Char('y')]);
    assert_eq!(f.read("a.txt"), "v1\n");
    assert_eq!(f.read("notes.md"), "# notes\n");
    assert_eq!(f.read("b.txt"), "b\n");
}

#[test]
fn the_local_history_filters_by_path_and_takes_in_new_bursts() {
    let f = local_fixture();
    let mut app = f.app(None);
    keys(&mut app, &[Key::BackTab, Key::Down, Key::Char('/')]);
    for c in "notes".chars() {
        keys(&mut app, &[Key::Char(c)]);
    }
    let rows: Vec<_> = app.rows().iter().map(|e| e.time_ms).collect();
    assert_eq!(rows.len(), 1, "only burst 2 changed notes.md");
    keys(&mut app, &[Key::Esc]);
    // Another process records a burst: a reload shows it, the local history selected still.
    f.write("c.txt", b"c\n");
    f.open().capture_burst().unwrap();
    assert!(app.refresh());
    assert!(app.on_local());
    assert_eq!(app.bursts, 4);
    assert_eq!(app.rows()[0].burst.as_ref().unwrap().listed(), "c.txt");
}

#[test]
fn without_bursts_there_is_no_local_history_row() {
    let f = fixture();
    let app = f.app(None);
    assert_eq!(app.bursts, 0);
    assert!(!screen(&app, 80, 24).contains("local history"));
}
