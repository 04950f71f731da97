//! delta-lab: how much does storing each new file version as a zstd "patch-from" delta
//! (previous version as reference prefix) save on retrace's long-session workload, and
//! what does it cost to read?  Standalone; mirrors retrace's constants:
//! capture level 3, dense level 12, FastCDC 64K/256K/1M, shared frames ~1 MiB.
//!
//! Usage: delta-lab [api|session|chain|chunk|all] [--git]

use std::time::Instant;
use zstd::zstd_safe::{self, CCtx, CParameter, DCtx, ResetDirective};

const ZSTD_LEVEL: i32 = 3; // retrace src/object/record.rs
const DENSE_LEVEL: i32 = 12;
const CHUNK_MIN: usize = 64 * 1024; // retrace src/object/mod.rs
const CHUNK_AVG: usize = 256 * 1024;
const CHUNK_MAX: usize = 1024 * 1024;

// ---------------------------------------------------------------- the API under test

/// Smallest window log covering prefix + source (zstd only ever *shrinks* the level's
/// window to fit, so for inputs over the level's window this must be set explicitly).
fn window_log_for(total: usize) -> u32 {
    let mut w = 10u32; // ZSTD_WINDOWLOG_MIN
    while (1usize << w) < total {
        w += 1;
    }
    w.min(27) // ZSTD_WINDOWLOG_LIMIT_DEFAULT: above this the reader must raise WindowLogMax
}

#[derive(Clone, Copy)]
struct DeltaOpts {
    level: i32,
    ldm: bool,
    set_window: bool,
}

/// `new` compressed with `base` as reference prefix ("patch-from").
fn delta_compress<'a>(cctx: &mut CCtx<'a>, base: &'a [u8], new: &[u8], o: DeltaOpts) -> Vec<u8> {
    // SessionAndParameters also drops any prefix/dictionary left over.
    cctx.reset(ResetDirective::SessionAndParameters).unwrap();
    cctx.set_parameter(CParameter::CompressionLevel(o.level)).unwrap();
    if o.set_window {
        cctx.set_parameter(CParameter::WindowLog(window_log_for(base.len() + new.len())))
            .unwrap();
    }
    if o.ldm {
        cctx.set_parameter(CParameter::EnableLongDistanceMatching(true)).unwrap();
    }
    let mut out = Vec::with_capacity(zstd_safe::compress_bound(new.len()));
    // A prefix is borrowed and single-use: it applies to the next frame only. The borrow
    // checker forces `base` to outlive the context's lifetime parameter, so we build the
    // context where `base` lives (see `with_prefix_ctx`).
    cctx.ref_prefix(base).unwrap();
    cctx.compress2(&mut out, new).unwrap();
    out
}

/// One-off delta with a fresh context (what the borrow rules push you to).
fn delta(base: &[u8], new: &[u8], o: DeltaOpts) -> Vec<u8> {
    let mut c = CCtx::create();
    delta_compress(&mut c, base, new, o)
}

/// Reverses `delta_compress`. `size` is the recorded content size (bounds the output).
fn delta_decompress<'a>(dctx: &mut DCtx<'a>, base: &'a [u8], delta: &[u8], size: usize) -> Vec<u8> {
    dctx.ref_prefix(base).unwrap();
    let mut out = Vec::with_capacity(size);
    let n = dctx.decompress(&mut out, delta).unwrap();
    assert_eq!(n, size);
    out
}

/// One-off decode with a fresh context (dropped before `base` may change).
fn undelta(base: &[u8], d: &[u8], size: usize) -> Vec<u8> {
    let mut dctx = DCtx::create();
    delta_decompress(&mut dctx, base, d, size)
}

fn whole(level: i32, data: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(data, level).unwrap()
}

// ---------------------------------------------------------------- workload

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: u64, hi_incl: u64) -> u64 {
        lo + self.below(hi_incl - lo + 1)
    }
}

struct Gen {
    words: Vec<String>,
    types: Vec<String>,
}

impl Gen {
    fn new(rng: &mut Rng) -> Gen {
        const SYL: &[&str] = &[
            "ka", "to", "ri", "mon", "sel", "ver", "ad", "ex", "tra", "pol", "in", "de", "qu",
            "ba", "lo", "ne", "st", "un", "fi", "gr", "op", "ch", "mi", "zo",
        ];
        let mut words = Vec::new();
        for _ in 0..400 {
            let n = rng.range(1, 3);
            let mut w = String::new();
            for _ in 0..n {
                w.push_str(SYL[rng.below(SYL.len() as u64) as usize]);
            }
            words.push(w);
        }
        let types = (0..40)
            .map(|_| {
                let w = &words[rng.below(400) as usize];
                let mut c = w.chars();
                let f = c.next().unwrap().to_ascii_uppercase();
                format!("{f}{}", c.as_str())
            })
            .collect();
        Gen { words, types }
    }
    fn w(&self, r: &mut Rng) -> &str {
        // Zipf-ish: small ids far more frequent.
        let i = (r.below(400) * r.below(400) / 400) as usize;
        &self.words[i]
    }
    fn t(&self, r: &mut Rng) -> &str {
        &self.types[r.below(self.types.len() as u64) as usize]
    }
    fn line(&self, r: &mut Rng) -> String {
        let ind = "    ".repeat(r.below(4) as usize);
        let n = r.below(100_000);
        let s = match r.below(10) {
            0 => format!("let {} = {}.{}({}, {n});", self.w(r), self.w(r), self.w(r), self.w(r)),
            1 => format!("if {} > {} {{", self.w(r), n % 1000),
            2 => "}".to_string(),
            3 => format!(
                "pub fn {}_{}(&mut self, {}: &{}) -> Result<{}, Error> {{",
                self.w(r), self.w(r), self.w(r), self.t(r), self.t(r)
            ),
            4 => format!("// {} {} the {} {} when {}", self.w(r), self.w(r), self.w(r), self.w(r), self.w(r)),
            5 => format!("return {}.{}().map_err({}::{})?;", self.w(r), self.w(r), self.t(r), self.w(r)),
            6 => format!("{}.push({}[{}]);", self.w(r), self.w(r), n % 64),
            7 => format!("let {}: {}<{}> = {}::new();", self.w(r), self.t(r), self.t(r), self.t(r)),
            8 => format!("{}::{}({}, \"{} {}\")", self.t(r), self.w(r), self.w(r), self.w(r), self.w(r)),
            _ => format!("self.{} += {}.len() as u64;", self.w(r), self.w(r)),
        };
        ind + &s
    }
    fn file(&self, r: &mut Rng, target: usize) -> Vec<String> {
        let mut v = Vec::new();
        let mut n = 0;
        while n < target {
            let l = self.line(r);
            n += l.len() + 1;
            v.push(l);
        }
        v
    }
}

fn join(lines: &[String]) -> Vec<u8> {
    let mut s = lines.join("\n");
    s.push('\n');
    s.into_bytes()
}

/// 1–6 line edits: replace 70%, insert 20%, delete 10%.
fn edit(g: &Gen, r: &mut Rng, lines: &mut Vec<String>) {
    for _ in 0..r.range(1, 6) {
        let i = r.below(lines.len() as u64) as usize;
        match r.below(10) {
            0..=6 => lines[i] = g.line(r),
            7 | 8 => lines.insert(i, g.line(r)),
            _ => {
                lines.remove(i);
            }
        }
    }
}

// ---------------------------------------------------------------- helpers

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    let mut ts = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        f();
        ts.push(t.elapsed().as_secs_f64() * 1e3);
    }
    median(ts)
}

const L3: DeltaOpts = DeltaOpts { level: ZSTD_LEVEL, ldm: false, set_window: true };
const L3_LDM: DeltaOpts = DeltaOpts { level: ZSTD_LEVEL, ldm: true, set_window: true };
const L3_DEFWIN: DeltaOpts = DeltaOpts { level: ZSTD_LEVEL, ldm: false, set_window: false };
const L12: DeltaOpts = DeltaOpts { level: DENSE_LEVEL, ldm: false, set_window: true };

fn kb(b: u64) -> String {
    format!("{:.1} KB", b as f64 / 1000.0)
}

// ---------------------------------------------------------------- experiment: API checks

fn api() {
    println!("== API checks");
    let mut r = Rng(7);
    let g = Gen::new(&mut r);
    let mut lines = g.file(&mut r, 150_000);
    let old = join(&lines);
    edit(&g, &mut r, &mut lines);
    let new = join(&lines);

    // Compress/decompress with zstd_safe contexts + ref_prefix.
    let mut cctx = CCtx::create();
    let d = delta_compress(&mut cctx, &old, &new, L3);
    let mut dctx = DCtx::create();
    assert_eq!(delta_decompress(&mut dctx, &old, &d, new.len()), new);
    println!("ref_prefix round trip ok: {} -> {} bytes (whole L3 {})", new.len(), d.len(), whole(3, &new).len());

    // A prefix is single use: the next frame on the same context is back to plain.
    let mut out = Vec::with_capacity(new.len());
    let plain = whole(3, &new);
    dctx.decompress(&mut out, &plain).unwrap();
    println!("dctx after a prefix frame decompresses a plain frame: ok");
    let mut out2 = Vec::with_capacity(new.len());
    match dctx.decompress(&mut out2, &d) {
        Ok(_) => println!("delta WITHOUT prefix: decoded?! equal={}", out2 == new),
        Err(e) => println!("delta without its prefix: error {:?} ({})", e, zstd_safe::get_error_name(e)),
    }
    // Wrong base: zstd has no way to know (no dict id for prefixes).
    let mut wrong = old.clone();
    wrong[1000] ^= 1;
    let mut dctx2 = DCtx::create();
    dctx2.ref_prefix(&wrong).unwrap();
    let mut out3 = Vec::with_capacity(new.len());
    match dctx2.decompress(&mut out3, &d) {
        Ok(n) => println!("delta with a 1-bit-wrong base: decoded {} bytes, equal={} (only the blake3 check catches it)", n, out3 == new),
        Err(e) => println!("delta with wrong base: error {}", zstd_safe::get_error_name(e)),
    }

    // bulk::Compressor/Decompressor dictionary route (owned copy, 'static contexts).
    let mut c = zstd::bulk::Compressor::with_dictionary(3, &old).unwrap();
    let dd = c.compress(&new).unwrap();
    let mut dec = zstd::bulk::Decompressor::with_dictionary(&old).unwrap();
    assert_eq!(dec.decompress(&dd, new.len()).unwrap(), new);
    // cross: prefix-compressed frame, dictionary-decompressed
    assert_eq!(dec.decompress(&d, new.len()).unwrap(), new);
    println!("bulk with_dictionary: {} bytes (prefix {}); a prefix frame decodes with Decompressor::with_dictionary(base)", dd.len(), d.len());
    let tp = time(20, || {
        let mut c = CCtx::create();
        std::hint::black_box(delta_compress(&mut c, &old, &new, L3));
    });
    let tpr = time(20, || {
        std::hint::black_box(delta_compress(&mut cctx, &old, &new, L3));
    });
    let td = time(20, || {
        let mut c = zstd::bulk::Compressor::with_dictionary(3, &old).unwrap();
        std::hint::black_box(c.compress(&new).unwrap());
    });
    let tdr = time(20, || {
        c.set_dictionary(3, &old).unwrap();
        std::hint::black_box(c.compress(&new).unwrap());
    });
    let tw = time(20, || {
        std::hint::black_box(whole(3, &new));
    });
    println!("compress 150KB: whole L3 {tw:.2} ms; prefix fresh ctx {tp:.2} / reused ctx {tpr:.2} ms; dictionary fresh {td:.2} / reused {tdr:.2} ms");

    // Pitfall: load_dictionary (auto) parses a base that begins with the dictionary magic.
    let mut magic = vec![0x37, 0xA4, 0x30, 0xEC];
    magic.extend_from_slice(&old);
    let mut c2 = CCtx::create();
    let dm = delta_compress(&mut c2, &magic, &new, L3);
    let mut d2 = DCtx::create();
    assert_eq!(delta_decompress(&mut d2, &magic, &dm, new.len()), new);
    match zstd::bulk::Decompressor::with_dictionary(&magic) {
        Err(e) => println!("base starting with dict magic: ref_prefix ok, Decompressor::with_dictionary fails: {e}"),
        Ok(mut dec) => match dec.decompress(&dm, new.len()) {
            Ok(o) => println!("base with dict magic via with_dictionary: equal={}", o == new),
            Err(e) => println!("base starting with dict magic: ref_prefix ok, with_dictionary decode fails: {e}"),
        },
    }
    match zstd::bulk::Compressor::with_dictionary(3, &magic) {
        Err(e) => println!("  and Compressor::with_dictionary(magic base) fails: {e}"),
        Ok(_) => println!("  Compressor::with_dictionary(magic base) accepted"),
    }

    // How big can a base get before level 3's tables (hashLog 17) forget its start?
    for sz in [200_000usize, 500_000, 1_000_000, 2_000_000] {
        let mut l = g.file(&mut r, sz);
        let o = join(&l);
        edit(&g, &mut r, &mut l);
        let n = join(&l);
        println!("  {} KB file, 1-6 lines: delta L3 {} B, L3+LDM {} B, L12 {} B (whole L3 {} B)", sz / 1000,
            delta(&o, &n, L3).len(), delta(&o, &n, L3_LDM).len(), delta(&o, &n, L12).len(), whole(3, &n).len());
    }
    // Frame header: what window does a delta frame declare?
    let big_old = join(&g.file(&mut r, 5_000_000));
    let mut bl: Vec<String> = String::from_utf8(big_old.clone()).unwrap().lines().map(String::from).collect();
    let i = bl.len() / 2;
    bl[i] = g.line(&mut r);
    let big_new = join(&bl);
    for (name, o) in [("default window", L3_DEFWIN), ("WindowLog fitted", L3), ("LDM", L3_LDM), ("LDM, window not set (27)", DeltaOpts { level: 3, ldm: true, set_window: false })] {
        let t = Instant::now();
        let mut cc = CCtx::create();
        let d = delta_compress(&mut cc, &big_old, &big_new, o);
        let mem = cc.sizeof();
        drop(cc);
        let mut cs = CCtx::create();
        let _ = delta_compress(&mut cs, &old, &new, o);
        println!("  cctx memory after use: 5 MB base {:.1} MB; 150 KB base {:.1} MB", mem as f64 / 1e6, cs.sizeof() as f64 / 1e6);
        drop(cs);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let mut s = DCtx::create();
        // streaming-style check: does a default DCtx accept the declared window?
        let ok = {
            let mut dec = zstd::stream::raw::Decoder::with_ref_prefix(&big_old).unwrap();
            use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
            let mut buf = vec![0u8; big_new.len() + 16];
            let mut inb = InBuffer::around(&d);
            let mut outb = OutBuffer::around(&mut buf[..]);
            dec.run(&mut inb, &mut outb).map(|_| outb.pos()).map_err(|e| e.to_string())
        };
        let _ = &mut s;
        println!("5 MB file, 1 line changed, {name}: delta {} bytes in {ms:.1} ms; streaming decode: {:?}", d.len(), ok.map(|n| n == big_new.len()));
    }
}

// ---------------------------------------------------------------- experiment: session

struct Version {
    content: Vec<u8>,
}

fn tree_bytes(files: &[Vec<u8>]) -> Vec<u8> {
    // postcard-like: version, count, then name, kind, id, size per entry.
    let mut t = vec![1u8, files.len() as u8];
    for (i, f) in files.iter().enumerate() {
        let name = format!("src/module_{i:02}.rs");
        t.push(name.len() as u8);
        t.extend_from_slice(name.as_bytes());
        t.push(0);
        t.extend_from_slice(blake3::hash(f).as_bytes());
        let mut sz = f.len() as u64;
        while sz >= 0x80 {
            t.push((sz as u8) | 0x80);
            sz >>= 7;
        }
        t.push(sz as u8);
    }
    t
}

fn session(run_git: bool) {
    println!("== long session: 12 files 60-200 KB, 300 turns x 3 files x 1-6 lines");
    let mut r = Rng(16);
    let g = Gen::new(&mut r);
    let mut files: Vec<Vec<String>> = (0..12).map(|_| {
        let size = r.range(60_000, 200_000) as usize;
        g.file(&mut r, size)
    }).collect();
    let mut history: Vec<Vec<Version>> = files.iter().map(|f| vec![Version { content: join(f) }]).collect();

    let git = if run_git { Some(Git::new()) } else { None };
    if let Some(git) = &git {
        for (i, h) in history.iter().enumerate() {
            git.write(i, &h[0].content);
        }
        git.commit(0);
    }
    let mut trees = vec![tree_bytes(&history.iter().map(|h| h[0].content.clone()).collect::<Vec<_>>())];

    let cold_raw: u64 = history.iter().map(|h| h[0].content.len() as u64).sum();
    let cold3: u64 = history.iter().map(|h| whole(3, &h[0].content).len() as u64).sum();
    let cold12: u64 = history.iter().map(|h| whole(12, &h[0].content).len() as u64).sum();

    let (mut raw, mut w3, mut w12, mut d3, mut d3l, mut d3dw, mut d12) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut tw3, mut td3, mut td3l) = (0f64, 0f64, 0f64);
    let mut delta_sizes = Vec::new();
    let mut ratio_max = 0f64;
    for turn in 1..=300 {
        let mut picked = Vec::new();
        while picked.len() < 3 {
            let f = r.below(12) as usize;
            if !picked.contains(&f) {
                picked.push(f);
            }
        }
        for &f in &picked {
            edit(&g, &mut r, &mut files[f]);
            let new = join(&files[f]);
            let old = &history[f].last().unwrap().content;
            raw += new.len() as u64;
            let t = Instant::now();
            let a = whole(3, &new).len() as u64;
            tw3 += t.elapsed().as_secs_f64();
            w3 += a;
            w12 += whole(12, &new).len() as u64;
            let t = Instant::now();
            let b = delta(old, &new, L3);
            td3 += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let c = delta(old, &new, L3_LDM).len() as u64;
            td3l += t.elapsed().as_secs_f64();
            d3dw += delta(old, &new, L3_DEFWIN).len() as u64;
            d12 += delta(old, &new, L12).len() as u64;
            assert_eq!(undelta(old, &b, new.len()), new);
            d3 += b.len() as u64;
            d3l += c;
            delta_sizes.push(b.len());
            ratio_max = ratio_max.max(b.len() as f64 / a as f64);
            if let Some(git) = &git {
                git.write(f, &new);
            }
            history[f].push(Version { content: new });
        }
        trees.push(tree_bytes(&history.iter().map(|h| h.last().unwrap().content.clone()).collect::<Vec<_>>()));
        if let Some(git) = &git {
            git.commit(turn);
        }
    }
    let n = delta_sizes.len();
    delta_sizes.sort();
    println!("cold capture: raw {} ; L3 {} ; L12 {}", kb(cold_raw), kb(cold3), kb(cold12));
    println!("900 new versions, raw {}:", kb(raw));
    println!("  (a) whole L3           {:>10}   ({:.2} ms/version)", kb(w3), tw3 * 1e3 / n as f64);
    println!("  (a') whole L12 (dense) {:>10}", kb(w12));
    println!("  (b) delta L3 prefix    {:>10}   ({:.2} ms/version) = {:.1}% of (a), {:.0}x smaller", kb(d3), td3 * 1e3 / n as f64, 100.0 * d3 as f64 / w3 as f64, w3 as f64 / d3 as f64);
    println!("  (b') delta L3, window not set {:>10}", kb(d3dw));
    println!("  (b'') delta L12 prefix {:>10}", kb(d12));
    println!("  (c) delta L3 + LDM     {:>10}   ({:.2} ms/version)", kb(d3l), td3l * 1e3 / n as f64);
    println!("  delta size p10/p50/p90/max: {} {} {} {} bytes; worst delta/whole ratio {:.3}", delta_sizes[n / 10], delta_sizes[n / 2], delta_sizes[n * 9 / 10], delta_sizes[n - 1], ratio_max);

    // Trees (301 of them): whole vs delta against the previous tree.
    let tw: u64 = trees.iter().map(|t| whole(3, t).len() as u64).sum();
    let td: u64 = trees.windows(2).map(|p| delta(&p[0], &p[1], L3).len() as u64).sum::<u64>() + whole(3, &trees[0]).len() as u64;
    println!("trees: {} raw each, 301 whole L3 {} ; as deltas {}", trees[0].len(), kb(tw), kb(td));

    // Chain caps over the session's histories.
    println!("-- chain caps over the session (per path: full, then deltas; full again at depth K)");
    for cap in [10usize, 25, 50, 100, usize::MAX] {
        let mut total = 0u64;
        let mut fulls = 0;
        for h in &history {
            let mut depth = 0;
            for (i, v) in h.iter().enumerate() {
                if i == 0 || depth + 1 >= cap {
                    total += whole(3, &v.content).len() as u64;
                    depth = 0;
                    fulls += 1;
                } else {
                    total += delta(&h[i - 1].content, &v.content, L3).len() as u64;
                    depth += 1;
                }
            }
        }
        let capn = if cap == usize::MAX { "none".to_string() } else { cap.to_string() };
        println!("  cap {capn:>4}: {fulls:>3} fulls, file objects total {} (incl. cold)", kb(total));
    }
    // Rebase: at the cap, delta against the chain's full root instead (depth back to 1);
    // a full only when that delta is not clearly smaller (< 1/4 of whole).
    for cap in [10usize, 25, 50] {
        let (mut total, mut fulls, mut rebases, mut rebase_bytes) = (0u64, 0, 0, 0u64);
        for h in &history {
            let (mut root, mut depth) = (0usize, 0usize);
            for (i, v) in h.iter().enumerate() {
                if i == 0 {
                    total += whole(3, &v.content).len() as u64;
                    fulls += 1;
                } else if depth + 1 < cap {
                    total += delta(&h[i - 1].content, &v.content, L3).len() as u64;
                    depth += 1;
                } else {
                    let d = delta(&h[root].content, &v.content, L3).len() as u64;
                    let w = whole(3, &v.content).len() as u64;
                    if d * 4 < w {
                        total += d;
                        rebases += 1;
                        rebase_bytes += d;
                        depth = 1;
                    } else {
                        total += w;
                        fulls += 1;
                        root = i;
                        depth = 0;
                    }
                }
            }
        }
        println!("  cap {cap:>4} + rebase-to-root: {fulls} fulls, {rebases} rebased deltas (avg {} B), total {}", rebase_bytes / rebases.max(1) as u64, kb(total));
    }
    // Star: every delta against the last full version of the path (read depth <= 1).
    for cap in [25usize, 50, 100] {
        let mut total = 0u64;
        for h in &history {
            let mut key = 0;
            for (i, v) in h.iter().enumerate() {
                let d = if i == 0 { None } else { Some(delta(&h[key].content, &v.content, L3)) };
                match d {
                    Some(d) if i - key < cap && d.len() * 4 < whole(3, &v.content).len() => total += d.len() as u64,
                    _ => {
                        total += whole(3, &v.content).len() as u64;
                        key = i;
                    }
                }
            }
        }
        println!("  star (delta vs last full, full every {cap}): total {}", kb(total));
    }
    let versions: usize = history.iter().map(|h| h.len()).sum();
    println!("versions per path: {:?} (total {versions})", history.iter().map(|h| h.len()).collect::<Vec<_>>());

    if let Some(git) = &git {
        git.report();
    }
}

struct Git {
    dir: String,
    wt: String,
}
impl Git {
    fn new() -> Git {
        let base = "/tmp/delta-lab/git-run";
        let _ = std::fs::remove_dir_all(base);
        let dir = format!("{base}/gitdir");
        let wt = format!("{base}/wt");
        std::fs::create_dir_all(format!("{wt}/src")).unwrap();
        let g = Git { dir, wt };
        g.run(&["init", "-q"]);
        g
    }
    fn run(&self, args: &[&str]) -> String {
        let o = std::process::Command::new("git")
            .args(["-c", "user.name=lab", "-c", "user.email=lab@x", "-c", "gc.auto=0", "-c", "commit.gpgsign=false"])
            .args(args)
            .env("GIT_DIR", &self.dir)
            .env("GIT_WORK_TREE", &self.wt)
            .current_dir(&self.wt)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    fn write(&self, i: usize, c: &[u8]) {
        std::fs::write(format!("{}/src/module_{i:02}.rs", self.wt), c).unwrap();
    }
    fn commit(&self, turn: usize) {
        self.run(&["add", "-A"]);
        self.run(&["commit", "-q", "-m", &format!("turn {turn}")]);
    }
    fn du(&self) -> u64 {
        let o = std::process::Command::new("du").args(["-sb", &format!("{}/objects", self.dir)]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).split_whitespace().next().unwrap().parse().unwrap()
    }
    fn report(&self) {
        let before = self.du();
        self.run(&["gc", "-q"]);
        let after = self.du();
        println!("git objects/: before gc {} ; after git gc {}", kb(before), kb(after));
    }
}

// ---------------------------------------------------------------- experiment: chain depth

fn chain() {
    println!("== chain depth: one 200 KB file, 300 versions, each delta vs the previous");
    let mut r = Rng(300);
    let g = Gen::new(&mut r);
    let mut lines = g.file(&mut r, 200_000);
    let mut versions = vec![join(&lines)];
    for _ in 0..300 {
        edit(&g, &mut r, &mut lines);
        versions.push(join(&lines));
    }
    let full0 = whole(3, &versions[0]);
    let deltas: Vec<Vec<u8>> = versions.windows(2).map(|p| delta(&p[0], &p[1], L3)).collect();
    let sizes: Vec<usize> = versions.iter().map(|v| v.len()).collect();
    let ids: Vec<blake3::Hash> = versions.iter().map(|v| blake3::hash(v)).collect();

    // Reconstruct version `depth` from the full base, verifying each link's blake3 id
    // (as retrace verifies every object it reads).
    let reconstruct = |from_full: usize, depth: usize, verify: bool| -> Vec<u8> {
        let full = if from_full == 0 { full0.clone() } else { whole(3, &versions[from_full]) };
        let mut cur = zstd::bulk::decompress(&full, sizes[from_full]).unwrap();
        for k in from_full + 1..=from_full + depth {
            let next = undelta(&cur, &deltas[k - 1], sizes[k]);
            if verify {
                assert_eq!(blake3::hash(&next), ids[k]);
            }
            cur = next;
        }
        cur
    };
    // A shared 1 MiB frame (what a small delta object would sit in today).
    let frame_raw: Vec<u8> = versions.iter().flat_map(|v| v.iter().copied()).take(1 << 20).collect();
    let frame = whole(3, &frame_raw);
    let tframe = time(30, || {
        std::hint::black_box(zstd::bulk::decompress(&frame, 1 << 20).unwrap());
    });
    let tfull = time(30, || {
        std::hint::black_box(reconstruct(0, 0, true));
    });
    println!("read full 200 KB version (decompress + blake3): {tfull:.3} ms; decompress one shared 1 MiB L3 frame: {tframe:.3} ms");
    for depth in [1usize, 10, 50, 100, 300] {
        let t = time(7, || {
            let v = reconstruct(0, depth, true);
            assert_eq!(v, versions[depth]);
        });
        let tn = time(7, || {
            std::hint::black_box(reconstruct(0, depth, false));
        });
        println!("  depth {depth:>3}: {t:>7.2} ms verified ({tn:.2} ms unverified); + {:.1} ms if each link decompresses its own shared 1 MiB frame",
            depth as f64 * tframe);
    }
    let td: usize = deltas.iter().map(|d| d.len()).sum();
    println!("chain bytes: full {} + 300 deltas {} (avg {} B)", full0.len(), td, td / 300);
    for k in [10usize, 25, 50, 100] {
        // full every k versions: versions 0, k, 2k, ... stored whole
        let mut total = 0usize;
        for i in 0..=300 {
            total += if i % k == 0 { whole(3, &versions[i]).len() } else { deltas[i - 1].len() };
        }
        // worst case: depth k-1
        let base = (300 / k - 1) * k;
        let t = time(7, || {
            std::hint::black_box(reconstruct(base, k - 1, true));
        });
        println!("  full every {k:>3}: total {} for 301 versions; worst read (depth {}) {t:.2} ms", kb(total as u64), k - 1);
    }
    // Rebase-to-root on the single 300-version chain (full when not < 1/4 of whole).
    for k in [10usize, 25, 50] {
        let (mut total, mut depth, mut root, mut fulls) = (full0.len(), 0usize, 0usize, 1);
        let mut maxd = 0;
        for i in 1..=300 {
            if depth + 1 < k {
                total += deltas[i - 1].len();
                depth += 1;
            } else {
                let d = delta(&versions[root], &versions[i], L3).len();
                let w = whole(3, &versions[i]).len();
                if d * 4 < w {
                    total += d;
                    maxd = maxd.max(d);
                    depth = 1;
                } else {
                    total += w;
                    fulls += 1;
                    root = i;
                    depth = 0;
                }
            }
        }
        println!("  cap {k:>3} + rebase-to-root: total {}, {fulls} fulls, largest rebased delta {maxd} B; worst depth {}", kb(total as u64), k - 1);
    }
    for dist in [10usize, 50, 100, 200, 300] {
        println!("    delta of v{dist} vs v0: {} B (whole {} B)", delta(&versions[0], &versions[dist], L3).len(), whole(3, &versions[dist]).len());
    }
    // Capture cost: before writing a delta, capture must have the base's bytes.
    let t = time(20, || {
        std::hint::black_box(delta(&versions[299], &versions[300], L3));
    });
    let tw = time(20, || {
        std::hint::black_box(whole(3, &versions[300]));
    });
    println!("capture: whole L3 {tw:.2} ms, delta L3 {t:.2} ms (+ reading the base: depth-d reconstruct above unless cached)");
}

// ---------------------------------------------------------------- experiment: chunked

fn chunks(data: &[u8]) -> Vec<(usize, usize)> {
    fastcdc::v2020::FastCDC::new(data, CHUNK_MIN, CHUNK_AVG, CHUNK_MAX).map(|c| (c.offset, c.length)).collect()
}

fn chunk() {
    println!("== 5 MB file, FastCDC 64K/256K/1M, one line changed per trial (20 cumulative trials)");
    let mut r = Rng(5);
    let g = Gen::new(&mut r);
    let mut lines = g.file(&mut r, 5_000_000);
    let (mut n_new, mut whole_b, mut d_one, mut d_span, mut d_file, mut d_file_ldm, mut d_file_dw) = (0, 0, 0, 0, 0, 0, 0);
    let (mut t_chunk, mut t_file, mut t_file_ldm, mut t_read_chunk, mut t_read_file) = (0f64, 0f64, 0f64, 0f64, 0f64);
    let trials = 20;
    for _ in 0..trials {
        let old = join(&lines);
        let oc = chunks(&old);
        let i = r.below(lines.len() as u64) as usize;
        lines[i] = g.line(&mut r);
        let new = join(&lines);
        let nc = chunks(&new);
        let old_set: std::collections::HashSet<&[u8]> = oc.iter().map(|&(o, l)| &old[o..o + l]).collect();
        for &(o, l) in &nc {
            let c = &new[o..o + l];
            if old_set.contains(c) {
                continue;
            }
            n_new += 1;
            whole_b += whole(3, c).len();
            // old chunks overlapping [o, o+l) in old coordinates
            let ov: Vec<&(usize, usize)> = oc.iter().filter(|&&(oo, ol)| oo < o + l && o < oo + ol).collect();
            let best = ov.iter().max_by_key(|&&&(oo, ol)| (o + l).min(oo + ol) - o.max(oo)).unwrap();
            let base = &old[best.0..best.0 + best.1];
            let t = Instant::now();
            let d = delta(base, c, L3);
            t_chunk += t.elapsed().as_secs_f64();
            let t = Instant::now();
            assert_eq!(undelta(base, &d, c.len()), c);
            t_read_chunk += t.elapsed().as_secs_f64();
            d_one += d.len();
            let s = ov.first().unwrap().0;
            let e = ov.last().map(|&&(oo, ol)| oo + ol).unwrap();
            d_span += delta(&old[s..e], c, L3).len();
        }
        let t = Instant::now();
        let d = delta(&old, &new, L3);
        t_file += t.elapsed().as_secs_f64();
        d_file += d.len();
        let t = Instant::now();
        assert_eq!(undelta(&old, &d, new.len()), new);
        t_read_file += t.elapsed().as_secs_f64();
        let t = Instant::now();
        d_file_ldm += delta(&old, &new, L3_LDM).len();
        t_file_ldm += t.elapsed().as_secs_f64();
        d_file_dw += delta(&old, &new, L3_DEFWIN).len();
    }
    let f = trials as f64;
    let n = chunks(&join(&lines)).len();
    println!("chunks in file: {n}; new chunks per one-line edit: {:.2}", n_new as f64 / f);
    println!("per edit: new chunk(s) whole L3 {:.0} B ; delta vs replaced chunk {:.0} B ({:.2} ms, read {:.2} ms) ; delta vs overlapping span {:.0} B",
        whole_b as f64 / f, d_one as f64 / f, t_chunk * 1e3 / f, t_read_chunk * 1e3 / f, d_span as f64 / f);
    println!("per edit, unchunked whole-file delta: {:.0} B ({:.1} ms, read {:.1} ms) ; with LDM {:.0} B ({:.1} ms) ; window not set {:.0} B",
        d_file as f64 / f, t_file * 1e3 / f, t_read_file * 1e3 / f, d_file_ldm as f64 / f, t_file_ldm * 1e3 / f, d_file_dw as f64 / f);
    let fw = whole(3, &join(&lines)).len();
    println!("whole 5 MB file L3: {fw} B");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map(String::as_str).unwrap_or("all");
    let git = args.iter().any(|a| a == "--git");
    if what == "api" || what == "all" {
        api();
    }
    if what == "session" || what == "all" {
        session(git);
    }
    if what == "chain" || what == "all" {
        chain();
    }
    if what == "chunk" || what == "all" {
        chunk();
    }
}
