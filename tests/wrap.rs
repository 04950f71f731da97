//! `retrace wrap -- CMD`: a program without hooks run inside a session, for real: its writes
//! become a turn with a step per burst (steps told apart by gates the test opens, never by
//! timing), `retrace undo` takes the turn back, and the program keeps its terminal (a real
//! pseudo-terminal), its keys, Ctrl-C, SIGTERM and its exit status.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use serde_json::Value;

use crate::common::{Env, RETRACE, stderr, stdout};

fn cli(env: &Env, args: &[&str]) -> String {
    let o = env.run(RETRACE, args);
    assert!(o.status.success(), "{args:?}: {}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_mins(5), "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The steps of the session's turns, as `log --steps --json` lists them.
fn steps(env: &Env, session: &str) -> Vec<Value> {
    let o = env.run(RETRACE, &["--session", session, "log", "--steps", "--json"]);
    if !o.status.success() {
        return Vec::new(); // the session is not there yet
    }
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["steps"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// A shell line that waits until `gate` exists.
fn wait_for(gate: &Path) -> String {
    format!("while [ ! -e '{}' ]; do sleep 0.05; done", gate.display())
}

#[test]
fn a_wrapped_program_is_a_turn_with_a_step_per_burst_that_undo_takes_back() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let gates = tempfile::tempdir().unwrap();
    let (g1, g2) = (gates.path().join("1"), gates.path().join("2"));
    let script = format!(
        "echo one > b.txt; {}; echo two >> b.txt; {}; rm a.txt; exit 7",
        wait_for(&g1),
        wait_for(&g2)
    );
    let child = env
        .command(
            RETRACE,
            &["--session", "wrapped", "wrap", "--", "sh", "-c", &script],
        )
        .env("RETRACE_BURST_QUIET_MS", "100")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Each burst ends the open step (its after-capture) and begins the next.
    until("the first burst ends step 1", || {
        steps(&env, "wrapped").iter().any(|s| s["number"] == 2)
    });
    std::fs::write(&g1, "").unwrap();
    until("the second burst ends step 2", || {
        steps(&env, "wrapped").iter().any(|s| s["number"] == 3)
    });
    std::fs::write(&g2, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("session wrapped: turn 1, "), "{said}");

    // The turn holds the whole run; its steps, each burst (a machine that stalls inside a
    // burst may see it as two: at least the three the gates made).
    let s = steps(&env, "wrapped");
    assert!(s.len() >= 3, "{s:#?}");
    assert_eq!(env.read("b.txt"), "one\ntwo\n");
    cli(&env, &["--session", "wrapped", "undo"]);
    assert_eq!(env.read("a.txt"), "a\n");
    assert!(!env.path("b.txt").exists());
}

/// A pseudo-terminal running `retrace wrap -- sh -c SCRIPT`, its output collected.
struct Pty {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    keys: Box<dyn Write + Send>,
    out: Arc<Mutex<Vec<u8>>>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Pty {
    fn start(env: &Env, script: &str) -> Pty {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 80,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(RETRACE);
        cmd.args(["--session", "tty", "wrap", "--", "sh", "-c", script]);
        cmd.cwd(env.root());
        cmd.env("RETRACE_HOME", env.home.path());
        cmd.env("HOME", env.home.path());
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let keys = pair.master.take_writer().unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&out);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                kept.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            child,
            keys,
            out,
            _master: pair.master,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn wait_for(&self, text: &str) {
        until(&format!("{text:?} on the terminal"), || {
            self.text().contains(text)
        });
    }

    fn press(&mut self, keys: &str) {
        self.keys.write_all(keys.as_bytes()).unwrap();
        self.keys.flush().unwrap();
    }

    fn exit_code(&mut self) -> u32 {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.exit_code();
            }
            assert!(
                start.elapsed() < Duration::from_mins(5),
                "never exited:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_wrapped_program_keeps_its_terminal_its_keys_and_its_exit_code() {
    let env = Env::new();
    let mut pty = Pty::start(
        &env,
        "test -t 0 && test -t 1 && echo on-a-tty; read line; echo \"got:$line\"; exit 3",
    );
    pty.wait_for("on-a-tty");
    pty.press("hello\r");
    pty.wait_for("got:hello");
    assert_eq!(pty.exit_code(), 3, "{}", pty.text());
    pty.wait_for("retrace: session tty");
}

#[test]
fn ctrl_c_on_the_terminal_reaches_the_program_once_and_retrace_outlives_it() {
    let env = Env::new();
    let mut pty = Pty::start(
        &env,
        "n=0; trap 'n=$((n+1)); echo caught-$n; exit 4' INT; echo ready; \
         while :; do sleep 0.05; done",
    );
    pty.wait_for("ready");
    pty.press("\x03");
    assert_eq!(pty.exit_code(), 4, "{}", pty.text());
    let text = pty.text();
    assert!(
        text.contains("caught-1") && !text.contains("caught-2"),
        "{text}"
    );
    // retrace was not killed by the Ctrl-C: it ended the turn and said so.
    assert!(text.contains("retrace: session tty: turn 1"), "{text}");
}

#[test]
fn sigterm_sent_to_retrace_reaches_the_program_and_retrace_dies_of_it_too() {
    use std::os::unix::process::ExitStatusExt;
    let env = Env::new();
    let gates = tempfile::tempdir().unwrap();
    let ready = gates.path().join("ready");
    let script = format!(
        "echo x > '{}'; while :; do sleep 0.05; done",
        ready.display()
    );
    let child = env
        .command(
            RETRACE,
            &["--session", "term", "wrap", "--", "sh", "-c", &script],
        )
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    until("the program runs", || ready.exists());
    let pid = rustix::process::Pid::from_raw(child.id().cast_signed()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(15), "{:?}", out.status);
    // The turn was ended before: not left running.
    let v: Value =
        serde_json::from_str(&cli(&env, &["--session", "term", "log", "--json"])).unwrap();
    let turn = &v["entries"][0];
    assert_eq!(turn["state"], "complete", "{v:#}");
}

#[test]
fn a_command_that_cannot_run_records_nothing_and_exits_as_a_shell_would() {
    let env = Env::new();
    let o = env.run(RETRACE, &["wrap", "--", "no-such-agent-anywhere"]);
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("nothing was recorded"),
        "{}",
        stderr(&o)
    );
    env.write("not-executable", "#!/bin/sh\n");
    let o = env.run(RETRACE, &["wrap", "--", "./not-executable"]);
    assert_eq!(o.status.code(), Some(126), "{}", stderr(&o));
    // No session was begun for either.
    assert!(cli(&env, &["sessions"]).contains("no sessions yet"));
}
