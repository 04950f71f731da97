//! `retrace-dump`'s text output: sizes in binary units, records as plain aligned fields
//! (never Rust debug structs); `--json` keeps the raw numbers.

use crate::common::{Env, RETRACE, RETRACE_DUMP, noise, stderr, stdout};
use serde_json::Value;

fn ok(env: &Env, bin: &str, args: &[&str]) -> String {
    let o = env.run(bin, args);
    assert!(o.status.success(), "{args:?}: {}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

fn assert_plain(out: &str) {
    for debug in ["[\"", "Some(", "{ ", "Record", "null"] {
        assert!(!out.contains(debug), "{debug:?} in:\n{out}");
    }
}

#[test]
fn turns_prints_every_field_of_every_record_as_plain_text() {
    let env = Env::new();
    env.write("a.txt", "one\n");
    let session = ["--session", "chat-7"];
    fn with<'a>(session: &[&'a str], args: &[&'a str]) -> Vec<&'a str> {
        [session, args].concat()
    }
    ok(
        &env,
        RETRACE,
        &with(
            &session,
            &[
                "turn",
                "begin",
                "--anchor",
                "m1",
                "--prompt",
                "fix it\nplease",
            ],
        ),
    );
    env.write("b.txt", "two\n");
    ok(
        &env,
        RETRACE,
        &with(&session, &["turn", "end", "--anchor", "m2"]),
    );
    ok(&env, RETRACE, &with(&session, &["checkpoint", "by hand"]));
    let out = ok(&env, RETRACE_DUMP, &["turns", "chat-7"]);
    assert_plain(&out);
    for line in [
        "  cursor          turn:1",
        "  redo            -",
        "turn 1  complete  +1 ~0 -0",
        "  anchor          m1",
        "  leaf            m2",
        "  prompt          fix it",
        "                  please",
        "checkpoint 1  by hand",
        "  cursor          turn:1",
    ] {
        assert!(out.lines().any(|l| l == line), "no {line:?} in:\n{out}");
    }
    // The JSON stays the records' fields.
    let v: Value =
        serde_json::from_str(ok(&env, RETRACE_DUMP, &["turns", "chat-7", "--json"]).trim())
            .unwrap();
    assert_eq!(v["turns"][0]["anchor"], "m1");
    assert_eq!(v["state"]["cursor"], 1);
}

#[test]
fn sessions_names_the_owner_of_a_pending_turn_in_words() {
    let env = Env::new();
    env.write("a.txt", "one\n");
    ok(&env, RETRACE, &["--session", "s", "turn", "begin"]);
    let out = ok(&env, RETRACE_DUMP, &["sessions"]);
    assert_plain(&out);
    assert!(
        out.contains("cursor -") && out.contains("pending turn:1"),
        "{out}"
    );
    assert!(out.contains("owner of the pending turn: pid "), "{out}");
    let v: Value =
        serde_json::from_str(ok(&env, RETRACE_DUMP, &["sessions", "--json"]).trim()).unwrap();
    assert_eq!(v[0]["pending"], 1, "{v}");
    assert!(v[0]["lease"]["pid"].is_u64(), "{v}");
}

#[test]
fn stats_and_tree_show_sizes_in_binary_units() {
    let env = Env::new();
    env.write("big.bin", noise(1, 20 * 1024));
    let id = crate::common::snapshot_id(&env);
    let stats = ok(&env, RETRACE_DUMP, &["stats"]);
    assert!(
        stats
            .lines()
            .any(|l| l == "logical    20 KiB (blob content)"),
        "{stats}"
    );
    assert!(!stats.contains(" bytes"), "{stats}");
    let tree = ok(&env, RETRACE_DUMP, &["tree", &id[..12]]);
    let line = tree.lines().find(|l| l.ends_with(" big.bin")).unwrap();
    assert!(line.contains("    20 KiB big.bin"), "{tree}");
    let v: Value = serde_json::from_str(
        ok(&env, RETRACE_DUMP, &["stats", "--json"])
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(v["logical_bytes"], 20 * 1024, "{v}");
}

#[test]
fn stats_figures_add_up_after_gc_frees_packs() {
    let env = crate::common::Env::new();
    let ws = env.open();
    for n in 0..6u64 {
        env.write("r.bin", crate::common::noise(n, 300_000));
        ws.snapshot(None).unwrap();
    }
    drop(ws);
    let o = env.run(crate::common::RETRACE, &["gc", "--grace", "0"]);
    assert!(o.status.success(), "{}", crate::common::stderr(&o));
    let ws = env.open();
    let store = retrace::store::Store::open_read_only(ws.store_path()).unwrap();
    let s = store.reader().unwrap().stats().unwrap();
    assert!(s.frame_bytes > 0, "{s:?}");
    assert!(
        s.frame_bytes <= s.packed_bytes,
        "live frames fit in the packs: {s:?}"
    );
    assert!(
        s.packed_bytes
            <= s.log_bytes
                .next_multiple_of(retrace::store::schema::PACK_BYTES),
        "{s:?}"
    );
    let shown = crate::common::stdout(&env.run(crate::common::RETRACE_DUMP, &["stats"]));
    assert!(
        shown.contains("compressed in the frames objects use"),
        "{shown}"
    );
}

#[test]
fn stats_say_where_the_bytes_are_and_the_parts_add_up() {
    let env = crate::common::Env::new();
    let ws = env.open();
    let text = |n: u64| format!("fn f() {{ {n} }}\n").repeat(400);
    for n in 0..4u64 {
        env.write("src/a.rs", text(n));
        env.write(&format!("src/new_{n}.rs"), text(100 + n));
        ws.snapshot(None).unwrap();
    }
    drop(ws);
    let o = env.run(crate::common::RETRACE, &["gc", "--grace", "0"]);
    assert!(o.status.success(), "{}", crate::common::stderr(&o));
    let line = ok(&env, RETRACE_DUMP, &["stats", "--json"]);
    let v: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    let k = &v["stored_by_kind"];
    let kinds: u64 = ["contents", "deltas", "chunk_lists", "trees"]
        .iter()
        .map(|f| k[f].as_u64().unwrap())
        .sum();
    let frames = v["frame_bytes"].as_u64().unwrap();
    // Shares are rounded down per object: within a byte each.
    assert!(
        kinds <= frames && frames - kinds <= v["blobs"].as_u64().unwrap() + 16,
        "{v}"
    );
    assert!(k["deltas"].as_u64().unwrap() > 0, "src/a.rs's edits: {v}");
    assert!(k["trees"].as_u64().unwrap() > 0, "{v}");
    assert!(k["contents"].as_u64().unwrap() > 0, "{v}");
    let p = &v["file_parts"];
    let parts: u64 = ["packs", "index", "history", "other", "free"]
        .iter()
        .map(|f| p[f].as_u64().unwrap())
        .sum();
    assert!(parts >= v["disk_bytes"].as_u64().unwrap(), "{v}");
    assert!(
        p["history"].as_u64().unwrap() > 0 && p["index"].as_u64().unwrap() > 0,
        "{v}"
    );
    let shown = ok(&env, RETRACE_DUMP, &["stats"]);
    assert!(shown.contains("where      in the packs: "), "{shown}");
    assert!(shown.contains(" object index, "), "{shown}");
}
