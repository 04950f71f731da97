//! Bundles: one session and every object its snapshots hold, in one self-contained file
//! (`retrace bundle` / `retrace unbundle`). The layout is in `docs/format.md` ("Bundles"):
//!
//! ```text
//! header  "RTBUNDLE" · u32 LE version (1) · u32 LE flags (0)
//! body    one zstd frame of records: u8 tag · LEB128 length · bytes
//!           1 session (postcard SessionImage after a version byte), first and once
//!           2 tree (its encoding)   3 blob (a file's whole content)   0 end (empty), last
//! trailer u64 LE length of the body uncompressed · 32-byte blake3 of header + body
//! ```
//!
//! Unbundling reads the file twice: the first pass checks everything (the checksum, every
//! record, every object's id by hashing it, every tree's entries present, every snapshot
//! the session names present) and writes nothing; only then does the second store the
//! objects and record the session.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::image::{self, Imported, SessionImage};
use super::sink::ObjectSink;
use crate::error::{Error, ShareError};
use crate::object::{EntryKind, ObjectId, Tree};
use crate::store::StoreReader;
use crate::working_copy::WorkingCopy;

/// The first bytes of every bundle.
pub const MAGIC: &[u8; 8] = b"RTBUNDLE";
/// The bundle format this retrace writes and reads.
pub const BUNDLE_VERSION: u32 = 1;
/// Version byte before the session image's postcard encoding.
const IMAGE_VERSION: u8 = 1;
const HEADER_LEN: usize = 16;
const TRAILER_LEN: usize = 40;
/// Where the trailer starts, from the end.
const TRAILER_FROM_END: i64 = -40;

const TAG_END: u8 = 0;
const TAG_SESSION: u8 = 1;
const TAG_TREE: u8 = 2;
const TAG_BLOB: u8 = 3;
/// A blob after the 32-byte id of the previous version of the same path (its delta base on
/// import).
const TAG_BLOB_AFTER: u8 = 4;

/// zstd's level for a bundle's body.
const LEVEL: i32 = 6;
/// zstd's window for a bundle's body (128 MiB), and the most a reader accepts.
const WINDOW_LOG: u32 = 27;

/// What a bundle holds, as its first pass found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The session.
    pub image: SessionImage,
    /// Trees and blobs it holds.
    pub trees: u64,
    /// Blobs it holds.
    pub blobs: u64,
    /// Bytes of the blobs.
    pub blob_bytes: u64,
}

fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&BUNDLE_VERSION.to_le_bytes());
    h
}

/// A bundle being written: the header, then records through zstd, hashed and counted
/// uncompressed; [`BodyWriter::finish`] adds the end record and the trailer.
struct BodyWriter<W: Write> {
    zstd: zstd::stream::write::Encoder<'static, W>,
    hash: blake3::Hasher,
    len: u64,
}

impl<W: Write> BodyWriter<W> {
    /// Writes the header and the session record of `image` to `out`.
    fn new(mut out: W, image: &SessionImage) -> std::io::Result<BodyWriter<W>> {
        let head = header();
        out.write_all(&head)?;
        let mut hash = blake3::Hasher::new();
        hash.update(&head);
        // Versions of one file lie far apart in the stream: a window as wide as a long
        // session's contents, with long-distance matching, finds them.
        let mut zstd = zstd::stream::write::Encoder::new(out, LEVEL)?;
        zstd.long_distance_matching(true)?;
        zstd.window_log(WINDOW_LOG)?;
        let mut w = BodyWriter { zstd, hash, len: 0 };
        let mut encoded = vec![IMAGE_VERSION];
        encoded.extend(postcard::to_allocvec(image).map_err(std::io::Error::other)?);
        w.put(TAG_SESSION, &encoded)?;
        Ok(w)
    }

    fn put(&mut self, tag: u8, bytes: &[u8]) -> std::io::Result<()> {
        self.put_parts(tag, &[bytes])
    }

    /// A record whose bytes are `parts` end to end (written as they are, not joined).
    fn put_parts(&mut self, tag: u8, parts: &[&[u8]]) -> std::io::Result<()> {
        let mut head = vec![tag];
        let mut n: u64 = parts.iter().map(|p| p.len() as u64).sum();
        while n >= 0x80 {
            // The low 7 bits, with the continuation bit.
            head.push(u8::try_from(n & 0x7f).unwrap_or(0) | 0x80);
            n >>= 7;
        }
        head.push(u8::try_from(n).unwrap_or(0));
        for part in std::iter::once(&head[..]).chain(parts.iter().copied()) {
            self.zstd.write_all(part)?;
            self.hash.update(part);
            self.len += part.len() as u64;
        }
        Ok(())
    }

    /// Ends the body and writes the trailer; the output.
    fn finish(mut self) -> std::io::Result<W> {
        self.put(TAG_END, &[])?;
        let mut out = self.zstd.finish()?;
        out.write_all(&self.len.to_le_bytes())?;
        out.write_all(self.hash.finalize().as_bytes())?;
        Ok(out)
    }
}

/// A bundle of `image` holding `trees` and `blobs`, in memory: the fuzz corpus's seed and
/// the tests' (a real bundle comes from [`write`], which shares this code).
///
/// # Errors
/// An `image` postcard cannot encode.
#[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
pub fn encode(image: &SessionImage, trees: &[Tree], blobs: &[Vec<u8>]) -> std::io::Result<Vec<u8>> {
    let mut w = BodyWriter::new(Vec::new(), image)?;
    for t in trees {
        w.put(TAG_TREE, &t.encode())?;
    }
    for b in blobs {
        w.put(TAG_BLOB, b)?;
    }
    w.finish()
}

/// The snapshots `image` names, in the order the session made them (turn by turn: before,
/// its steps', after; then the checkpoints), each once.
fn in_order(image: &SessionImage) -> Vec<ObjectId> {
    let mut out = Vec::new();
    for t in &image.turns {
        out.extend(t.record.before);
        for s in &t.steps {
            out.extend(s.before);
            out.extend(s.after);
        }
        out.extend(t.record.after);
    }
    out.extend(image.checkpoints.iter().map(|c| c.snapshot));
    let mut seen = HashSet::new();
    out.retain(|id| seen.insert(*id));
    out
}

/// What [`crate::Workspace::bundle`] wrote.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Bundled {
    /// Turns in the bundle.
    pub turns: u64,
    /// Checkpoints in the bundle.
    pub checkpoints: u64,
    /// Trees and blobs in it.
    pub objects: u64,
    /// The file's size.
    pub bytes: u64,
}

/// Writes `image` and every object its snapshots hold from `reader` to `path` (through a
/// temporary file beside it, renamed into place when complete).
///
/// # Errors
/// [`ShareError::Io`] when the file cannot be written; [`Error::Store`] for an object that
/// cannot be read.
pub fn write(reader: &StoreReader, image: &SessionImage, path: &Path) -> Result<Bundled, Error> {
    // Beside it, a name of this process's own, created new: never a file of the user's.
    let tmp = path.with_file_name(format!(
        ".{}.{}.retrace-partial",
        path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        std::process::id()
    ));
    let io = |source| ShareError::Io {
        path: tmp.clone(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(io)?;
    // From here on the temporary file is ours, removed on any failure.
    let result = (|| -> Result<Bundled, Error> {
        let mut w = BodyWriter::new(BufWriter::new(file), image).map_err(io)?;
        let mut objects = 0u64;
        // Trees, each once.
        let mut seen = HashSet::new();
        let mut stack: Vec<ObjectId> = image.snapshots();
        while let Some(t) = stack.pop() {
            if !seen.insert(t) {
                continue;
            }
            let tree = reader.read_tree(&t)?;
            w.put(TAG_TREE, &tree.encode()).map_err(io)?;
            objects += 1;
            stack.extend(
                tree.entries
                    .iter()
                    .filter(|e| e.kind == EntryKind::Dir)
                    .map(|e| e.id),
            );
        }
        // File contents in the order the session made them, each after the 32-byte id of
        // the version of its path before it: snapshots in turn order, each read as what
        // changed since the one before.
        let mut last: HashMap<Vec<u8>, ObjectId> = HashMap::new();
        let mut prev: Option<ObjectId> = None;
        for snap in in_order(image) {
            let entries = match prev {
                Some(p) if p == snap => continue,
                Some(p) => crate::diff::changes(reader, &p, &snap)?
                    .into_iter()
                    .filter_map(|c| c.new)
                    .collect(),
                None => crate::diff::flatten(reader, &snap)?,
            };
            prev = Some(snap);
            for e in entries.into_iter().filter(|e| e.kind.is_content()) {
                let path = e.path.into_bytes();
                if seen.insert(e.id) {
                    let data = reader.read_blob(&e.id)?;
                    match last.get(&path) {
                        Some(before) => w.put_parts(TAG_BLOB_AFTER, &[&before.0, &data]),
                        None => w.put(TAG_BLOB, &data),
                    }
                    .map_err(io)?;
                    objects += 1;
                }
                last.insert(path, e.id);
            }
        }
        let file = w.finish().map_err(io)?;
        let file = file.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        let bytes = file.metadata().map_err(io)?.len();
        drop(file);
        std::fs::rename(&tmp, path).map_err(|source| ShareError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Bundled {
            turns: image.turns.len() as u64,
            checkpoints: image.checkpoints.len() as u64,
            objects,
            bytes,
        })
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// One record of a bundle's body, as [`scan`] hands it on.
enum Record<'r> {
    Session(SessionImage),
    Tree(ObjectId, Tree),
    /// A blob's content, `len` bytes, to read (what is left unread, [`scan`] skips), and the
    /// previous version of its path when the bundle names it; its id follows as
    /// [`Record::BlobId`] once all of it was read.
    Blob(&'r mut dyn Read, u64, Option<ObjectId>),
    BlobId(ObjectId, u64),
}

/// Why a bundle is refused (the caller names the file).
type Refusal = String;

/// Largest session or tree record read whole; blobs are streamed.
const MAX_RECORD: u64 = 256 << 20;

/// Reads a LEB128 length.
fn read_len(r: &mut impl Read) -> Result<u64, Refusal> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let mut b = [0u8];
        r.read_exact(&mut b).map_err(|e| ended(&e))?;
        n |= u64::from(b[0] & 0x7f) << shift;
        if b[0] & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err("a record length is malformed".into())
}

fn ended(e: &std::io::Error) -> Refusal {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        "it ends early (truncated?)".into()
    } else {
        format!("it does not decompress ({e})")
    }
}

/// Reads the header; refuses another kind of file, or a bundle of a newer format.
fn check_header(h: &[u8]) -> Result<(), Refusal> {
    if h.len() < HEADER_LEN || &h[..8] != MAGIC {
        return Err("not a retrace bundle (its first bytes are not RTBUNDLE)".into());
    }
    let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if version != BUNDLE_VERSION {
        return Err(format!(
            "bundle format {version}, this retrace reads format {BUNDLE_VERSION}{}",
            if version > BUNDLE_VERSION { "; upgrade retrace" } else { "" }
        ));
    }
    if h[12..16] != [0; 4] {
        return Err("flags this retrace does not know are set".into());
    }
    Ok(())
}

/// A blob's content as it streams out of the body: hashed, its first read error kept (the
/// sink reading it cannot tell a damaged bundle from its own failure; [`scan`] can).
struct BlobBody<'a, R: Read> {
    inner: std::io::Take<&'a mut R>,
    hash: blake3::Hasher,
    failed: Option<std::io::Error>,
}

impl<R: Read> Read for BlobBody<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                self.hash.update(&buf[..n]);
                Ok(n)
            }
            Err(e) => {
                let kept = std::io::Error::new(e.kind(), e.to_string());
                self.failed.get_or_insert(e);
                Err(kept)
            }
        }
    }
}

/// Reads the body (`body`, the compressed bytes after the header), handing each record to
/// `each`, and checks it against `trailer` and the header `head`. Records are checked as
/// they come (trees decoded, blob ids hashed as they stream); the caller must keep nothing
/// unless this answers `Ok(Ok(()))`.
fn scan(
    head: &[u8],
    body: impl Read,
    trailer: &[u8],
    mut each: impl FnMut(Record<'_>) -> Result<(), Error>,
) -> Result<Result<(), Refusal>, Error> {
    if let Err(r) = check_header(head) {
        return Ok(Err(r));
    }
    let Ok(trailer) = <[u8; TRAILER_LEN]>::try_from(trailer) else {
        return Ok(Err("it ends early (truncated?)".into()));
    };
    let mut hash = blake3::Hasher::new();
    hash.update(head);
    let Ok(mut decoder) = zstd::stream::read::Decoder::new(body) else {
        return Ok(Err("its body does not decompress".into()));
    };
    if decoder.window_log_max(WINDOW_LOG).is_err() {
        return Ok(Err("its body does not decompress".into()));
    }
    let mut body = Tee {
        inner: decoder.single_frame(),
        hash: &mut hash,
        len: 0,
    };
    let mut first = true;
    loop {
        let mut tag = [0u8];
        if let Err(e) = body.read_exact(&mut tag) {
            return Ok(Err(ended(&e)));
        }
        let len = match read_len(&mut body) {
            Ok(n) => n,
            Err(r) => return Ok(Err(r)),
        };
        if matches!(tag[0], TAG_BLOB | TAG_BLOB_AFTER) && !first {
            let mut len = len;
            let mut after = None;
            if tag[0] == TAG_BLOB_AFTER {
                let mut id = [0u8; 32];
                if len < 32 {
                    return Ok(Err("it holds a malformed file record".into()));
                }
                if let Err(e) = body.read_exact(&mut id) {
                    return Ok(Err(ended(&e)));
                }
                len -= 32;
                after = Some(ObjectId(id));
            }
            let mut blob = BlobBody {
                inner: (&mut body).take(len),
                hash: blake3::Hasher::new(),
                failed: None,
            };
            each(Record::Blob(&mut blob, len, after))?;
            let rest = std::io::copy(&mut blob, &mut std::io::sink());
            if let Some(e) = blob.failed.take() {
                return Ok(Err(ended(&e)));
            }
            if rest.is_err() || blob.inner.limit() != 0 {
                return Ok(Err("it ends early (truncated?)".into()));
            }
            each(Record::BlobId(ObjectId(*blob.hash.finalize().as_bytes()), len))?;
            continue;
        }
        if len > MAX_RECORD {
            return Ok(Err(format!(
                "it holds a record of {len} bytes, more than a session or a tree can be"
            )));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0).min(1 << 20));
        match (&mut body).take(len).read_to_end(&mut bytes) {
            Ok(n) if n as u64 == len => {}
            Ok(_) => return Ok(Err("it ends early (truncated?)".into())),
            Err(e) => return Ok(Err(ended(&e))),
        }
        let record = match (tag[0], first) {
            (TAG_SESSION, true) => {
                if bytes.first() != Some(&IMAGE_VERSION) {
                    return Ok(Err(format!(
                        "its session record is of version {:?}, this retrace reads {IMAGE_VERSION}",
                        bytes.first()
                    )));
                }
                match postcard::from_bytes::<SessionImage>(&bytes[1..]) {
                    Ok(image) => Record::Session(image),
                    Err(e) => return Ok(Err(format!("its session record does not decode ({e})"))),
                }
            }
            (_, true) => return Ok(Err("it does not begin with a session record".into())),
            (TAG_TREE, false) => match Tree::decode(&bytes) {
                Ok(tree) => Record::Tree(ObjectId::of_tree(&bytes), tree),
                Err(e) => return Ok(Err(format!("it holds a damaged tree ({e})"))),
            },
            (TAG_END, false) if len == 0 => break,
            (t, false) => return Ok(Err(format!("it holds a record of unknown kind {t}"))),
        };
        first = false;
        each(record)?;
    }
    // Nothing may follow the end record inside the frame.
    let mut rest = [0u8];
    match body.read(&mut rest) {
        Ok(0) => {}
        Ok(_) => return Ok(Err("it holds bytes after its end record".into())),
        Err(e) => return Ok(Err(ended(&e))),
    }
    let len = body.len;
    let [l0, l1, l2, l3, l4, l5, l6, l7, sum @ ..] = trailer;
    if u64::from_le_bytes([l0, l1, l2, l3, l4, l5, l6, l7]) != len
        || hash.finalize().as_bytes() != &sum
    {
        return Ok(Err("its checksum does not match (the file is damaged)".into()));
    }
    Ok(Ok(()))
}

/// A reader that hashes and counts what it reads.
struct Tee<'h, R> {
    inner: R,
    hash: &'h mut blake3::Hasher,
    len: u64,
}

impl<R: Read> Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

/// The first pass over a bundle's bytes: everything checked, nothing kept but the session
/// and the counts. Every snapshot the session names must be a tree of the bundle, every
/// directory a tree, every file a blob.
fn check_parts(
    head: &[u8],
    body: impl Read,
    trailer: &[u8],
) -> Result<Result<Checked, Refusal>, Error> {
    let mut image = None;
    let (mut blobs, mut blob_bytes) = (0u64, 0u64);
    let mut trees: HashSet<ObjectId> = HashSet::new();
    let mut contents: HashSet<ObjectId> = HashSet::new();
    let mut dirs_named: HashSet<ObjectId> = HashSet::new();
    let mut files_named: HashSet<ObjectId> = HashSet::new();
    let scanned = scan(head, body, trailer, |r| {
        match r {
            Record::Session(i) => image = Some(i),
            Record::Tree(id, tree) => {
                trees.insert(id);
                for e in tree.entries {
                    if e.kind == EntryKind::Dir {
                        dirs_named.insert(e.id);
                    } else if e.kind.is_content() {
                        files_named.insert(e.id);
                    }
                }
            }
            Record::Blob(..) => {}
            Record::BlobId(id, len) => {
                blobs += 1;
                blob_bytes += len;
                contents.insert(id);
            }
        }
        Ok(())
    })?;
    if let Err(r) = scanned {
        return Ok(Err(r));
    }
    let Some(image) = image else {
        return Ok(Err("it holds no session".into()));
    };
    if let Some(id) = image
        .snapshots()
        .into_iter()
        .chain(dirs_named)
        .find(|id| !trees.contains(id))
    {
        return Ok(Err(format!("it lacks the tree {}", id.to_hex())));
    }
    if let Some(id) = files_named.into_iter().find(|id| !contents.contains(id)) {
        return Ok(Err(format!("it lacks the file content {}", id.to_hex())));
    }
    Ok(Ok(Checked {
        image,
        trees: trees.len() as u64,
        blobs,
        blob_bytes,
    }))
}

/// Checks a whole bundle held in memory: what the fuzz target drives (the file reader is
/// the same code).
///
/// # Errors
/// Why the bundle is refused.
#[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // the fuzz target's
pub fn check_bytes(bytes: &[u8]) -> Result<Checked, String> {
    let split = |n: usize| bytes.len().checked_sub(n);
    let (Some(_), Some(end)) = (split(HEADER_LEN), split(TRAILER_LEN)) else {
        return Err("it ends early (truncated?)".into());
    };
    if end < HEADER_LEN {
        return Err("it ends early (truncated?)".into());
    }
    let head = &bytes[..HEADER_LEN];
    let body = &bytes[HEADER_LEN..end];
    match check_parts(head, body, &bytes[end..]) {
        Ok(r) => r,
        Err(e) => Err(e.to_string()),
    }
}

/// A bundle file's header, a reader of its compressed body, and its trailer.
type Parts<R> = (Vec<u8>, R, Vec<u8>);

/// The header, a reader of the compressed body and the trailer of the bundle at `path`.
fn open_parts(path: &Path) -> Result<Result<Parts<impl Read>, Refusal>, ShareError> {
    let io = |source| ShareError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if len < (HEADER_LEN + TRAILER_LEN) as u64 {
        let mut head = Vec::new();
        f.read_to_end(&mut head).map_err(io)?;
        return Ok(Err(check_header(&head)
            .err()
            .unwrap_or_else(|| "it ends early (truncated?)".into())));
    }
    let mut head = vec![0u8; HEADER_LEN];
    f.read_exact(&mut head).map_err(io)?;
    let mut trailer = vec![0u8; TRAILER_LEN];
    f.seek(SeekFrom::End(TRAILER_FROM_END)).map_err(io)?;
    f.read_exact(&mut trailer).map_err(io)?;
    f.seek(SeekFrom::Start(HEADER_LEN as u64)).map_err(io)?;
    let body = BufReader::new(f).take(len - (HEADER_LEN + TRAILER_LEN) as u64);
    Ok(Ok((head, body, trailer)))
}

/// Checks the bundle at `path` without writing anything.
///
/// # Errors
/// [`ShareError::Bundle`] saying why it is refused; [`ShareError::Io`].
pub fn check(path: &Path) -> Result<Checked, Error> {
    let refused = |detail| ShareError::Bundle {
        path: path.to_path_buf(),
        detail,
    };
    let (head, body, trailer) = open_parts(path)?.map_err(refused)?;
    Ok(check_parts(&head, body, &trailer)?.map_err(refused)?)
}

/// Unbundles `path` into `wc`: checks it whole first ([`check`]), then stores its objects
/// and records its session (renamed `as_name` when given; [`image::install`]).
///
/// # Errors
/// As [`check`] (nothing written then); as [`image::install`].
pub fn unbundle(wc: &WorkingCopy, path: &Path, as_name: Option<&str>) -> Result<Imported, Error> {
    let checked = check(path)?;
    // A session that would be refused is refused before anything is stored.
    image::precheck(wc, &checked.image, as_name)?;
    let refused = |detail| ShareError::Bundle {
        path: path.to_path_buf(),
        detail,
    };
    let (head, body, trailer) = open_parts(path)?.map_err(refused)?;
    let mut sink = ObjectSink::new(wc.store())?;
    let scanned = scan(&head, body, &trailer, |r| {
        match r {
            Record::Session(_) | Record::BlobId(..) => {}
            Record::Tree(_, tree) => {
                sink.tree(&tree)?;
            }
            // A read error is the bundle's, which `scan` reports.
            Record::Blob(data, len, after) => {
                let _ = sink.blob_from(data, len, after)?;
            }
        }
        Ok(())
    })?;
    // The file changed between the two passes.
    scanned.map_err(refused)?;
    sink.finish()?;
    image::install(wc, checked.image, as_name)
}

#[cfg(test)]
#[path = "bundle_tests.rs"]
mod tests;
