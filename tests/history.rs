//! Sessions and turns, rule by rule: the behaviours users of the reference plugins rely on,
//! driven through the library on real directories.

use std::fs;
use std::time::Duration;

use crate::common::{Env, tree_of};
use retrace::{BeforeStatus, Config, Mode, OpOptions, Outcome, Session, TurnState, Workspace};

const WAIT: Duration = Duration::from_secs(60);

/// One agent turn: begin, wait for the baseline, run `edit`, end.
fn turn(s: &Session, anchor: &str, prompt: &str, edit: impl FnOnce()) -> u64 {
    let t = s
        .begin_turn(Some(format!("{anchor}-start")), Some(prompt.into()))
        .unwrap();
    assert!(matches!(
        t.wait_before(WAIT).unwrap(),
        BeforeStatus::Ready { .. }
    ));
    let n = t.number();
    edit();
    let sum = t.end(Some(format!("{anchor}-end"))).unwrap();
    assert_eq!(sum.state, TurnState::Complete);
    n
}

fn restored(o: &Outcome) -> (&[String], &[String]) {
    match o {
        Outcome::Restored {
            files_written,
            files_deleted,
            ..
        } => (files_written, files_deleted),
        other => panic!("expected restored, got {other:?}"),
    }
}

#[test]
fn undo_reverts_the_whole_turn_and_returns_anchor_and_prompt() {
    let env = Env::new();
    env.write("keep.txt", "keep");
    env.write("edit.txt", "v1");
    env.write("gone.txt", "bye");
    let ws = env.open();
    let s = ws.session("s1");
    let start = tree_of(env.root());
    turn(&s, "a", "do three things", || {
        env.write("edit.txt", "v2");
        env.write("dir/new.txt", "new");
        fs::remove_file(env.path("gone.txt")).unwrap();
    });
    let after = tree_of(env.root());
    let o = s.undo(Mode::Both).unwrap();
    assert_eq!(o.anchor(), Some("a-start"));
    let Outcome::Restored { prompt, turn, .. } = &o else {
        panic!("{o:?}")
    };
    assert_eq!(prompt.as_deref(), Some("do three things"));
    assert_eq!(*turn, Some(1));
    assert_eq!(
        tree_of(env.root()),
        start,
        "the empty dir the turn made goes too"
    );
    let o = s.redo().unwrap();
    assert_eq!(o.anchor(), Some("a-end"), "redo returns to the turn's leaf");
    assert_eq!(tree_of(env.root()), after);
    assert!(matches!(s.redo().unwrap(), Outcome::NothingToRedo));
}

#[test]
fn manual_edits_between_turns_belong_to_the_next_baseline() {
    let env = Env::new();
    env.write("a.txt", "1");
    let ws = env.open();
    let s = ws.session("s");
    turn(&s, "t1", "p1", || env.write("a.txt", "2"));
    env.write("manual.txt", "mine"); // the user, between turns
    env.write("a.txt", "user-3");
    turn(&s, "t2", "p2", || env.write("b.txt", "agent"));
    s.undo(Mode::Both).unwrap();
    // Undoing turn 2 keeps the user's edits made before it began.
    assert_eq!(env.read("manual.txt"), "mine");
    assert_eq!(env.read("a.txt"), "user-3");
    assert!(!env.path("b.txt").exists());
}

#[test]
fn redo_is_cleared_by_a_new_turn() {
    let env = Env::new();
    let ws = env.open();
    let s = ws.session("s");
    turn(&s, "t1", "p1", || env.write("a", "1"));
    s.undo(Mode::Both).unwrap();
    assert!(s.status().unwrap().can_redo);
    turn(&s, "t2", "p2", || env.write("b", "2"));
    assert!(!s.status().unwrap().can_redo);
    assert!(matches!(s.redo().unwrap(), Outcome::NothingToRedo));
    // Undo now steps over turn 2, then there is nothing (turn 1 was undone before it).
    s.undo(Mode::Both).unwrap();
    assert!(matches!(
        s.undo(Mode::Both).unwrap(),
        Outcome::NothingToUndo { .. }
    ));
}

#[test]
fn redo_is_cleared_by_navigation_but_kept_by_a_no_op_navigation() {
    let env = Env::new();
    env.write("a", "0");
    let ws = env.open();
    let s = ws.session("s");
    turn(&s, "t1", "p1", || env.write("a", "1"));
    turn(&s, "t2", "p2", || env.write("a", "2"));
    s.undo(Mode::Both).unwrap();
    // Navigating to where the undo already put us (what a host's own tree move reports
    // right after an undo) changes nothing and keeps redo.
    let o = s.navigate("t2-start", Mode::Both).unwrap();
    assert!(restored(&o).0.is_empty() && restored(&o).1.is_empty());
    assert!(s.status().unwrap().can_redo);
    // A real navigation elsewhere clears it.
    let o = s.navigate("t1-start", Mode::Both).unwrap();
    assert_eq!(restored(&o).0, ["a"]);
    assert_eq!(env.read("a"), "0");
    assert!(!s.status().unwrap().can_redo);
    assert!(matches!(s.redo().unwrap(), Outcome::NothingToRedo));
}

#[test]
fn a_path_edited_after_the_turn_is_a_conflict_and_force_keeps_a_safety_copy() {
    let env = Env::new();
    env.write("a.txt", "base");
    env.write("b.txt", "base");
    let ws = env.open();
    let s = ws.session("s");
    turn(&s, "t1", "p", || {
        env.write("a.txt", "agent");
        env.write("b.txt", "agent");
    });
    env.write("a.txt", "user edit after the turn");
    let o = s.undo(Mode::Both).unwrap();
    let Outcome::Conflict { paths, count } = &o else {
        panic!("{o:?}")
    };
    assert_eq!((paths.as_slice(), *count), (&["a.txt".to_string()][..], 1));
    // Nothing was written, not even the path without a conflict.
    assert_eq!(env.read("b.txt"), "agent");
    assert_eq!(s.status().unwrap().cursor, Some(1));
    let o = s
        .undo_with(
            Mode::Both,
            OpOptions {
                force: true,
                ..OpOptions::default()
            },
        )
        .unwrap();
    let Outcome::Restored {
        safety_snapshot: Some(safety),
        ..
    } = &o
    else {
        panic!("{o:?}")
    };
    assert_eq!(env.read("a.txt"), "base");
    assert_eq!(env.read("b.txt"), "base");
    // The overwritten edit is recoverable from the safety snapshot.
    ws.restore(
        safety,
        retrace::RestoreOptions {
            force: true,
            dry_run: false,
        },
    )
    .unwrap();
    assert_eq!(env.read("a.txt"), "user edit after the turn");
}

#[test]
fn another_sessions_edits_survive_this_sessions_undo() {
    let env = Env::new();
    env.write("shared.txt", "0");
    let ws = env.open();
    let (a, b) = (ws.session("agent-a"), ws.session("agent-b"));
    turn(&a, "a1", "pa", || env.write("from-a.txt", "a"));
    turn(&b, "b1", "pb", || {
        env.write("from-b.txt", "b");
        env.write("shared.txt", "b");
    });
    let o = a.undo(Mode::Both).unwrap();
    assert_eq!(restored(&o).1, ["from-a.txt"]);
    assert_eq!(env.read("from-b.txt"), "b");
    assert_eq!(env.read("shared.txt"), "b");
    // Sessions are isolated: b's history is untouched.
    assert_eq!(b.status().unwrap().cursor, Some(1));
    assert!(!b.status().unwrap().can_redo);
    assert!(a.status().unwrap().can_redo);
}

#[test]
fn undo_and_redo_survive_a_restart() {
    let env = Env::new();
    env.write("a", "0");
    {
        let ws = env.open();
        let s = ws.session("persist");
        turn(&s, "t1", "p1", || env.write("a", "1"));
        turn(&s, "t2", "p2", || env.write("a", "2"));
        s.undo(Mode::Files).unwrap();
    }
    // A new handle (as a new process would) derives cursor and redo from the op log.
    let ws = env.open();
    let s = ws.session("persist");
    let st = s.status().unwrap();
    assert_eq!(st.cursor, Some(1));
    assert_eq!(st.redo_turn, Some((2, Mode::Files)));
    let o = s.redo().unwrap();
    assert_eq!(
        o.anchor(),
        None,
        "files mode does not move the conversation"
    );
    assert_eq!(env.read("a"), "2");
    s.undo(Mode::Both).unwrap();
    s.undo(Mode::Both).unwrap();
    assert_eq!(env.read("a"), "0");
}

#[test]
fn the_cap_drops_the_oldest_turns_first() {
    let env = Env::new();
    let ws = Workspace::open(env.root(), &Config::with_home(env.home.path()).max_turns(3)).unwrap();
    let s = ws.session("capped");
    for i in 1..=5 {
        turn(&s, &format!("t{i}"), "p", || env.write("f", i.to_string()));
    }
    let log = s.log().unwrap();
    let kept: Vec<u64> = log.entries.iter().map(|e| e.number).collect();
    assert_eq!(kept, [5, 4, 3], "newest first");
    // Undo walks back over what is kept, then says the rest was dropped.
    for _ in 0..3 {
        assert!(s.undo(Mode::Both).unwrap().is_success());
    }
    let o = s.undo(Mode::Both).unwrap();
    assert!(
        matches!(&o, Outcome::NothingToUndo { detail } if detail.contains("dropped")),
        "{o:?}"
    );
    assert_eq!(env.read("f"), "2");
    // The log was replaced by a base record when turns were dropped: a fresh handle derives
    // the same cursor and redo stack from it.
    let before = s.status().unwrap();
    let again = Workspace::open(env.root(), &Config::with_home(env.home.path()))
        .unwrap()
        .session("capped")
        .status()
        .unwrap();
    assert_eq!(
        (again.cursor, again.redo_turn),
        (before.cursor, before.redo_turn)
    );
    assert_eq!(again.redo_turn, Some((3, Mode::Both)));
    s.redo().unwrap();
    assert_eq!(env.read("f"), "3");
}

#[test]
fn subagent_sessions_record_nothing_and_refuse_undo() {
    let env = Env::new();
    let ws = env.open();
    let main = ws.session("main");
    let sub = ws.subagent_session("main/task-1");
    let t = main.begin_turn(Some("m".into()), Some("p".into())).unwrap();
    t.wait_before(WAIT).unwrap();
    // The subagent works inside the parent's turn.
    let st = sub.begin_turn(None, None).unwrap();
    assert_eq!(st.wait_before(WAIT).unwrap(), BeforeStatus::Subagent);
    env.write("by-subagent.txt", "x");
    st.end(None).unwrap();
    assert!(matches!(sub.undo(Mode::Both).unwrap(), Outcome::Subagent));
    assert!(matches!(sub.redo().unwrap(), Outcome::Subagent));
    assert!(matches!(sub.checkpoint(None).unwrap(), Outcome::Subagent));
    assert!(sub.log().unwrap().entries.is_empty());
    t.end(Some("m-end".into())).unwrap();
    // The subagent's edit is in the parent turn, so the parent's undo reverts it.
    main.undo(Mode::Both).unwrap();
    assert!(!env.path("by-subagent.txt").exists());
}

#[test]
fn undo_and_redo_during_a_pending_turn_are_busy_and_change_nothing() {
    let env = Env::new();
    let ws = env.open();
    let s = ws.session("s");
    turn(&s, "t1", "p1", || env.write("a", "1"));
    let t = s.begin_turn(None, Some("p2".into())).unwrap();
    t.wait_before(WAIT).unwrap();
    env.write("a", "agent working");
    assert!(matches!(s.undo(Mode::Both).unwrap(), Outcome::Busy { .. }));
    assert!(matches!(s.redo().unwrap(), Outcome::Busy { .. }));
    assert!(matches!(
        s.navigate("turn:1:before", Mode::Both).unwrap(),
        Outcome::Busy { .. }
    ));
    assert_eq!(env.read("a"), "agent working");
    t.end(None).unwrap();
    assert!(s.undo(Mode::Both).unwrap().is_success());
    assert_eq!(env.read("a"), "1");
}

#[test]
fn a_late_before_snapshot_makes_the_turn_conversation_only() {
    let env = Env::new();
    // Enough files that the capture cannot finish within a zero deadline.
    for i in 0..2000 {
        env.write(&format!("d{}/f{i}", i % 20), i.to_string());
    }
    let ws = env.open();
    let s = ws.session("s");
    let t = s
        .begin_turn(Some("n0".into()), Some("slow".into()))
        .unwrap();
    let before = t.wait_before(Duration::ZERO).unwrap();
    assert!(
        matches!(&before, BeforeStatus::ConversationOnly { reason } if reason.contains("longer")),
        "{before:?}"
    );
    env.write("d0/f0", "agent edit");
    let sum = t.end(Some("n1".into())).unwrap();
    assert_eq!(sum.state, TurnState::ConversationOnly);
    // Files only: there is nothing to restore; the turn is stepped over (no dead end for a
    // hook, which cannot choose a mode), the files and the conversation stay.
    let o = s.undo(Mode::Files).unwrap();
    assert!(
        matches!(&o, Outcome::ConversationOnly { anchor: None, prompt: None, reason, .. }
            if reason.contains("skipped")),
        "{o:?}"
    );
    assert_eq!(s.status().unwrap().cursor, None);
    assert_eq!(env.read("d0/f0"), "agent edit");
    assert!(s.redo().unwrap().is_success());
    assert_eq!(s.status().unwrap().cursor, Some(1));
    let o = s.undo(Mode::Both).unwrap();
    let Outcome::ConversationOnly {
        anchor,
        reason,
        checkpoint,
        ..
    } = &o
    else {
        panic!("{o:?}")
    };
    assert_eq!(anchor.as_deref(), Some("n0"));
    assert!(reason.contains("not restored"), "{reason}");
    assert!(checkpoint.is_some());
    assert_eq!(
        env.read("d0/f0"),
        "agent edit",
        "files are left as they are"
    );
    // The turn stays navigable: redo, and its after-snapshot by anchor.
    assert!(s.redo().unwrap().is_success());
    assert_eq!(s.status().unwrap().cursor, Some(1));
    env.write("d0/f0", "changed again");
    s.checkpoint(None).unwrap();
    let o = s.navigate("n1", Mode::Both).unwrap();
    assert_eq!(restored(&o).0, ["d0/f0"]);
    assert_eq!(env.read("d0/f0"), "agent edit");
}

#[test]
fn conversation_undo_leaves_files_and_checkpoints_them() {
    let env = Env::new();
    let ws = env.open();
    let s = ws.session("s");
    turn(&s, "t1", "p1", || env.write("a", "agent"));
    env.write("a", "user after");
    let o = s.undo(Mode::Conversation).unwrap();
    let Outcome::ConversationOnly {
        checkpoint: Some(cp),
        anchor,
        prompt,
        ..
    } = &o
    else {
        panic!("{o:?}")
    };
    assert_eq!(anchor.as_deref(), Some("t1-start"));
    assert_eq!(prompt.as_deref(), Some("p1"));
    assert_eq!(env.read("a"), "user after");
    assert_eq!(ws.log().unwrap()[0].root, *cp, "the files were snapshotted");
    // Redo repeats the mode: conversation only, files untouched.
    let o = s.redo().unwrap();
    assert!(matches!(o, Outcome::ConversationOnly { .. }), "{o:?}");
    assert_eq!(env.read("a"), "user after");
    assert_eq!(s.status().unwrap().cursor, Some(1));
}

#[test]
fn navigation_restores_exact_snapshots_and_guards_unsaved_edits() {
    let env = Env::new();
    env.write("a", "0");
    let ws = env.open();
    let s = ws.session("s");
    let t0 = tree_of(env.root());
    turn(&s, "t1", "p1", || env.write("a", "1"));
    let t1 = tree_of(env.root());
    env.write("note", "between");
    let cp = s.checkpoint(Some("with note".into())).unwrap();
    assert!(matches!(cp, Outcome::Checkpointed { number: 1, .. }));
    let t_cp = tree_of(env.root());
    turn(&s, "t2", "p2", || {
        env.write("a", "2");
        fs::remove_file(env.path("note")).unwrap();
    });
    s.navigate("turn:1:before", Mode::Both).unwrap();
    assert_eq!(tree_of(env.root()), t0);
    s.navigate("t1-end", Mode::Both).unwrap();
    assert_eq!(tree_of(env.root()), t1);
    s.navigate("with note", Mode::Both).unwrap();
    assert_eq!(tree_of(env.root()), t_cp);
    s.navigate("checkpoint:1", Mode::Both).unwrap();
    // An unsaved edit blocks a file navigation.
    env.write("a", "unsaved");
    let o = s.navigate("turn:2", Mode::Both).unwrap();
    assert!(
        matches!(&o, Outcome::Dirty { paths, .. } if paths == &["a".to_string()]),
        "{o:?}"
    );
    assert_eq!(env.read("a"), "unsaved");
    // Conversation navigation keeps (and checkpoints) it.
    let o = s.navigate("turn:2", Mode::Conversation).unwrap();
    assert!(matches!(o, Outcome::ConversationOnly { .. }), "{o:?}");
    assert_eq!(env.read("a"), "unsaved");
    assert_eq!(s.status().unwrap().cursor, Some(2));
    // Unknown anchors are errors naming the anchor.
    let e = s.navigate("nope", Mode::Both).unwrap_err().to_string();
    assert!(e.contains("nope"), "{e}");
}

#[test]
fn turns_changing_only_ignored_files_stay_navigable() {
    let env = Env::new();
    env.write(".gitignore", "build/\n");
    env.write("src.txt", "s");
    let ws = env.open();
    let s = ws.session("s");
    turn(&s, "t1", "build it", || env.write("build/out.bin", "bin"));
    let log = s.log().unwrap();
    assert_eq!(log.entries[0].counts, [0, 0, 0]);
    assert_eq!(log.entries[0].state, Some(TurnState::Complete));
    let o = s.undo(Mode::Both).unwrap();
    assert_eq!(o.anchor(), Some("t1-start"));
    assert!(restored(&o).0.is_empty());
    assert_eq!(
        env.read("build/out.bin"),
        "bin",
        "ignored files are never touched"
    );
    assert!(s.navigate("t1-end", Mode::Both).unwrap().is_success());
}

#[test]
fn files_mode_restores_files_without_moving_the_conversation() {
    let env = Env::new();
    let ws = env.open();
    let s = ws.session("s");
    turn(&s, "t1", "p1", || env.write("x", "1"));
    let o = s.undo(Mode::Files).unwrap();
    assert_eq!(o.anchor(), None);
    assert!(!env.path("x").exists());
}

#[test]
fn a_capture_in_flight_answers_try_again() {
    let env = Env::new();
    let ws = Workspace::open(
        env.root(),
        &Config::with_home(env.home.path()).history_wait(Duration::from_millis(100)),
    )
    .unwrap();
    let s = ws.session("s");
    turn(&s, "t1", "p1", || env.write("x", "1"));
    // Another process restoring holds the workspace lock: our checkpoint's capture waits.
    let lock_path = Workspace::locate_store(env.root(), &Config::with_home(env.home.path()))
        .unwrap()
        .with_file_name("lock");
    let held = fs::File::options().write(true).open(&lock_path).unwrap();
    held.lock().unwrap();
    let s2 = s.clone();
    let worker = std::thread::spawn(move || s2.checkpoint(Some("slow".into())).unwrap());
    let mut seen = None;
    for _ in 0..500 {
        let o = s.undo(Mode::Both).unwrap();
        if matches!(o, Outcome::CaptureInFlight) {
            seen = Some(o);
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    held.unlock().unwrap();
    assert!(
        seen.is_some(),
        "undo never reported the checkpoint in flight"
    );
    assert!(worker.join().unwrap().is_success());
    assert_eq!(env.read("x"), "1", "nothing was undone meanwhile");
    // And a lock held by another process alone (no capture of ours) answers busy.
    held.lock().unwrap();
    assert!(matches!(s.undo(Mode::Both).unwrap(), Outcome::Busy { .. }));
    held.unlock().unwrap();
    assert!(s.undo(Mode::Both).unwrap().is_success());
}

#[test]
fn a_turn_its_live_agent_left_pending_ends_where_the_next_prompt_began() {
    // Claude Code sends no Stop when the user interrupts a turn: the next prompt is the
    // first sign that it stopped. Turns "one" (ended), "two" (interrupted), "three" (ended).
    let env = Env::new();
    let ws = env.open();
    let s = ws.session("s");
    turn(&s, "m1", "one", || env.write("one", "1"));
    let t = s.begin_turn(Some("m2".into()), Some("two".into())).unwrap();
    t.wait_before(WAIT).unwrap();
    env.write("two", "2");
    turn(&s, "m3", "three", || env.write("three", "3"));
    // A late end of the stale handle records nothing: the newer turn stays applied.
    let stale = t.end(Some("late".into())).unwrap();
    assert_eq!(stale.state, TurnState::Complete);
    assert_eq!(s.status().unwrap().cursor, Some(3));
    let log = s.log().unwrap();
    let two = &log.entries[1];
    assert_eq!(two.state, Some(TurnState::Complete), "{two:?}");
    assert!(
        two.reason
            .as_deref()
            .is_some_and(|r| r.contains("interrupted")),
        "{two:?}"
    );
    // Files-only undos (what a hook can do) walk back through all three.
    for (gone, left) in [("three", "two"), ("two", "one")] {
        let o = s.undo(Mode::Files).unwrap();
        assert!(matches!(o, Outcome::Restored { .. }), "{o:?}");
        assert!(!env.path(gone).exists(), "{gone}");
        assert!(env.path(left).exists(), "{left}");
    }
    assert!(s.undo(Mode::Files).unwrap().is_success());
    assert!(!env.path("one").exists());
}

#[test]
fn a_dead_agents_turn_left_pending_never_takes_the_next_prompts_disk() {
    let env = Env::new();
    let ws = env.open();
    let mut agent = std::process::Command::new("sleep")
        .arg("1000")
        .spawn()
        .unwrap();
    let dead = ws.session("s").owned_by(agent.id());
    let t = dead
        .begin_turn(Some("m1".into()), Some("one".into()))
        .unwrap();
    t.wait_before(WAIT).unwrap();
    drop(t);
    env.write("agent", "by the agent, which then dies");
    agent.kill().unwrap();
    agent.wait().unwrap();
    env.write("user", "the user's edit after it died");
    // The session goes on (a resumed agent): the dead turn cannot claim the disk.
    let s = ws.session("s");
    turn(&s, "m2", "two", || env.write("two", "2"));
    let log = s.log().unwrap();
    // Newest first: the dead turn is the second entry.
    assert_eq!(
        log.entries[1].state,
        Some(TurnState::ConversationOnly),
        "{log:?}"
    );
    let reason = log.entries[1].reason.as_deref().unwrap_or_default();
    assert!(reason.contains("owner died"), "{reason}");
    s.undo(Mode::Files).unwrap();
    let o = s.undo(Mode::Files).unwrap();
    assert!(
        matches!(&o, Outcome::ConversationOnly { anchor: None, .. }),
        "{o:?}"
    );
    assert_eq!(env.read("user"), "the user's edit after it died");
    assert_eq!(env.read("agent"), "by the agent, which then dies");
}

#[test]
fn undo_keeps_a_directory_holding_ignored_files_and_records_the_disk_exactly() {
    let env = Env::new();
    env.write(".gitignore", "*.tmp\n");
    let ws = env.open();
    let s = ws.session("s");
    turn(&s, "t1", "generate", || env.write("gen/a.txt", "generated"));
    env.write("gen/cache.tmp", "ignored, the user's");
    let o = s.undo(Mode::Both).unwrap();
    let Outcome::Restored {
        snapshot: Some(id), ..
    } = &o
    else {
        panic!("{o:?}")
    };
    assert!(!env.path("gen/a.txt").exists());
    assert_eq!(env.read("gen/cache.tmp"), "ignored, the user's");
    // The directory stays (it holds an ignored file), and the recorded state says so.
    assert_eq!(
        ws.working_copy()
            .scan_disk(&retrace::NoProgress)
            .unwrap()
            .id,
        *id
    );
    assert!(s.redo().unwrap().is_success());
    assert_eq!(env.read("gen/a.txt"), "generated");
}

fn skipped_paths(o: &Outcome) -> Vec<String> {
    match o {
        Outcome::Restored { skipped, .. } => skipped.iter().map(|s| s.path.clone()).collect(),
        other => panic!("expected restored, got {other:?}"),
    }
}

#[test]
fn another_sessions_edits_during_this_turn_survive_its_undo() {
    let env = Env::new();
    let ws = env.open();
    let (a, b) = (ws.session("agent-a"), ws.session("agent-b"));
    let ta = a.begin_turn(None, None).unwrap();
    ta.wait_before(WAIT).unwrap();
    env.write("a1", "by a, before b began");
    // b runs a whole turn inside a's.
    turn(&b, "b", "b's work", || env.write("b1", "by b"));
    ta.end(None).unwrap();
    let o = a.undo(Mode::Both).unwrap();
    assert_eq!(restored(&o).1, ["a1"]);
    assert_eq!(skipped_paths(&o), ["b1"]);
    assert_eq!(env.read("b1"), "by b", "b's file survives a's undo");
    // And a's redo does not touch it either.
    let o = a.redo().unwrap();
    assert_eq!(restored(&o).0, ["a1"]);
    assert_eq!(env.read("b1"), "by b");
}

#[test]
fn an_undo_made_by_another_session_during_this_turn_is_not_reverted() {
    let env = Env::new();
    let ws = env.open();
    let (a, b) = (ws.session("agent-a"), ws.session("agent-b"));
    turn(&a, "a", "a's file", || env.write("a1", "by a"));
    let tb = b.begin_turn(None, None).unwrap();
    tb.wait_before(WAIT).unwrap();
    env.write("b1", "by b");
    // a undoes its own turn while b's turn runs: a1 disappears inside b's turn.
    assert_eq!(restored(&a.undo(Mode::Both).unwrap()).1, ["a1"]);
    tb.end(None).unwrap();
    // b's undo must not bring a's undone file back.
    let o = b.undo(Mode::Both).unwrap();
    assert_eq!(restored(&o).1, ["b1"]);
    assert!(restored(&o).0.is_empty(), "{o:?}");
    assert_eq!(skipped_paths(&o), ["a1"]);
    assert!(!env.path("a1").exists());
}

/// The ledger's paths and the turn each was last written by (`None`: not a turn).
fn ledger_turns(ws: &Workspace) -> Vec<(String, Option<u64>)> {
    use retrace::history::ledger::{LedgerEntry, Writer};
    let tx = ws.working_copy().store().begin_read().unwrap();
    tx.bytes_entries(retrace::history::tables::LEDGER)
        .unwrap()
        .into_iter()
        .map(|(p, b)| {
            let turn = match LedgerEntry::decode(&b).unwrap().writer {
                Writer::Turn { turn, .. } => Some(turn),
                _ => None,
            };
            (String::from_utf8(p).unwrap(), turn)
        })
        .collect()
}

/// A turn's captures build no list of every path: its counts, its recorded change and the
/// ledger come from the trees the capture built and the stored ones. With every unchanged
/// directory clean (the stat cache aged: their files are standing records, not scanned
/// entries) they are still exact: a file modified beside clean ones, files added in a new
/// directory, a directory deleted whole, two directories untouched; then a second turn, and
/// the undo and redo of both.
#[test]
fn a_turns_counts_and_ledger_are_exact_when_its_directories_are_clean() {
    let env = Env::new();
    for d in ["a", "b", "c/d", "e"] {
        for i in 0..4 {
            env.write(&format!("{d}/f{i}.txt"), format!("{d} {i}\n"));
        }
    }
    let ws = env.open();
    let s = ws.session("clean");
    ws.snapshot(None).unwrap();
    crate::common::age_statcache(&env);
    let start = tree_of(env.root());
    let t = s.begin_turn(None, None).unwrap();
    t.wait_before(WAIT).unwrap();
    crate::common::age_statcache(&env);
    env.write("b/f1.txt", "b 1, edited\n");
    env.write("new/x.txt", "x\n");
    env.write("new/deeper/y.txt", "y\n");
    fs::remove_dir_all(env.path("c")).unwrap();
    let sum = t.end(None).unwrap();
    assert_eq!((sum.added, sum.modified, sum.deleted), (2, 1, 4));
    let changed = |n: u64| -> Vec<(String, Option<u64>)> {
        ledger_turns(&ws)
            .into_iter()
            .filter(|(_, t)| *t == Some(n))
            .collect()
    };
    let first: Vec<(String, Option<u64>)> = [
        "b/f1.txt",
        "c/d/f0.txt",
        "c/d/f1.txt",
        "c/d/f2.txt",
        "c/d/f3.txt",
        "new/deeper/y.txt",
        "new/x.txt",
    ]
    .iter()
    .map(|p| ((*p).to_string(), Some(1)))
    .collect();
    assert_eq!(
        changed(1),
        first,
        "the ledger names exactly the turn's paths"
    );
    assert_eq!(ledger_turns(&ws).len(), first.len());
    let after_first = tree_of(env.root());
    crate::common::age_statcache(&env);
    turn(&s, "second", "p2", || {
        env.write("a/f0.txt", "a 0, edited\n");
        fs::remove_file(env.path("new/x.txt")).unwrap();
    });
    assert_eq!(
        changed(2),
        vec![
            ("a/f0.txt".to_string(), Some(2)),
            ("new/x.txt".to_string(), Some(2))
        ]
    );
    let detail = s.show("turn:2").unwrap();
    let shown: Vec<String> = detail.paths.iter().map(|p| p.path.clone()).collect();
    assert_eq!(shown, ["a/f0.txt", "new/x.txt"]);
    restored(&s.undo(Mode::Files).unwrap());
    assert_eq!(tree_of(env.root()), after_first);
    restored(&s.undo(Mode::Files).unwrap());
    assert_eq!(tree_of(env.root()), start);
    restored(&s.redo().unwrap());
    assert_eq!(tree_of(env.root()), after_first);
}
