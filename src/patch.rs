//! Unified diffs of file contents between two states (`retrace diff -p`), printed as
//! `git diff` prints them: a `diff --git` header with mode lines, `index`, `---`/`+++`, and
//! hunks with 3 lines of context (the `similar` crate's line diff). Binary files (a NUL in
//! their first 8000 bytes, git's test, or not UTF-8) are named, not printed.

use std::fmt::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use serde::Serialize;

use crate::object::FlatEntry;
use crate::error::StoreError;
use crate::object::{EntryKind, show_path};
use crate::store::StoreReader;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// How many leading bytes git looks at for a NUL to call a file binary.
const BINARY_PROBE: usize = 8000;

/// The patch of one path.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FilePatch {
    /// The path, relative to the workspace root.
    pub path: String,
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
    /// The content is binary: `text` names it instead of showing it.
    pub binary: bool,
    /// The patch text, headers included, each line ending in a newline.
    pub text: String,
}

/// Where the content of a side comes from: the store, or the disk for the paths whose
/// version the store lacks (a diff against the disk).
#[derive(Clone, Copy)]
pub(crate) struct Sides<'a> {
    pub reader: &'a StoreReader,
    /// The workspace root when the new side is the disk.
    pub disk: Option<&'a Path>,
}

fn mode(kind: EntryKind) -> Option<&'static str> {
    match kind {
        EntryKind::File => Some("100644"),
        EntryKind::Executable => Some("100755"),
        EntryKind::Symlink => Some("120000"),
        EntryKind::Dir | EntryKind::NestedRepo => None,
    }
}

/// The bytes of one side: from the store, else (the new side of a diff against the disk)
/// from the file itself; `Err` names why they cannot be read.
fn content(sides: Sides<'_>, e: &FlatEntry, new_side: bool) -> Result<Vec<u8>, String> {
    match sides.reader.read_blob(&e.id) {
        Ok(bytes) => Ok(bytes),
        Err(StoreError::Missing { .. }) if new_side && sides.disk.is_some() => {
            let path = crate::capture::abs_path(sides.disk.unwrap_or(Path::new(".")), &e.path);
            let read = if e.kind == EntryKind::Symlink {
                std::fs::read_link(&path).map(|t| t.as_os_str().as_bytes().to_vec())
            } else {
                std::fs::read(&path)
            };
            read.map_err(|x| format!("{}: {x}", path.display()))
        }
        Err(x) => Err(x.to_string()),
    }
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_PROBE)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

/// The patches of one changed path (`old` and `new` are its entries on each side, `None`
/// where it is absent): none for directories, two when a file became a symlink or back (git
/// shows that as a deletion and an addition), else one.
pub(crate) fn patches(
    sides: Sides<'_>,
    old: Option<&FlatEntry>,
    new: Option<&FlatEntry>,
) -> Vec<FilePatch> {
    let link = |e: Option<&FlatEntry>| e.map(|e| e.kind == EntryKind::Symlink);
    if let (Some(o), Some(n)) = (old, new)
        && link(old) != link(new)
        && mode(o.kind).is_some()
        && mode(n.kind).is_some()
    {
        let mut out = patches(sides, old, None);
        out.extend(patches(sides, None, new));
        return out;
    }
    let old = old.filter(|e| mode(e.kind).is_some());
    let new = new.filter(|e| mode(e.kind).is_some());
    let Some(any) = new.or(old) else {
        return Vec::new();
    };
    vec![one(sides, old, new, &show_path(&any.path))]
}

fn one(
    sides: Sides<'_>,
    old: Option<&FlatEntry>,
    new: Option<&FlatEntry>,
    path: &str,
) -> FilePatch {
    let mut text = format!("diff --git a/{path} b/{path}\n");
    let old_mode = old.and_then(|e| mode(e.kind));
    let new_mode = new.and_then(|e| mode(e.kind));
    match (old_mode, new_mode) {
        (None, Some(m)) => text.push_str(&["new file mode ", m, "\n"].concat()),
        (Some(m), None) => text.push_str(&["deleted file mode ", m, "\n"].concat()),
        (Some(a), Some(b)) if a != b => {
            text.push_str(&["old mode ", a, "\nnew mode ", b, "\n"].concat());
        }
        _ => {}
    }
    let short = |e: Option<&FlatEntry>| {
        e.map_or_else(|| "0000000".into(), |e| e.id.to_hex()[..7].to_string())
    };
    let same_mode = match (old_mode, new_mode) {
        (Some(a), Some(b)) if a == b => format!(" {a}"),
        _ => String::new(),
    };
    let unchanged = old.zip(new).is_some_and(|(a, b)| a.id == b.id);
    let mut patch = FilePatch {
        path: path.to_string(),
        added: 0,
        removed: 0,
        binary: false,
        text: String::new(),
    };
    if unchanged {
        // A mode change only.
        patch.text = text;
        return patch;
    }
    let _ = writeln!(text, "index {}..{}{same_mode}", short(old), short(new));
    let read = |e: Option<&FlatEntry>, new_side: bool| match e {
        Some(e) => content(sides, e, new_side),
        None => Ok(Vec::new()),
    };
    let (a, b) = match (read(old, false), read(new, true)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(why), _) | (_, Err(why)) => {
            let _ = writeln!(text, "(content unreadable: {why})");
            patch.text = text;
            return patch;
        }
    };
    let (from, to) = (
        old.map_or_else(|| "/dev/null".to_string(), |_| format!("a/{path}")),
        new.map_or_else(|| "/dev/null".to_string(), |_| format!("b/{path}")),
    );
    match (std::str::from_utf8(&a), std::str::from_utf8(&b)) {
        (Ok(sa), Ok(sb)) if !is_binary(&a) && !is_binary(&b) => {
            let diff = similar::TextDiff::from_lines(sa, sb);
            for c in diff.iter_all_changes() {
                match c.tag() {
                    similar::ChangeTag::Insert => patch.added += 1,
                    similar::ChangeTag::Delete => patch.removed += 1,
                    similar::ChangeTag::Equal => {}
                }
            }
            text += &diff
                .unified_diff()
                .context_radius(CONTEXT)
                .header(&from, &to)
                .to_string();
        }
        _ => {
            patch.binary = true;
            let _ = writeln!(text, "Binary files {from} and {to} differ");
        }
    }
    patch.text = text;
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_is_a_nul_early_or_invalid_utf8() {
        assert!(!is_binary(b"plain text\n"));
        assert!(is_binary(b"a\0b"));
        assert!(is_binary(&[0xff, 0xfe]));
        // Past the probe a NUL is not looked for (git's rule).
        let mut late = vec![b'a'; BINARY_PROBE];
        late.push(0);
        assert!(!is_binary(&late));
    }
}
