//! Unit tests of the parent module.

use super::*;

fn scan_entry(path: &[u8], mtime_ns: i64) -> ScanEntry {
    ScanEntry {
        path: path.to_vec(),
        kind: ScanKind::File,
        size: 5,
        mtime_ns,
        ctime_ns: mtime_ns,
        ino: 7,
        mode: 0o100_644,
        listing: false,
        clean: false,
        linked: false,
    }
}

const STORE: [u8; 16] = [3; 16];
const T0: i64 = 1_000_000_000_000;

fn write(dir: &Path, entries: &[ScanEntry], at: i64) {
    let id = ObjectId::of_blob(b"hello");
    let list = entries
        .iter()
        .map(|e| CacheEntry::from_scan(e, id))
        .collect();
    StatCache::write(&dir.join("c"), &STORE, &ObjectId::ZERO, list, at, &[0; 32]).unwrap();
}

#[test]
fn hits_only_on_identical_stat_data() {
    let d = tempfile::tempdir().unwrap();
    let entries: Vec<_> = (0..50)
        .map(|i| scan_entry(format!("f{i:03}").as_bytes(), T0))
        .collect();
    write(d.path(), &entries, T0 + 10 * RACY_MARGIN_NS);
    let c = StatCache::load(&d.path().join("c"), &STORE);
    assert_eq!(c.len(), 50);
    for e in &entries {
        assert_eq!(c.lookup(e), Some((ObjectId::of_blob(b"hello"), 5)));
    }
    let mut changed = entries[3].clone();
    changed.size = 6;
    assert_eq!(c.lookup(&changed), None);
    assert_eq!(c.lookup(&scan_entry(b"absent", T0)), None);
}

#[test]
fn counts_entries_below_a_directory() {
    let d = tempfile::tempdir().unwrap();
    let paths: [&[u8]; 6] = [b"a", b"a.txt", b"a/b", b"a/b/c", b"a0", b"b/x"];
    let entries: Vec<_> = paths.iter().map(|p| scan_entry(p, T0)).collect();
    write(d.path(), &entries, T0);
    let c = StatCache::load(&d.path().join("c"), &STORE);
    assert_eq!(c.count_prefix(b"a/"), 2);
    assert_eq!(c.count_prefix(b"a/b/"), 1);
    assert_eq!(c.count_prefix(b"b/"), 1);
    assert_eq!(c.count_prefix(b"c/"), 0);
}

#[test]
fn directories_hit_on_path_and_kind() {
    let d = tempfile::tempdir().unwrap();
    let mut dir = scan_entry(b"src", T0);
    dir.kind = ScanKind::Dir;
    write(d.path(), std::slice::from_ref(&dir), T0);
    let c = StatCache::load(&d.path().join("c"), &STORE);
    dir.mtime_ns += 1; // a directory's own times say nothing about its files
    assert!(c.lookup(&dir).is_some());
    dir.kind = ScanKind::NestedRepo;
    assert_eq!(c.lookup(&dir), None);
}

#[test]
fn racy_entries_are_not_trusted() {
    let d = tempfile::tempdir().unwrap();
    let e = scan_entry(b"racy", T0);
    // Written in the same instant the file was modified: must be re-hashed.
    write(d.path(), std::slice::from_ref(&e), T0);
    assert_eq!(
        StatCache::load(&d.path().join("c"), &STORE).lookup(&e),
        None
    );
    write(d.path(), std::slice::from_ref(&e), T0 + RACY_MARGIN_NS - 1);
    assert_eq!(
        StatCache::load(&d.path().join("c"), &STORE).lookup(&e),
        None
    );
    write(d.path(), std::slice::from_ref(&e), T0 + RACY_MARGIN_NS + 1);
    assert!(
        StatCache::load(&d.path().join("c"), &STORE)
            .lookup(&e)
            .is_some()
    );
}

#[test]
fn garbage_and_foreign_caches_read_as_empty() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("c");
    fs::write(&p, b"RTSC\x01\0\0\0garbage").unwrap();
    assert!(StatCache::load(&p, &STORE).is_empty());
    write(d.path(), &[scan_entry(b"a", T0)], T0 * 2);
    assert!(StatCache::load(&p, &[9; 16]).is_empty());
    let mut bytes = fs::read(&p).unwrap();
    bytes[32] = 0xff; // absurd count
    reseal(&mut bytes); // checksums that agree: the bounds still hold
    fs::write(&p, &bytes).unwrap();
    assert!(StatCache::load(&p, &STORE).is_empty());
}

#[test]
fn a_flipped_bit_anywhere_empties_the_cache() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("c");
    let entries = [scan_entry(b"a", T0), scan_entry(b"b/c", T0)];
    write(d.path(), &entries, T0 + 10 * RACY_MARGIN_NS);
    let good = fs::read(&p).unwrap();
    assert_eq!(StatCache::load(&p, &STORE).len(), 2);
    for at in 0..good.len() {
        for bit in [0, 7] {
            let mut bad = good.clone();
            bad[at] ^= 1 << bit;
            fs::write(&p, &bad).unwrap();
            let c = StatCache::load(&p, &STORE);
            assert!(c.is_empty(), "byte {at} bit {bit} went unnoticed");
            assert!(entries.iter().all(|e| c.lookup(e).is_none()));
        }
    }
}

#[test]
fn a_version_2_cache_reads_as_empty() {
    // Version 2 had no checksum trailer: the same bytes without it, version field 2.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("c");
    write(d.path(), &[scan_entry(b"a", T0)], T0 + 10 * RACY_MARGIN_NS);
    let mut v2 = fs::read(&p).unwrap();
    v2.truncate(v2.len() - CHECKSUM_LEN);
    v2[4..8].copy_from_slice(&2u32.to_le_bytes());
    fs::write(&p, &v2).unwrap();
    assert!(StatCache::load(&p, &STORE).is_empty());
}

#[test]
fn records_past_the_count_are_never_read() {
    // Found writing the `statcache` fuzz target: a count cut short by damage left the
    // records after it readable, so a path the header no longer lists could hit.
    let d = tempfile::tempdir().unwrap();
    let entries = [scan_entry(b"a", T0), scan_entry(b"b", T0)];
    write(d.path(), &entries, T0 + 10 * RACY_MARGIN_NS);
    let mut bytes = fs::read(d.path().join("c")).unwrap();
    assert!(
        StatCache::decode(bytes.clone(), &STORE)
            .lookup(&entries[1])
            .is_some()
    );
    bytes[32..40].copy_from_slice(&1u64.to_le_bytes());
    // A writer's bug, not damage: the checksum matches the bytes.
    reseal(&mut bytes);
    let c = StatCache::decode(bytes, &STORE);
    assert_eq!(c.len(), 1);
    assert!(c.lookup(&entries[0]).is_some());
    assert_eq!(c.lookup(&entries[1]), None);
}

#[test]
fn a_write_time_near_the_minimum_trusts_nothing() {
    // `written_ns - RACY_MARGIN_NS` overflowed: a panic in debug builds, and in release
    // builds a wrap to the far future that trusted every entry.
    let d = tempfile::tempdir().unwrap();
    let e = scan_entry(b"a", i64::MIN);
    write(d.path(), std::slice::from_ref(&e), i64::MIN + 1);
    let c = StatCache::load(&d.path().join("c"), &STORE);
    assert_eq!(c.len(), 1);
    assert_eq!(c.lookup(&e), None);
}

#[test]
fn prefixes_ending_in_0xff_are_counted() {
    // `count_prefix` added 1 to a last byte of 0xff: an overflow.
    let d = tempfile::tempdir().unwrap();
    let paths: [&[u8]; 5] = [b"a", b"a\xff", b"a\xff\xff", b"a\xffz", b"b"];
    let entries: Vec<_> = paths.iter().map(|p| scan_entry(p, T0)).collect();
    write(d.path(), &entries, T0);
    let c = StatCache::load(&d.path().join("c"), &STORE);
    assert_eq!(c.count_prefix(b"a\xff"), 3);
    assert_eq!(c.count_prefix(b"a\xff\xff"), 1);
    assert_eq!(c.count_prefix(b"\xff"), 0);
    assert_eq!(c.count_prefix(b""), 5);
}

#[test]
fn children_are_the_records_directly_inside_a_directory() {
    let d = tempfile::tempdir().unwrap();
    // `p!` and `p.x` sort between `p` and `p/`; `p/s/` holds a subtree to jump over.
    let paths: [&[u8]; 7] = [b"p", b"p!", b"p.x", b"p/a", b"p/s", b"p/s/deep", b"p/z"];
    let entries: Vec<_> = paths.iter().map(|p| scan_entry(p, T0)).collect();
    write(d.path(), &entries, T0 + 10 * RACY_MARGIN_NS);
    let c = StatCache::load(&d.path().join("c"), &STORE);
    let names = |prefix: &[u8]| -> Vec<Vec<u8>> {
        c.children(prefix)
            .unwrap()
            .iter()
            .map(|k| k.path.to_vec())
            .collect()
    };
    assert_eq!(
        names(b"p/"),
        [b"p/a".to_vec(), b"p/s".to_vec(), b"p/z".to_vec()]
    );
    assert_eq!(names(b"").len(), 3, "p, p! and p.x");
    assert_eq!(names(b"p/s/"), [b"p/s/deep".to_vec()]);
    assert!(names(b"q/").is_empty());
}

#[test]
fn unsorted_records_never_loop_listing_children() {
    // A writer's bug or a crafted file with a valid checksum: records out of order made the
    // jump past a subdirectory go backwards, round and round.
    let d = tempfile::tempdir().unwrap();
    let paths: [&[u8]; 4] = [b"p/x/y", b"p/y", b"p/y2", b"zz"];
    let entries: Vec<_> = paths.iter().map(|p| scan_entry(p, T0)).collect();
    write(d.path(), &entries, T0 + 10 * RACY_MARGIN_NS);
    let mut bytes = fs::read(d.path().join("c")).unwrap();
    // Swap the first two records: `p/y` before `p/x/y`.
    let (a, b) = (HEADER_LEN, HEADER_LEN + RECORD_LEN);
    let first = bytes[a..b].to_vec();
    bytes.copy_within(b..b + RECORD_LEN, a);
    bytes[b..b + RECORD_LEN].copy_from_slice(&first);
    reseal(&mut bytes);
    let c = StatCache::decode(bytes, &STORE);
    assert_eq!(c.len(), 4);
    // It ends; what it lists of a malformed file does not matter.
    let _ = c.children(b"p/");
    let _ = c.children(b"");
}

fn records(list: &[ScanEntry], id: ObjectId) -> Vec<CacheEntry<'_>> {
    list.iter().map(|e| CacheEntry::from_scan(e, id)).collect()
}

#[test]
fn a_streamed_write_refuses_records_out_of_order_or_miscounted_and_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let id = ObjectId::of_blob(b"hello");
    let header = Header {
        store_id: &STORE,
        root: &ObjectId::ZERO,
        written_ns: T0 + 10 * RACY_MARGIN_NS,
        rules: &[0; 32],
        token: None,
        files: 0,
        bytes: 0,
        quiet: false,
        nested: false,
    };
    let path = d.path().join("c");
    let good: Vec<_> = [b"a".as_slice(), b"a/b", b"b"]
        .iter()
        .map(|p| scan_entry(p, T0))
        .collect();
    let swapped = [good[1].clone(), good[0].clone()];
    let unsorted = records(&swapped, id);
    let err = StatCache::write_sorted(&path, &header, 2, || unsorted.iter().copied()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    let doubled = [good[0].clone(), good[0].clone()];
    let twice = records(&doubled, id);
    let err = StatCache::write_sorted(&path, &header, 2, || twice.iter().copied()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    let sorted = records(&good, id);
    let err = StatCache::write_sorted(&path, &header, 4, || sorted.iter().copied()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
    assert!(left.is_empty(), "a refused write leaves no file: {left:?}");
    StatCache::write_sorted(&path, &header, 3, || sorted.iter().copied()).unwrap();
    let c = StatCache::load(&path, &STORE);
    assert_eq!(c.len(), 3);
    for e in &good {
        assert_eq!(c.lookup(e), Some((id, 5)));
    }
}

#[test]
fn a_write_that_fails_midway_reports_the_disks_error() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // not Linux
    };
    let id = ObjectId::of_blob(b"x");
    // More than one buffer, so the writer thread fails while the encoder still puts.
    let list: Vec<_> = (0..40_000u32)
        .map(|i| scan_entry(format!("dir/file-{i:08}").as_bytes(), T0))
        .collect();
    let header = Header {
        store_id: &STORE,
        root: &ObjectId::ZERO,
        written_ns: T0,
        rules: &[0; 32],
        token: None,
        files: 0,
        bytes: 0,
        quiet: false,
        nested: false,
    };
    let entries = records(&list, id);
    let err = Hashing::run(full, |w| {
        write_body(w, &header, entries.len(), || entries.iter().copied())
    })
    .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(28), "ENOSPC, not {err}");
}

#[test]
fn the_header_stands_alone_and_carries_the_token() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("c");
    let id = ObjectId::of_blob(b"x");
    let list = [scan_entry(b"a", T0)];
    let token = crate::vouch::Token { epoch: 7, seq: 9 };
    let header = Header {
        store_id: &STORE,
        root: &id,
        written_ns: T0,
        rules: &[3; 32],
        token: Some(token),
        files: 1,
        bytes: 5,
        quiet: true,
        nested: false,
    };
    let entries = records(&list, id);
    StatCache::write_sorted(&path, &header, entries.len(), || entries.iter().copied()).unwrap();
    let head = StatCache::load_head(&path, &STORE).unwrap();
    assert_eq!(head.root, id);
    assert_eq!(head.token, Some(token));
    assert_eq!((head.files, head.bytes, head.quiet), (1, 5, true));
    assert_eq!(StatCache::load(&path, &STORE).head(), head);
    // Another store's, or one flipped bit in the header: no header at all.
    assert!(StatCache::load_head(&path, &[9; 16]).is_none());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[110] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    assert!(StatCache::load_head(&path, &STORE).is_none());
    assert!(StatCache::load(&path, &STORE).is_empty());
}

#[test]
fn a_watched_head_stands_for_its_cache_version_only() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("c");
    let (id, newer) = (ObjectId::of_blob(b"x"), ObjectId::of_blob(b"y"));
    let list = [scan_entry(b"a", T0)];
    let header = |root, token, written_ns| Header {
        store_id: &STORE,
        root,
        written_ns,
        rules: &[3; 32],
        token: Some(crate::vouch::Token {
            epoch: 7,
            seq: token,
        }),
        files: token,
        bytes: 5,
        quiet: true,
        nested: false,
    };
    let entries = records(&list, id);
    let write = |h: &Header<'_>| {
        StatCache::write_sorted(&path, h, entries.len(), || entries.iter().copied()).unwrap();
    };
    write(&header(&id, 1, T0));
    let base = StatCache::load_head(&path, &STORE).unwrap();
    assert!(!base.beside);
    StatCache::write_watched(&path, &base, &header(&newer, 2, T0 + 5)).unwrap();
    let head = StatCache::load_head(&path, &STORE).unwrap();
    assert!(head.beside);
    assert_eq!((head.root, head.files, head.cache), (newer, 2, base.cache));
    // The records are still the cache's, under its own head and time.
    let cache = StatCache::load(&path, &STORE);
    assert_eq!((cache.head(), cache.written_ns()), (base, T0));
    let mapped = StatCache::load_unverified(&path, &STORE, &head).unwrap();
    assert_eq!(mapped.len(), 1);
    // One flipped bit in the watched head, or another store's: the cache's own head.
    let watched = watched_path(&path);
    let good = std::fs::read(&watched).unwrap();
    for at in [0, 100, HEADER_LEN + 3, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 1;
        std::fs::write(&watched, &bad).unwrap();
        assert_eq!(
            StatCache::load_head(&path, &STORE),
            Some(base),
            "bit at {at}"
        );
    }
    std::fs::write(&watched, &good).unwrap();
    assert!(StatCache::load_head(&path, &[9; 16]).is_none());
    // A rewritten cache is another version: the watched head no longer goes with it.
    write(&header(&id, 3, T0 + 9));
    let head = StatCache::load_head(&path, &STORE).unwrap();
    assert!(!head.beside);
    assert_eq!(head.files, 3);
    assert!(StatCache::load_unverified(&path, &STORE, &base).is_none());
}

/// Seals edited cache bytes as a writer would: the header's checksum, then the file's.
fn reseal(bytes: &mut [u8]) {
    let head = *blake3::hash(&bytes[..super::HEAD_FIELDS]).as_bytes();
    bytes[super::HEAD_FIELDS..HEADER_LEN].copy_from_slice(&head);
    let body = bytes.len() - CHECKSUM_LEN;
    let sum = *blake3::hash(&bytes[..body]).as_bytes();
    bytes[body..].copy_from_slice(&sum);
}

/// A quiet head holding nested repositories left alone takes a flag bit of its own (a reader
/// that knows only the quiet bit walks), and the records name the repositories.
#[test]
fn a_quiet_head_with_nested_repositories_says_so_and_the_records_name_them() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("c");
    let id = ObjectId::of_blob(b"x");
    let mut repo = scan_entry(b"b/repo", T0);
    repo.kind = ScanKind::NestedRepo;
    let list = [scan_entry(b"a", T0), repo, scan_entry(b"c", T0)];
    for (quiet, nested, flags) in [(true, true, 2u64), (true, false, 1), (false, true, 0)] {
        let header = Header {
            store_id: &STORE,
            root: &id,
            written_ns: T0,
            rules: &[3; 32],
            token: None,
            files: 2,
            bytes: 5,
            quiet,
            nested,
        };
        let entries = records(&list, id);
        StatCache::write_sorted(&path, &header, entries.len(), || entries.iter().copied()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            u64::from_le_bytes(bytes[136..144].try_into().unwrap()),
            flags
        );
        let head = StatCache::load_head(&path, &STORE).unwrap();
        assert_eq!((head.quiet, head.nested), (quiet, quiet && nested));
        let cache = StatCache::load(&path, &STORE);
        assert_eq!(cache.nested_repos(), Some(vec![&b"b/repo"[..]]));
    }
}
