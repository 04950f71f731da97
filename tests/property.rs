//! Property test against a model: random trees (nested directories, empty files, binary and
//! big files, symlinks, executable bits, unicode names) are captured, mutated, and restored
//! byte-identically, in both directions.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use crate::common::{self, Env, assert_verified, tree_of};
use proptest::prelude::*;
use retrace::RestoreOptions;

const NAMES: &[&str] = &[
    "a", "b", "ü", "日本", "sp ace", ".hid", "x.txt", "-dash", "ñ.rs", "Z",
];

#[derive(Clone, Debug)]
enum Spec {
    File { content: Content, exec: bool },
    Symlink(String),
    EmptyDir,
}

#[derive(Clone, Debug)]
enum Content {
    Empty,
    Text(String),
    Binary(Vec<u8>),
    /// A big file (chunked): `len` bytes of a seeded pattern.
    Big {
        seed: u8,
        len: usize,
    },
}

impl Content {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Content::Empty => Vec::new(),
            Content::Text(t) => t.clone().into_bytes(),
            Content::Binary(b) => b.clone(),
            Content::Big { seed, len } => {
                let mut x = u32::from(*seed) + 1;
                (0..*len)
                    .map(|i| {
                        if i % 4096 < 2048 {
                            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                            (x >> 16) as u8
                        } else {
                            b"retrace "[i % 8]
                        }
                    })
                    .collect()
            }
        }
    }
}

fn content() -> impl Strategy<Value = Content> {
    prop_oneof![
        3 => Just(Content::Empty),
        6 => "[a-z \n]{0,200}".prop_map(Content::Text),
        3 => prop::collection::vec(any::<u8>(), 0..3000).prop_map(Content::Binary),
        1 => (any::<u8>(), 1_100_000usize..2_600_000).prop_map(|(seed, len)| Content::Big { seed, len }),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        8 => (content(), any::<bool>()).prop_map(|(content, exec)| Spec::File { content, exec }),
        1 => "[a-z./]{1,12}".prop_map(Spec::Symlink),
        1 => Just(Spec::EmptyDir),
    ]
}

fn path() -> impl Strategy<Value = PathBuf> {
    prop::collection::vec(0..NAMES.len(), 1..4)
        .prop_map(|ix| ix.iter().map(|&i| NAMES[i]).collect())
}

/// Builds a model, dropping entries that conflict with earlier ones (a file where a
/// directory is needed, or the other way round).
fn model(entries: Vec<(PathBuf, Spec)>) -> BTreeMap<PathBuf, Spec> {
    let mut m: BTreeMap<PathBuf, Spec> = BTreeMap::new();
    for (p, s) in entries {
        let blocked_by_leaf = p
            .ancestors()
            .skip(1)
            .any(|a| m.get(a).is_some_and(|s| !matches!(s, Spec::EmptyDir)));
        let has_children = m.keys().any(|k| k != &p && k.starts_with(&p));
        if blocked_by_leaf || has_children || m.contains_key(&p) {
            continue;
        }
        // An empty directory stops being empty once something goes inside it.
        for a in p.ancestors().skip(1) {
            m.remove(a);
        }
        m.insert(p, s);
    }
    m
}

fn materialize(root: &Path, m: &BTreeMap<PathBuf, Spec>) {
    for entry in fs::read_dir(root).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() && !p.is_symlink() {
            fs::remove_dir_all(&p).unwrap();
        } else {
            fs::remove_file(&p).unwrap();
        }
    }
    for (rel, spec) in m {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        match spec {
            Spec::File { content, exec } => {
                fs::write(&p, content.bytes()).unwrap();
                let mode = if *exec { 0o755 } else { 0o644 };
                fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
            }
            Spec::Symlink(t) => symlink(t, &p).unwrap(),
            Spec::EmptyDir => fs::create_dir_all(&p).unwrap(),
        }
    }
}

/// A first tree, which of its entries survive the mutation, and entries the mutation adds.
type Mutation = (Vec<(PathBuf, Spec)>, Vec<bool>, Vec<(PathBuf, Spec)>);

fn trees() -> impl Strategy<Value = Mutation> {
    (
        prop::collection::vec((path(), spec()), 0..25),
        prop::collection::vec(any::<bool>(), 25),
        prop::collection::vec((path(), spec()), 0..15),
    )
}

/// Whether two trees are equal; prints the differing paths (not the contents) when not.
fn same(
    actual: &BTreeMap<PathBuf, common::Node>,
    expected: &BTreeMap<PathBuf, common::Node>,
) -> bool {
    let keys: std::collections::BTreeSet<_> = actual.keys().chain(expected.keys()).collect();
    let differ: Vec<_> = keys
        .into_iter()
        .filter(|k| actual.get(*k) != expected.get(*k))
        .collect();
    for k in &differ {
        let show = |n: Option<&common::Node>| match n {
            Some(common::Node::File { data, exec }) => {
                format!("file {} bytes exec={exec}", data.len())
            }
            other => format!("{other:?}"),
        };
        eprintln!(
            "  {}: actual {} expected {}",
            k.display(),
            show(actual.get(*k)),
            show(expected.get(*k))
        );
    }
    differ.is_empty()
}

proptest! {
    // 40 cases in CI; PROPTEST_CASES=1000 for a longer hunt.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(40),
        failure_persistence: common::regressions_beside_the_source(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn restore_is_byte_identical_in_both_directions((first, keep, extra) in trees()) {
        let env = Env::new();
        let ws = env.open();
        let m1 = model(first.clone());
        materialize(env.root(), &m1);
        let t1 = tree_of(env.root());
        let s1 = ws.snapshot(None).unwrap();

        // The mutation: keep some entries of the first tree, add others (which may turn
        // files into directories and back, or replace contents).
        let kept = first.into_iter().zip(keep).filter(|(_, k)| *k).map(|(e, _)| e);
        let m2 = model(extra.into_iter().chain(kept).collect());
        materialize(env.root(), &m2);
        let t2 = tree_of(env.root());
        let s2 = ws.snapshot(None).unwrap();

        let r = ws.restore(&s1.id, RestoreOptions::default()).unwrap();
        prop_assert!(r.verified, "{:?}", r.verify_diff);
        prop_assert!(same(&tree_of(env.root()), &t1), "restore to the first tree");
        let r = ws.restore(&s2.id, RestoreOptions::default()).unwrap();
        prop_assert!(r.verified, "{:?}", r.verify_diff);
        prop_assert!(same(&tree_of(env.root()), &t2), "restore to the second tree");
        assert_verified(&env);
    }
}
