//! `retrace ui` as a person meets it: the real binary in a pseudo-terminal, keys typed, the
//! screen read back through a terminal emulator (`vt100`). It selects a turn, opens a
//! path's diff, reverts the turn after confirming, quits with Ctrl-C; the files on disk
//! show the revert and the terminal is given back as it was.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

use crate::common::{Env, RETRACE, stderr, stdout};

const ROWS: u16 = 30;
const COLS: u16 = 110;

/// The emulated screen, fed by a thread reading the terminal.
struct Screen {
    parser: Arc<Mutex<vt100::Parser>>,
}

impl Screen {
    fn text(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    /// Waits until the screen shows `what` (a guard against a hang, not a timing check).
    fn wait_for(&self, what: &str) {
        let deadline = Instant::now() + Duration::from_mins(2);
        while !self.text().contains(what) {
            assert!(
                Instant::now() < deadline,
                "the screen never showed {what:?}; it shows:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn cli(env: &Env, args: &[&str]) {
    let o = env.command(RETRACE, args).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}{}", stdout(&o), stderr(&o));
}

#[test]
fn a_turn_is_selected_diffed_and_reverted_from_the_terminal_interface() {
    let env = Env::new();
    env.write("src/main.rs", "fn main() {}\n");
    let chat = ["--session", "chat"];
    cli(
        &env,
        &[&chat[..], &["turn", "begin", "--prompt", "add notes"]].concat(),
    );
    env.write("notes.txt", "notes body\n");
    cli(&env, &[&chat[..], &["turn", "end"]].concat());
    cli(
        &env,
        &[&chat[..], &["turn", "begin", "--prompt", "edit main"]].concat(),
    );
    env.write("src/main.rs", "fn main() { println!(\"edited\"); }\n");
    cli(&env, &[&chat[..], &["turn", "end"]].concat());

    let pty = native_pty_system();
    let pair = pty
        .openpty(PtySize {
            rows: ROWS,
            cols: COLS,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(RETRACE);
    cmd.arg("ui");
    cmd.cwd(env.root());
    cmd.env("RETRACE_HOME", env.home.path());
    cmd.env("HOME", env.home.path());
    cmd.env("TERM", "xterm-256color");
    cmd.env_remove("RETRACE_SESSION");
    let mut child = pair.slave.spawn_command(cmd).unwrap();
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().unwrap();
    let mut keys = pair.master.take_writer().unwrap();
    let parser = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 0)));
    let fed = Arc::clone(&parser);
    let raw = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&raw);
    let feeder = std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            fed.lock().unwrap().process(&buf[..n]);
            kept.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let screen = Screen { parser };
    let mut press = |k: &str| {
        keys.write_all(k.as_bytes()).unwrap();
        keys.flush().unwrap();
    };

    // The newest turn is selected; `j` moves to the first turn, Enter opens its paths and
    // Enter again the diff of notes.txt.
    screen.wait_for("edit main");
    assert!(screen.parser.lock().unwrap().screen().alternate_screen());
    press("j");
    screen.wait_for("turn 1: 1 path(s)");
    press("\r");
    press("\r");
    screen.wait_for("+notes body");
    // Revert it: asked first, then done; the revert is the newest entry.
    press("v");
    screen.wait_for("Revert turn 1, keeping every later change?");
    press("y");
    screen.wait_for("revert 3");
    assert!(
        !env.path("notes.txt").exists(),
        "the revert did not delete notes.txt:\n{}",
        screen.text()
    );
    // Ctrl-C quits too: in raw mode it is a key, not a signal that would leave the
    // terminal raw.
    press("\x03");
    let deadline = Instant::now() + Duration::from_mins(2);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("retrace ui did not quit on Ctrl-C:\n{}", screen.text());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}\n{}", screen.text());
    drop(pair.master);
    drop(keys);
    let _ = feeder.join();

    // The later turn's edit is kept; the terminal is back: main screen, cursor shown,
    // no mouse reporting.
    assert_eq!(
        env.read("src/main.rs"),
        "fn main() { println!(\"edited\"); }\n"
    );
    let p = screen.parser.lock().unwrap();
    let s = p.screen();
    assert!(!s.alternate_screen(), "still on the alternate screen");
    assert!(!s.hide_cursor(), "the cursor is still hidden");
    assert_eq!(s.mouse_protocol_mode(), vt100::MouseProtocolMode::None);
    let raw = raw.lock().unwrap();
    let tail = String::from_utf8_lossy(&raw[raw.len().saturating_sub(200)..]).into_owned();
    assert!(
        tail.contains("\x1b[?1049l"),
        "the alternate screen was not left: {tail:?}"
    );
}

#[test]
fn without_a_terminal_it_says_so_and_changes_nothing() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    cli(&env, &["snapshot"]);
    let o = env.command(RETRACE, &["ui"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("needs an interactive terminal"),
        "{}",
        stderr(&o)
    );
    assert!(
        !stdout(&o).contains("\x1b["),
        "escape codes written: {:?}",
        stdout(&o)
    );
}
