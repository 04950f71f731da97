//! Restores past what is verified up front (`RETRACE_FAULT_KEEP_BYTES` brings a small
//! workspace there): every object is checked present before anything is written, verified
//! as its file is written, and the result checked by `lstat` instead of a re-scan.

use std::fs;
use std::process::Stdio;

use crate::common::{
    Env, RETRACE, flip_byte, noise, open_raw, snapshot_id, stderr, stdout, tree_of, wait_paused,
};
use retrace::object::ObjectId;
use retrace::store::Store;

/// Thirty small files, then `m.txt` of its own frame (over 64 KiB, random: no version is
/// a delta of another, so reading one never reads the other), then thirty more.
fn files(env: &Env, version: u64) -> Vec<u8> {
    for i in 0..30 {
        env.write(&format!("a{i:02}.txt"), format!("{version} of a{i}\n"));
        env.write(&format!("z{i:02}.txt"), format!("{version} of z{i}\n"));
    }
    let m = noise(version, 90_000);
    env.write("m.txt", &m);
    m
}

fn offset_of(env: &Env, id: ObjectId) -> u64 {
    let store = Store::open_read_only(env.open().store_path()).unwrap();
    store.reader().unwrap().record(&id).unwrap().offset
}

fn big(env: &Env, args: &[&str]) -> std::process::Command {
    let mut c = env.command(RETRACE, args);
    c.env("RETRACE_FAULT_KEEP_BYTES", "0")
        .env("RAYON_NUM_THREADS", "1");
    c
}

fn temp_files(env: &Env) -> Vec<String> {
    fs::read_dir(env.root())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.contains("retrace-tmp"))
        .collect()
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_damaged_object_met_while_writing_rolls_the_restore_back() {
    let env = Env::new();
    let m1 = files(&env, 1);
    let first = snapshot_id(&env);
    files(&env, 2);
    env.write("added.txt", "added after the first snapshot");
    snapshot_id(&env);
    let before = tree_of(env.root());
    flip_byte(&env, offset_of(&env, ObjectId::of_blob(&m1)));
    // One thread, writes in path order: the thirty `a` files are written before `m.txt`.
    let o = big(&env, &["restore", &first]).output().unwrap();
    assert!(!o.status.success(), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&ObjectId::of_blob(&m1).to_hex()),
        "names the object: {err}"
    );
    assert!(err.contains("put back the"), "rolled back: {err}");
    assert_eq!(tree_of(env.root()), before, "the workspace is as it was");
    assert!(temp_files(&env).is_empty(), "{:?}", temp_files(&env));
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_missing_object_refuses_the_restore_before_anything_is_written() {
    let env = Env::new();
    let m1 = files(&env, 1);
    let first = snapshot_id(&env);
    files(&env, 2);
    snapshot_id(&env);
    let before = tree_of(env.root());
    let id = ObjectId::of_blob(&m1);
    {
        let db = open_raw(&env);
        let tx = db.begin_write().unwrap();
        {
            let mut objects = tx.open_table(retrace::store::schema::OBJECTS).unwrap();
            assert!(objects.remove(&id.0).unwrap().is_some());
        }
        tx.commit().unwrap();
    }
    let o = big(&env, &["restore", &first]).output().unwrap();
    assert!(!o.status.success(), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains(&id.to_hex()), "names the object: {err}");
    assert!(!err.contains("put back"), "nothing was written: {err}");
    assert_eq!(tree_of(env.root()), before);
}

#[test]
#[cfg_attr(
    not(feature = "fault-injection"),
    ignore = "needs --features fault-injection"
)]
fn a_big_restore_is_exact_and_a_file_changed_during_it_is_recorded() {
    let env = Env::new();
    // Over the 1000 paths below which a restore reads back what it wrote.
    for i in 0..1100 {
        env.write(&format!("d{}/f{i:04}", i % 7), format!("v1 of {i}\n"));
    }
    let first = snapshot_id(&env);
    let expected = tree_of(env.root());
    for i in 0..1100 {
        env.write(
            &format!("d{}/f{i:04}", i % 7),
            format!("v2 of {i}, longer\n"),
        );
    }
    snapshot_id(&env);

    // Undisturbed: the target is recorded as it is, verified, and the disk equals it.
    let o = big(&env, &["restore", &first, "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(tree_of(env.root()), expected);
    assert_eq!(snapshot_id(&env), first, "the disk is the target snapshot");

    for i in 0..1100 {
        env.write(&format!("d{}/f{i:04}", i % 7), format!("v3 of {i}\n"));
    }
    let third = snapshot_id(&env);
    // Paused after 500 writes; someone appends to a file the restore already wrote.
    let pause = env.home.path().join("paused");
    let mut child = big(&env, &["restore", &first, "--json"])
        .env(
            "RETRACE_FAULT_PAUSE",
            format!("done:500:{}", pause.display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_paused(&mut child, &pause), "done:500 never reached");
    let written = (0..1100)
        .map(|i| format!("d{}/f{i:04}", i % 7))
        .find(|p| fs::read_to_string(env.path(p)).unwrap().starts_with("v1"))
        .expect("a file already written");
    let mut edited = fs::read_to_string(env.path(&written)).unwrap();
    edited.push_str("the user's line\n");
    env.write(&written, &edited);
    fs::remove_file(&pause).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["verified"], false, "{v}");
    assert_eq!(v["verify_diff"], serde_json::json!([written]), "{v}");
    assert_eq!(env.read(&written), edited, "the user's edit is on disk");
    // What was recorded is what the disk holds: the status shows no change, and it is
    // neither the target nor the state before.
    let st = env.run(RETRACE, &["status", "--json"]);
    let st: serde_json::Value = serde_json::from_str(&stdout(&st)).unwrap();
    assert_eq!(st["workspace"]["changed_count"], 0, "{st}");
    let recorded = st["workspace"]["last_known"].as_str().unwrap().to_string();
    assert_ne!(recorded, first);
    assert_ne!(recorded, third);
    assert_eq!(snapshot_id(&env), recorded);
}
