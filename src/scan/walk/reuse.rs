//! Listings reused from the stat cache: a directory whose `lstat` data the last capture
//! recorded, settled, takes the names the cache lists inside it, each `lstat`ed again,
//! on filesystems whose directory mtimes can be trusted.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::rules::Rules;
use super::{Found, Job, Walk, entry, kind_of, same, statat};
use crate::config::NestedRepos;
use crate::scan::ScanKind;
use crate::statcache::Stat;

/// Whether directory mtimes on the filesystem holding `root` change with every entry
/// created, removed or renamed, as seen by this host: local filesystems. Network and
/// userspace filesystems (NFS caches directory attributes for up to a minute, FUSE, 9p,
/// overlayfs over a changing lower layer) do not promise it, so there every directory is
/// listed, as git's untracked cache is off unless a filesystem passes its test.
pub(crate) fn trusts_directory_mtimes(root: &Path) -> bool {
    crate::platform::filesystem(root) == crate::platform::Filesystem::Local
}

impl Walk<'_> {
    /// The directory's entries from the cache, when it vouches for its listing; `None`
    /// (and nothing added to `found`) when the directory must be listed.
    pub(super) fn reuse(
        &self,
        job: &Job,
        fd: &rustix::fd::OwnedFd,
        st: &Stat,
        found: &mut Found,
    ) -> Option<Vec<Job>> {
        let prior = self.prior?;
        if job.fresh || job.rel.is_empty() {
            return None;
        }
        let (kind, stat, listing) = match job.cached {
            Some(c) => c,
            None => prior.get(&job.rel).map(|c| (c.kind, c.stat, c.listing))?,
        };
        if !(listing && same(&stat, st, false) && prior.settled(st)) {
            return None;
        }
        match (kind, self.nested) {
            (ScanKind::NestedRepo, NestedRepos::Skip) => {
                found
                    .entries
                    .push(entry(job.rel.clone(), ScanKind::NestedRepo, st, true));
                return Some(Vec::new());
            }
            (ScanKind::Dir, _) => {}
            _ => return None,
        }
        let mut prefix = job.rel.clone();
        prefix.push(b'/');
        let kids = prior.child_indices(&prefix)?;
        // Files and symlinks as (record index, record, `lstat` now); whether each matches
        // its record.
        let mut leaves = Vec::with_capacity(kids.len());
        let mut exact = true;
        let mut dirs = Vec::new();
        let mut has_gitignore = false;
        for &i in &kids {
            let k = prior.at(i)?;
            let name = &k.path[prefix.len()..];
            let now = statat(fd, name).ok()?;
            let kind = kind_of(now.mode)?;
            let same_kind =
                kind == k.kind || (kind == ScanKind::Dir && k.kind == ScanKind::NestedRepo);
            if !same_kind {
                return None;
            }
            // What a capture's cache lookup would hit on: the same `lstat` data, settled.
            let hit = same(&k.stat, &now, true) && prior.settled(&now);
            if name == b".gitignore" {
                // Its rules decide this listing: it must be exactly what was read then.
                if !(k.kind == ScanKind::File && hit) {
                    return None;
                }
                has_gitignore = true;
            }
            if kind == ScanKind::Dir {
                dirs.push((k.path.to_vec(), (k.kind, k.stat, k.listing)));
            } else {
                exact &= hit;
                leaves.push((i, k, now));
            }
        }
        // Every file the same as its record: the cache's records stand for them, and the
        // scan holds only the directory (a million unchanged files cost no entry each).
        // Otherwise every file is an entry, for capture to look at.
        if exact {
            found.omitted.extend(leaves.iter().map(|(i, _, _)| *i));
            found.omitted_bytes += leaves.iter().map(|(_, k, _)| k.stat.size).sum::<u64>();
        } else {
            found.entries.extend(
                leaves
                    .iter()
                    .map(|(_, k, now)| entry(k.path.to_vec(), k.kind, now, false)),
            );
        }
        let mut me = entry(job.rel.clone(), ScanKind::Dir, st, true);
        me.clean = exact;
        found.entries.push(me);
        let rules = Arc::new(Rules {
            dir: self.abs(&job.rel),
            has_file: has_gitignore,
            gitignore: OnceLock::new(),
            parent: job.rules.clone(),
            root: None,
        });
        Some(
            dirs.into_iter()
                .map(|(rel, cached)| Job {
                    watched: self.watched(job, &rel),
                    rel,
                    rules: Some(Arc::clone(&rules)),
                    fresh: false,
                    untracked: job.untracked,
                    cached: Some(cached),
                })
                .collect(),
        )
    }
}
