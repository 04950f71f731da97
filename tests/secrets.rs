//! Credentials are left out of snapshots by default, by name and by content, named in the
//! result, never brought back by a `.gitignore` negation, never touched by a restore, and
//! allowed back only by the `allow_secrets` setting.

use crate::common::{Env, RETRACE, stdout};
use retrace::{Config, RestoreOptions, Workspace};

const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n";

fn secrets_env() -> Env {
    let env = Env::new();
    env.write("src/main.rs", "fn main() {}");
    env.write(".env", "TOKEN=1");
    env.write(".env.local", "TOKEN=2");
    env.write("certs/server.pem", "pem");
    env.write("certs/tls.key", "key");
    env.write("home/.ssh/id_rsa", "rsa");
    env.write("home/.ssh/id_ed25519.pub", "pub");
    env.write("notes/backup.txt", format!("my old key:\n{KEY}"));
    env.write("notes/cert.txt", "-----BEGIN CERTIFICATE-----\nMIIB\n");
    env.write(".gitignore", "!.env\n!*.pem\n");
    env
}

#[test]
fn credentials_are_left_out_and_named() {
    let env = secrets_env();
    let ws = env.open();
    let c = ws.snapshot(None).unwrap();
    assert_eq!(
        c.secrets,
        [
            ".env",
            ".env.local",
            "certs/server.pem",
            "certs/tls.key",
            "home/.ssh/id_ed25519.pub",
            "home/.ssh/id_rsa",
            "notes/backup.txt",
        ]
    );
    let captured: Vec<String> = c
        .entries()
        .iter()
        .filter(|e| e.kind != retrace::object::EntryKind::Dir)
        .map(|e| e.path.show())
        .collect();
    assert_eq!(captured, [".gitignore", "notes/cert.txt", "src/main.rs"]);
    // The CLI names them too.
    let o = env.run(RETRACE, &["snapshot"]);
    assert!(
        stdout(&o).contains("secret left out: notes/backup.txt"),
        "{}",
        stdout(&o)
    );
    // A restore leaves them alone: they are not the snapshot's to delete.
    env.write("src/main.rs", "changed");
    ws.restore(
        &c.id,
        RestoreOptions {
            force: true,
            dry_run: false,
        },
    )
    .unwrap();
    assert_eq!(env.read(".env"), "TOKEN=1");
    assert!(env.path("notes/backup.txt").exists());
}

#[test]
fn the_allow_list_brings_chosen_files_back() {
    let env = secrets_env();
    let ws = Workspace::open(
        env.root(),
        &Config::with_home(env.home.path())
            .configure(|s| s.allow_secrets.value = vec!["certs/*.pem".into(), "notes/*".into()]),
    )
    .unwrap();
    let c = ws.snapshot(None).unwrap();
    assert_eq!(
        c.secrets,
        [
            ".env",
            ".env.local",
            "certs/tls.key",
            "home/.ssh/id_ed25519.pub",
            "home/.ssh/id_rsa"
        ]
    );
    assert!(c.entries().iter().any(|e| e.path == b"certs/server.pem"));
    assert!(c.entries().iter().any(|e| e.path == b"notes/backup.txt"));
}

/// `.env` templates (usually committed, holding no secrets) are snapshotted, so a turn's
/// edit to them is undone; the real `.env` stays out, and the turn's end says so.
#[test]
fn env_templates_are_kept_and_a_turn_names_the_credentials_it_left_out() {
    use crate::common::{LiveOwner, stderr};
    let env = Env::new();
    env.write(".env", "TOKEN=1\n");
    env.write(".env.example", "TOKEN=\n");
    env.write(".env.sample", "TOKEN=\n");
    env.write(".env.template", "TOKEN=\n");
    let owner = LiveOwner::start();
    let run = |args: &[&str]| {
        let mut all = vec!["--session", "s"];
        all.extend_from_slice(args);
        let o = env.run(RETRACE, &all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    run(&["turn", "begin", "--owner-pid", &owner.pid()]);
    env.write(".env.example", "TOKEN=\nNEW_SETTING=\n");
    env.write(".env", "TOKEN=2\n");
    let ended = run(&["turn", "end"]);
    assert!(ended.contains("turn 1 ended: +0 ~1 -0"), "{ended}");
    assert!(
        ended.contains("left out as credentials") && ended.contains(".env"),
        "{ended}"
    );
    assert!(!ended.contains(".env.example"), "{ended}");
    run(&["undo"]);
    assert_eq!(env.read(".env.example"), "TOKEN=\n");
    // The credential itself is never touched.
    assert_eq!(env.read(".env"), "TOKEN=2\n");
}
