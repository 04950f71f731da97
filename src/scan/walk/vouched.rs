//! What a watcher vouches for: directories it saw no event in taken from the stat cache as
//! they are, without a system call, and the walk of only the directories it names.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};


use super::rules::{Rules, root_rules};
use super::{Found, Job, Walk, Walked, entry, join, parent_of};
use crate::config::NestedRepos;
use crate::scan::{ScanKind, exclude};

impl Walk<'_> {
    /// Lists the directories `dirs` alone, each with the rules of its ancestors, and walks
    /// the directories `whole` with everything below them; nothing is reused from a cache.
    /// For a capture a watcher told where to look. Besides what they hold, returns the
    /// directories found inside `dirs` (not entered, nor recorded as entries), and those of
    /// `dirs` and `whole` a walk from the root would never reach (inside an ignored or
    /// excluded directory): left alone.
    pub(in crate::scan) fn run_some(
        self,
        dirs: &[Vec<u8>],
        whole: &[Vec<u8>],
    ) -> (Walked, Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let mut known = std::collections::HashMap::new();
        let mut found = Found::default();
        let (mut reach, mut beyond) = (Vec::new(), Vec::new());
        for (d, w) in dirs
            .iter()
            .map(|d| (d, false))
            .chain(whole.iter().map(|d| (d, true)))
        {
            if self.out_of_reach(d, &mut known, &mut found) {
                beyond.push(d.clone());
            } else {
                reach.push((d, w));
            }
        }
        self.hand_over(found);
        let dirs: Vec<&Vec<u8>> = reach.iter().filter(|r| !r.1).map(|r| r.0).collect();
        let whole: Vec<&Vec<u8>> = reach.iter().filter(|r| r.1).map(|r| r.0).collect();
        let job = |rel: &Vec<u8>, known: &mut std::collections::HashMap<_, _>| Job {
            rules: parent_of(rel).map(|p| self.rules_of(p, known)),
            rel: rel.clone(),
            fresh: true,
            untracked: false,
            cached: None,
            watched: false,
        };
        let listed: Vec<Job> = dirs.iter().map(|d| job(d, &mut known)).collect();
        let walked: Vec<Job> = whole.iter().map(|d| job(d, &mut known)).collect();
        let inside = Mutex::new(Vec::new());
        let me = &self;
        rayon::scope(|s| {
            for j in &walked {
                s.spawn(move |s| me.dir(s, j));
            }
            for j in &listed {
                let inside = &inside;
                s.spawn(move |_| {
                    let mut found = Found::default();
                    let kids = me.dir_into(j, &mut found);
                    me.hand_over(found);
                    inside
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend(kids.into_iter().map(|k| k.rel));
                });
            }
        });
        let inside = inside.into_inner().unwrap_or_else(PoisonError::into_inner);
        (self.collect(), inside, beyond)
    }

    /// Whether a walk from the root never reaches `rel`: it or a directory above it is
    /// hard-excluded, the store, or ignored by the rules in force where it is.
    fn out_of_reach(
        &self,
        rel: &[u8],
        known: &mut std::collections::HashMap<Vec<u8>, Arc<Rules>>,
        found: &mut Found,
    ) -> bool {
        let ends = rel
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'/')
            .map(|(i, _)| i)
            .chain((!rel.is_empty()).then_some(rel.len()));
        for end in ends {
            let here = &rel[..end];
            let (parent, name) = match here.iter().rposition(|&b| b == b'/') {
                Some(i) => (&here[..i], &here[i + 1..]),
                None => (&here[..0], here),
            };
            let abs = self.abs(here);
            if exclude::is_hard_excluded(name)
                || self.store_dir.is_some_and(|d| d == abs)
                || self
                    .rules_of(parent, known)
                    .ignored(&abs, true, found, self)
            {
                return true;
            }
        }
        false
    }

    /// The rules in force inside the directory `rel` as a walk from the root would build
    /// them (its `.gitignore` and every ancestor's; at the root, the exclude files too),
    /// each directory's built once in `known`.
    fn rules_of(
        &self,
        rel: &[u8],
        known: &mut std::collections::HashMap<Vec<u8>, Arc<Rules>>,
    ) -> Arc<Rules> {
        if let Some(r) = known.get(rel) {
            return Arc::clone(r);
        }
        let dir = self.abs(rel);
        let rules = Arc::new(Rules {
            has_file: self
                .open_beneath(&join(rel, b".gitignore"), crate::platform::PATH_ONLY)
                .is_ok(),
            gitignore: OnceLock::new(),
            parent: parent_of(rel).map(|p| self.rules_of(p, known)),
            root: rel
                .is_empty()
                .then(|| root_rules(&dir, self.global.as_deref())),
            dir,
        });
        known.insert(rel.to_vec(), Arc::clone(&rules));
        rules
    }

    /// Whether the watcher vouches for the child `rel` of a directory it vouched for or saw.
    pub(super) fn watched(&self, parent: &Job, rel: &[u8]) -> bool {
        parent.watched && self.vouch.is_some_and(|v| !v.subtree.contains(rel))
    }

    /// The directory's records from the cache, taken as they are: the watcher saw no event in
    /// it since the cache was written. `None` (and nothing added to `found`) when its record
    /// cannot stand alone (not a reusable listing, a file with several links) and the
    /// directory is processed as without a watcher.
    pub(super) fn reuse_vouched(&self, job: &Job, found: &mut Found) -> Option<Vec<Job>> {
        let prior = self.prior?;
        let (kind, st, listing) = match job.cached {
            Some(c) => c,
            None => prior.get(&job.rel).map(|c| (c.kind, c.stat, c.listing))?,
        };
        if !listing {
            return None;
        }
        match (kind, self.nested) {
            (ScanKind::NestedRepo, NestedRepos::Skip) => {
                found
                    .entries
                    .push(entry(job.rel.clone(), ScanKind::NestedRepo, &st, true));
                return Some(Vec::new());
            }
            (ScanKind::Dir, _) => {}
            _ => return None,
        }
        let mut prefix = job.rel.clone();
        prefix.push(b'/');
        let kids = prior.child_indices(&prefix)?;
        let mut leaves = Vec::with_capacity(kids.len());
        let mut dirs = Vec::new();
        let mut has_gitignore = false;
        for &i in &kids {
            let k = prior.at(i)?;
            if k.stat.linked {
                return None;
            }
            let name = &k.path[prefix.len()..];
            has_gitignore |= name == b".gitignore" && k.kind == ScanKind::File;
            match k.kind {
                ScanKind::Dir | ScanKind::NestedRepo => {
                    dirs.push((k.path.to_vec(), (k.kind, k.stat, k.listing)));
                }
                _ => leaves.push((i, k.stat.size)),
            }
        }
        found.omitted.extend(leaves.iter().map(|(i, _)| *i));
        found.omitted_bytes += leaves.iter().map(|(_, size)| size).sum::<u64>();
        let mut me = entry(job.rel.clone(), ScanKind::Dir, &st, true);
        me.clean = true;
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
