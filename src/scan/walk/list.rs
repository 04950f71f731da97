//! Listing one directory: every name read, its rules built, each name kept `lstat`ed once,
//! nested repositories and credentials told apart, and whether the listing may be reused.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, OnceLock, PoisonError};

use rustix::fs::FileType;

use super::rules::{Rules, root_rules};
use super::{Found, Job, Walk, entry, join, kind_of, same, statat};
use crate::config::NestedRepos;
use crate::scan::{ScanKind, exclude};
use crate::statcache::Stat;

impl Walk<'_> {
    /// Lists the directory: every name, the rules, one `lstat` per name kept.
    pub(super) fn list(
        &self,
        job: &Job,
        fd: rustix::fd::OwnedFd,
        st: &Stat,
        abs: &Path,
        found: &mut Found,
        trusted: bool,
    ) -> Vec<Job> {
        let is_root = job.rel.is_empty();
        let mut dir = match rustix::fs::Dir::new(fd) {
            Ok(d) => d,
            Err(e) => {
                let err = std::io::Error::from(e);
                Self::skip(found, &job.rel, format!("{}: {err}", abs.display()));
                return Vec::new();
            }
        };
        // Names in one buffer: (start, end, d_type).
        let mut names: Vec<u8> = Vec::new();
        let mut spans: Vec<(usize, usize, FileType)> = Vec::new();
        let mut listing_ok = true;
        while let Some(item) = dir.read() {
            match item {
                Ok(e) => {
                    let name = e.file_name().to_bytes();
                    if name == b"." || name == b".." {
                        continue;
                    }
                    let start = names.len();
                    names.extend_from_slice(name);
                    spans.push((start, names.len(), e.file_type()));
                }
                Err(e) => {
                    let err = std::io::Error::from(e);
                    Self::skip(found, &job.rel, format!("{}: {err}", abs.display()));
                    listing_ok = false;
                    break;
                }
            }
        }
        let name_of = |s: &(usize, usize, FileType)| &names[s.0..s.1];
        let has = |n: &[u8]| spans.iter().any(|s| name_of(s) == n);
        let mut untracked = job.untracked;
        let mut rules_root = None;
        if has(b".git") {
            if is_root {
                // The workspace's own repository: its exclude file is in the root rules.
            } else {
                match self.nested {
                    NestedRepos::Skip => {
                        found
                            .entries
                            .push(entry(job.rel.clone(), ScanKind::NestedRepo, st, true));
                        return Vec::new();
                    }
                    NestedRepos::Capture => {
                        // A root of its own: only its own rules apply inside it.
                        self.repos
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(job.rel.clone());
                        rules_root = Some(root_rules(abs, self.global.as_deref()));
                        untracked = true;
                    }
                }
            }
        }
        if is_root {
            rules_root = Some(root_rules(abs, self.global.as_deref()));
        }
        let rules_here = Arc::new(Rules {
            dir: abs.to_path_buf(),
            has_file: has(b".gitignore"),
            gitignore: OnceLock::new(),
            // A walk root's rules stop there: the enclosing folder's do not apply inside.
            parent: if rules_root.is_some() {
                None
            } else {
                job.rules.clone()
            },
            root: rules_root,
        });
        let skipped_before = found.skipped.len();
        rules_here.gitignore(found, self);
        if found.skipped.len() > skipped_before {
            listing_ok = false;
        }
        // Whether this directory's own rules changed since the cache was written: then
        // nothing below it may reuse a listing.
        let mut fresh = job.fresh || untracked;
        let gi_rel = join(&job.rel, b".gitignore");
        let gi_now = has(b".gitignore")
            .then(|| statat(dir.fd().ok()?, b".gitignore").ok())
            .flatten();
        if let Some(prior) = self.prior.filter(|_| !fresh) {
            let was = prior.get(&gi_rel);
            fresh = match (was, &gi_now) {
                (None, None) => false,
                (Some(c), Some(now)) => {
                    !(c.kind == ScanKind::File && same(&c.stat, now, true) && prior.settled(now))
                }
                _ => true,
            };
        }
        let Ok(dfd) = dir.fd() else {
            return Vec::new();
        };
        let mut children = Vec::new();
        let mut gitignore_captured = false;
        for s in &spans {
            let name = name_of(s);
            if exclude::is_hard_excluded(name) {
                continue;
            }
            let child_abs = abs.join(OsStr::from_bytes(name));
            if self.store_dir.is_some_and(|d| d == child_abs) {
                continue;
            }
            let rel = join(&job.rel, name);
            let hinted_dir = match s.2 {
                FileType::Directory => Some(true),
                FileType::Unknown => None,
                _ => Some(false),
            };
            let mut stat = None;
            let is_dir = if let Some(d) = hinted_dir {
                d
            } else {
                let Some(now) = Self::stat_child(dfd, name, &rel, found, &mut listing_ok) else {
                    continue;
                };
                stat = Some(now);
                kind_of(now.mode) == Some(ScanKind::Dir)
            };
            if rules_here.ignored(&child_abs, is_dir, found, self) {
                continue;
            }
            let Some(now) =
                stat.or_else(|| Self::stat_child(dfd, name, &rel, found, &mut listing_ok))
            else {
                continue;
            };
            let Some(kind) = kind_of(now.mode) else {
                // Sockets, FIFOs and devices are not content a snapshot can hold: left out,
                // and named like any other path left out.
                let what = crate::scan::special_kind(FileType::from_raw_mode(now.mode));
                Self::skip(found, &rel, format!("{what}: left out"));
                listing_ok = false;
                continue;
            };
            // The kind changed between the listing and the `lstat`: match again with it.
            if (kind == ScanKind::Dir) != is_dir
                && rules_here.ignored(&child_abs, kind == ScanKind::Dir, found, self)
            {
                continue;
            }
            if kind == ScanKind::Dir {
                children.push(Job {
                    watched: self.watched(job, &rel),
                    rel,
                    rules: Some(Arc::clone(&rules_here)),
                    fresh,
                    untracked,
                    cached: None,
                });
                continue;
            }
            if exclude::is_secret_name(name)
                && !self
                    .allow
                    .is_some_and(|a| a.is_match(OsStr::from_bytes(&rel)))
            {
                found.secrets.push(crate::object::show_path(&rel));
                listing_ok = false;
                continue;
            }
            if name == b".gitignore" && kind == ScanKind::File {
                gitignore_captured = true;
            }
            found.entries.push(entry(rel, kind, &now, false));
        }
        // An ignore file the next walk could not check against the cache: list this
        // directory every time.
        if gi_now.is_some() && !gitignore_captured {
            listing_ok = false;
        }
        if !is_root {
            let listing = listing_ok && !untracked && trusted;
            found
                .entries
                .push(entry(job.rel.clone(), ScanKind::Dir, st, listing));
        }
        children
    }
}
