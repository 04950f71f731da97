//! Capture and restore memory do not grow with file size: `retrace snapshot` (and `retrace
//! restore`) of one file several times larger than the bound runs in a child process whose
//! peak RSS (the kernel's high-water mark of that program alone) must stay under it. A memory
//! bound, not a timing: no clock involved.

use std::io::Write;
use std::process::Stdio;

use crate::common::{self, Env, RETRACE, noise};

/// Peak RSS allowed for a capture, in KiB: two 16 MiB batches of frames (one being written,
/// one filling), redb's 64 MiB page cache, and the process itself (about 20 MB), with room
/// to spare (measured: about 100 MB for a 400 MB file). Before
/// chunks were queued as they were read, a capture held the whole file: about 1.06 GB for
/// a 1 GB file.
const BOUND_KIB: i64 = 160 * 1024;

/// Runs `retrace snapshot` in the workspace; returns its stdout and its peak RSS in KiB.
fn snapshot_peak_rss(env: &Env) -> (String, i64) {
    peak_rss(env, &["snapshot"])
}

/// Runs retrace with `args` in the workspace; returns its stdout and its peak RSS in KiB, as
/// retrace reports it with `RETRACE_TRACE=1` (the kernel's `VmHWM` of the program itself:
/// `wait4`'s `ru_maxrss` would also count the test process's memory at the spawn, which
/// depends on what the other tests running beside it hold).
fn peak_rss(env: &Env, args: &[&str]) -> (String, i64) {
    let out = env
        .command(RETRACE, args)
        .env("RETRACE_TRACE", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "retrace {args:?} failed: {stderr}");
    let peak = stderr
        .lines()
        .find_map(|l| l.strip_prefix("retrace trace: peak RSS "))
        .and_then(|l| l.strip_suffix(" KiB"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no peak RSS reported: {stderr}"));
    (String::from_utf8_lossy(&out.stdout).into_owned(), peak)
}

fn assert_bounded(env: &Env, what: &str, file_bytes: u64) {
    let (out, peak_kib) = snapshot_peak_rss(env);
    println!("{what}: {file_bytes} bytes captured at a peak RSS of {peak_kib} KiB");
    assert!(out.starts_with("snapshot "), "{out}");
    assert!(
        peak_kib < BOUND_KIB,
        "capturing {what} of {file_bytes} bytes peaked at {peak_kib} KiB (bound {BOUND_KIB} KiB)"
    );
    let id = out.split_whitespace().nth(1).unwrap_or("?");
    let log = common::stdout(&env.run(RETRACE, &["log"]));
    assert!(
        log.contains(&id[..12.min(id.len())]),
        "{id} not in the log: {log}"
    );
}

/// Writes `random.bin`: `mib` MiB of noise (generated, never committed).
fn write_random(env: &Env, mib: u64, seed: u64) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(env.path("random.bin")).unwrap());
    for i in 0..mib {
        f.write_all(&noise(seed + i, 1 << 20)).unwrap();
    }
    f.into_inner().unwrap().sync_all().unwrap();
}

#[test]
fn capturing_a_big_sparse_file_stays_within_the_memory_bound() {
    const SIZE: u64 = 512 << 20;
    let env = Env::new();
    let f = std::fs::File::create(env.path("sparse.img")).unwrap();
    f.set_len(SIZE).unwrap();
    drop(f);
    assert_bounded(&env, "a sparse file", SIZE);
}

#[test]
fn capturing_a_big_random_file_stays_within_the_memory_bound() {
    const MIB: usize = 1 << 20;
    const PIECES: u64 = 384;
    let env = Env::new();
    write_random(&env, PIECES, 1);
    assert_bounded(&env, "a random file", PIECES * MIB as u64);
}

#[test]
fn restoring_a_big_random_file_stays_within_the_memory_bound() {
    const MIB: usize = 1 << 20;
    const PIECES: u64 = 384;
    let env = Env::new();
    write_random(&env, PIECES, 100);
    let (out, _) = snapshot_peak_rss(&env);
    let id = out.split_whitespace().nth(1).unwrap().to_string();
    std::fs::remove_file(env.path("random.bin")).unwrap();
    snapshot_peak_rss(&env);
    let (out, peak_kib) = peak_rss(&env, &["restore", &id]);
    println!(
        "restore: {} bytes at a peak RSS of {peak_kib} KiB",
        PIECES * MIB as u64
    );
    assert!(out.contains("1 written"), "{out}");
    assert!(
        peak_kib < BOUND_KIB,
        "restoring {} bytes peaked at {peak_kib} KiB (bound {BOUND_KIB} KiB)",
        PIECES * MIB as u64
    );
    assert_eq!(
        std::fs::metadata(env.path("random.bin")).unwrap().len(),
        PIECES * MIB as u64
    );
}
