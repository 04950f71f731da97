//! Workspace-relative paths as a type.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use super::show_path;

/// A path relative to the workspace root: its bytes, `/`-separated, no leading or trailing
/// `/`, not necessarily UTF-8 (the empty path is the root). Ordered, compared and hashed
/// as its bytes, so sorted lists of them are in byte order and a `HashSet<RelPath>` can be
/// asked about a `&[u8]`. Shown by the one rule of `show_path`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath(Vec<u8>);

impl RelPath {
    /// The path of these bytes (copied).
    #[must_use]
    pub fn from_bytes(bytes: &[u8]) -> RelPath {
        RelPath(bytes.to_vec())
    }

    /// The path's bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The path's bytes, taken.
    #[must_use]
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    /// The path `name` inside this directory (`name` itself when this is the root).
    #[must_use]
    pub fn join(&self, name: &[u8]) -> RelPath {
        if self.0.is_empty() {
            return RelPath::from_bytes(name);
        }
        let mut path = Vec::with_capacity(self.0.len() + 1 + name.len());
        path.extend_from_slice(&self.0);
        path.push(b'/');
        path.extend_from_slice(name);
        RelPath(path)
    }

    /// How the path is shown in messages and JSON (see `show_path`).
    #[must_use]
    pub fn show(&self) -> String {
        show_path(&self.0)
    }
}

impl From<Vec<u8>> for RelPath {
    fn from(bytes: Vec<u8>) -> RelPath {
        RelPath(bytes)
    }
}

impl From<&[u8]> for RelPath {
    fn from(bytes: &[u8]) -> RelPath {
        RelPath::from_bytes(bytes)
    }
}

impl From<&str> for RelPath {
    fn from(path: &str) -> RelPath {
        RelPath::from_bytes(path.as_bytes())
    }
}

impl From<RelPath> for Vec<u8> {
    fn from(path: RelPath) -> Vec<u8> {
        path.0
    }
}

impl Deref for RelPath {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for RelPath {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Borrow<[u8]> for RelPath {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

/// Lossy, as [`RelPath::show`] (without allocating when the path is UTF-8).
impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl PartialEq<[u8]> for RelPath {
    fn eq(&self, other: &[u8]) -> bool {
        self.0 == other
    }
}

impl PartialEq<&[u8]> for RelPath {
    fn eq(&self, other: &&[u8]) -> bool {
        self.0 == *other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for RelPath {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.0 == other
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for RelPath {
    fn eq(&self, other: &&[u8; N]) -> bool {
        self.0 == *other
    }
}

impl PartialEq<RelPath> for [u8] {
    fn eq(&self, other: &RelPath) -> bool {
        self == other.0.as_slice()
    }
}

impl PartialEq<RelPath> for &[u8] {
    fn eq(&self, other: &RelPath) -> bool {
        *self == other.0.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::RelPath;

    #[test]
    fn orders_hashes_and_shows_as_its_bytes() {
        let mut v: Vec<RelPath> = ["a/b", "a", "a.b", "a/"].map(RelPath::from).into();
        v.sort();
        let bytes: Vec<&[u8]> = v.iter().map(RelPath::as_bytes).collect();
        assert_eq!(bytes, vec![&b"a"[..], b"a.b", b"a/", b"a/b"]);
        let set: HashSet<RelPath> = v.into_iter().collect();
        assert!(set.contains(&b"a.b"[..]));
        let odd = RelPath::from(b"x/\xff".to_vec());
        assert_eq!(odd.show(), "x/\u{fffd}");
        assert_eq!(odd.to_string(), odd.show());
        assert_eq!(RelPath::default().join(b"a").join(b"b"), *b"a/b");
    }
}
