//! Criterion micro benchmarks of the hot paths: stat cache lookups (the whole of a
//! no-change capture beyond the walk), framing and compressing small objects (cold
//! captures), and tree encoding and decoding (every capture and restore).
//!
//! `cargo bench --bench micro`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use retrace::object::{
    EntryKind, NewFrame, ObjectId, ObjectKind, PendingObject, Tree, TreeEntry, delta,
};
use retrace::scan::{ScanEntry, ScanKind};
use retrace::statcache::{CacheEntry, StatCache};

const T0: i64 = 1_000_000_000_000_000;

fn entries(n: usize) -> Vec<ScanEntry> {
    let mut v: Vec<ScanEntry> = (0..n)
        .map(|i| ScanEntry {
            path: format!("src/m{:02}/d{:03}/f{i:06}.rs", i % 37, (i / 37) % 113).into_bytes(),
            kind: ScanKind::File,
            size: 4096,
            mtime_ns: T0,
            ctime_ns: T0,
            ino: i as u64,
            mode: 0o100_644,
            listing: false,
            clean: false,
            linked: false,
        })
        .collect();
    v.sort_by(|a, b| a.path.cmp(&b.path));
    v
}

fn statcache(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("statcache");
    let scan = entries(100_000);
    let id = ObjectId::of_blob(b"x");
    let list = scan.iter().map(|e| CacheEntry::from_scan(e, id)).collect();
    StatCache::write(&path, &[1; 16], &id, list, T0 * 2, &[0; 32]).unwrap();
    let cache = StatCache::load(&path, &[1; 16]);
    let mut g = c.benchmark_group("statcache");
    g.throughput(Throughput::Elements(scan.len() as u64));
    g.bench_function("merge 100k sorted paths", |b| {
        b.iter(|| {
            let mut pos = cache.position(&scan[0].path);
            scan.iter()
                .filter(|e| cache.lookup_at(e, &mut pos).is_some())
                .count()
        });
    });
    g.bench_function("binary-search 100k paths", |b| {
        b.iter(|| scan.iter().filter(|e| cache.lookup(e).is_some()).count());
    });
    g.finish();
}

fn frames(c: &mut Criterion) {
    let text: Vec<_> = (0..100u32)
        .map(|i| {
            let body: String = (0..200)
                .map(|l| format!("let value_{} = compute({l}, {i});\n", l % 17))
                .collect();
            let bytes = body.into_bytes();
            PendingObject::whole(
                ObjectId::of_blob(&bytes),
                ObjectKind::Blob,
                bytes.len() as u64,
                bytes,
            )
        })
        .collect();
    let total: usize = text.iter().map(|o| o.payload.len()).sum();
    let mut g = c.benchmark_group("frame");
    g.throughput(Throughput::Bytes(total as u64));
    g.bench_function("pack 100 source files", |b| {
        b.iter(|| NewFrame::pack(black_box(&text)))
    });
    g.finish();
    // A 200 KB source file with one line changed, as a delta against its previous version.
    let old: Vec<u8> = text
        .iter()
        .flat_map(|o| o.payload.clone())
        .take(200_000)
        .collect();
    let mut new = old.clone();
    new.splice(100_000..100_000, b"let inserted = 1;\n".iter().copied());
    let d = delta::encode(&old, &new).unwrap();
    let mut g = c.benchmark_group("delta");
    g.throughput(Throughput::Bytes(new.len() as u64));
    g.bench_function("encode 200 KB, one line changed", |b| {
        b.iter(|| delta::encode(black_box(&old), black_box(&new)))
    });
    g.bench_function("decode 200 KB, one line changed", |b| {
        b.iter(|| delta::decode(black_box(&old), black_box(&d), new.len()))
    });
    g.finish();
}

fn trees(c: &mut Criterion) {
    let tree = Tree {
        entries: (0..200)
            .map(|i| TreeEntry {
                name: format!("file{i:04}.rs").into_bytes(),
                kind: EntryKind::File,
                id: ObjectId::of_blob(&[i as u8]),
                size: 1000,
            })
            .collect(),
    };
    let bytes = tree.encode();
    let mut g = c.benchmark_group("tree");
    g.bench_function("encode 200 entries", |b| {
        b.iter(|| black_box(&tree).encode())
    });
    g.bench_function("decode and validate 200 entries", |b| {
        b.iter(|| Tree::decode(black_box(&bytes)).unwrap());
    });
    g.finish();
}

criterion_group!(benches, statcache, frames, trees);
criterion_main!(benches);
