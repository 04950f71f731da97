//! Unit tests of `mcp.rs`.

use super::cap_patch;

#[test]
fn long_patches_are_cut_at_a_line_and_say_so() {
    let text = "+line é\n".repeat(100);
    assert_eq!(cap_patch(&text, 10_000), text);
    let cut = cap_patch(&text, 100);
    assert!(cut.starts_with("+line é\n"), "{cut}");
    let kept = cut.find('[').unwrap();
    assert!(kept <= 100 && cut[..kept].ends_with('\n'), "{cut}");
    assert!(
        cut.ends_with("more bytes; give `paths` to see the rest]"),
        "{cut}"
    );
}

#[test]
fn long_histories_and_blames_are_cut_and_say_what_to_do() {
    let text = "turn:1  s  2026-12-01 10:22:00  +1 -0  1 B  p\n".repeat(50);
    let cut = super::cap_text(&text, 200, "history", "give `max` for fewer entries");
    assert!(
        cut.ends_with("more bytes; give `max` for fewer entries]"),
        "{cut}"
    );
    assert!(
        cut.starts_with("turn:1  ") && cut.contains("\n[history cut at 0 KiB: "),
        "{cut}"
    );
}

/// A session of a fresh workspace with one turn that edits `f.txt`, and its directory.
fn one_turn() -> (
    tempfile::TempDir,
    tempfile::TempDir,
    crate::history::Session,
) {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.txt"), "old\nkept\n").unwrap();
    let ws = crate::Workspace::open(dir.path(), &crate::Config::with_home(home.path())).unwrap();
    let session = ws.session("chat");
    let turn = session
        .begin_turn(None, Some("rewrite the first line\nplease".into()))
        .unwrap();
    turn.wait_before(std::time::Duration::from_mins(1)).unwrap();
    std::fs::write(dir.path().join("f.txt"), "new\nkept\n").unwrap();
    turn.end(None).unwrap();
    (dir, home, session)
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn the_file_history_and_blame_tools_answer_as_the_cli_prints() {
    use rmcp::handler::server::wrapper::Parameters;
    let (_dir, _home, session) = one_turn();
    let server = super::McpServer::new(session);
    let request = crate::protocol::ops::FileHistoryRequest {
        path: Some("f.txt".into()),
        ..Default::default()
    };
    let history = block_on(server.file_history(Parameters(request))).unwrap();
    assert_eq!(history.lines().count(), 1, "{history}");
    assert!(history.starts_with("turn:1  chat  "), "{history}");
    assert!(history.contains("  +1 -1  ") && history.ends_with("  rewrite the first line\n"));
    let request = crate::protocol::ops::FileHistoryRequest {
        path: Some("other.txt".into()),
        ..Default::default()
    };
    let none = block_on(server.file_history(Parameters(request))).unwrap();
    assert_eq!(none, "no turn or checkpoint changed it");
    let blame = |path: &str| {
        block_on(server.blame(Parameters(crate::protocol::ops::BlameRequest {
            path: path.into(),
            this_session_only: None,
        })))
    };
    let text = blame("f.txt").unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(
        rows[0].starts_with("turn 1 (chat) ") && rows[0].ends_with("| new"),
        "{text}"
    );
    assert!(
        rows[1].starts_with("before retrace ") && rows[1].ends_with("| kept"),
        "{text}"
    );
    let missing = blame("gone.txt").unwrap_err();
    assert!(missing.contains("no such file"), "{missing}");
}
