//! Opening a store file: the database opened (waiting for other processes, damage told
//! apart from every other failure), a new store's tables and meta values created, the
//! format version checked, and stores opened read-only.

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use redb::{ConcurrencyMode, Database, ReadableDatabase, ReadableTable};

use super::schema::{
    self, FORMAT_DELTAS, FORMAT_PARITY, FORMAT_VERSION, META, META_FORMAT, META_STORE_ID, META_WORKSPACE,
    OBJECTS, PACKS, SNAPSHOTS,
};
use super::{
    FreeSpace, LOCK_WAIT, ReadOnlyStore, ReadTx, Store, StoreReader, Table, free_space, now_ms,
    table,
};
use crate::error::StoreError;

/// Classifies a failure to open: damage (the file's content) apart from everything else.
fn open_error(path: &Path, source: redb::DatabaseError, need: &'static str) -> StoreError {
    use std::io::ErrorKind;
    let source = match source {
        redb::DatabaseError::Storage(redb::StorageError::Io(e))
            if e.kind() == ErrorKind::PermissionDenied =>
        {
            return StoreError::Permission {
                path: path.into(),
                need,
                source: e,
            };
        }
        other => other,
    };
    let damaged = match &source {
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(d)) => Some(d.clone()),
        redb::DatabaseError::Storage(redb::StorageError::Io(e))
            if matches!(e.kind(), ErrorKind::InvalidData | ErrorKind::UnexpectedEof) =>
        {
            Some(e.to_string())
        }
        redb::DatabaseError::UpgradeRequired(v) => Some(format!("redb file format {v}")),
        _ => None,
    };
    match damaged {
        Some(detail) => StoreError::Damaged {
            path: path.into(),
            detail,
        },
        None => StoreError::Open {
            path: path.into(),
            source: source.into(),
        },
    }
}

/// Opens (creating if needed) the database at `path`, waiting up to [`LOCK_WAIT`] for other
/// processes (when `wait`); damage is classified by [`open_error`].
pub(super) fn open_db(path: &Path, wait: bool) -> Result<Database, StoreError> {
    let started = Instant::now();
    loop {
        // redb 4.6 panics ("unreachable code") on some corrupted pages while opening;
        // a damaged file must be reported, never take the process down.
        let opened = std::panic::catch_unwind(|| builder().create(path)).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Err(redb::DatabaseError::Storage(redb::StorageError::Corrupted(
                format!("redb gave up reading it: {what}"),
            )))
        });
        match opened {
            Ok(db) => return Ok(db),
            Err(redb::DatabaseError::DatabaseAlreadyOpen)
                if wait && started.elapsed() < LOCK_WAIT =>
            {
                thread::sleep(Duration::from_millis(20));
            }
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(StoreError::Busy {
                    path: path.into(),
                    secs: LOCK_WAIT.as_secs(),
                });
            }
            Err(source) => return Err(open_error(path, source, "read and write")),
        }
    }
}

/// 16 unpredictable-enough bytes (time, pid, address entropy) for a store id.
fn random_id() -> [u8; 16] {
    let mut h = blake3::Hasher::new();
    h.update(&format!("{:?}{}", SystemTime::now(), std::process::id()).into_bytes());
    h.update(&(std::ptr::from_ref(&h) as usize).to_le_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&h.finalize().as_bytes()[..16]);
    out
}

fn builder() -> redb::Builder {
    let mut b = Database::builder();
    b.set_concurrency_mode(ConcurrencyMode::MultiWriter);
    // redb holds up to this much of the file in memory, half of it at most dirty pages of
    // the open write. Upper B-tree levels fit easily; leaf pages come from the OS page cache
    // with one `pread`. Measured on cold captures: 64 MiB cost 49 MB more peak RSS than
    // 16 MiB at 300k files, and saved at most 0.5 s of 12 at a million (docs/benchmarks.md,
    // "Monorepo scale").
    b.set_cache_size(16 * 1024 * 1024);
    b
}

impl Store {
    /// Opens (creating if needed) the store at `path`, waiting up to [`LOCK_WAIT`] for other
    /// processes, and checks the format version. A new store has the store's own tables
    /// only: the layers above create theirs when they first write.
    ///
    /// # Errors
    /// [`StoreError`] when the file cannot be opened, stays busy, or has an unknown format.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))] // tests
    pub fn open(path: &Path, workspace: &Path) -> Result<Store, StoreError> {
        Store::open_with(path, workspace, free_space, &[])
    }

    /// [`Store::open`], measuring free disk space with `free_space` (tests give a full disk);
    /// a new store is created with the (empty) `tables` of the layers above too, in the
    /// transaction that creates it, in their order. An existing store is left as it is: a
    /// table missing there reads as empty until its first write creates it.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_with(
        path: &Path,
        workspace: &Path,
        free_space: FreeSpace,
        tables: &[Table],
    ) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent() {
            crate::home::create_private_dir(dir)?;
        }
        let db = open_db(path, true)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        let store = Store {
            db: Arc::new(RwLock::new(Some(db))),
            path: path.to_path_buf(),
            damage: Arc::default(),
            free_space,
            write_failed: std::sync::atomic::AtomicBool::new(false),
        };
        store.init(workspace, tables)?;
        Ok(store)
    }

    /// Opens an existing store read-only (for `retrace-dump`); never changes it.
    ///
    /// # Errors
    /// [`StoreError`] when it cannot be opened or has an unknown format.
    pub fn open_read_only(path: &Path) -> Result<ReadOnlyStore, StoreError> {
        let db = builder()
            .open_read_only(path)
            .map_err(|source| match source {
                redb::DatabaseError::RepairAborted => StoreError::NeedsRepair { path: path.into() },
                redb::DatabaseError::Storage(redb::StorageError::Io(e))
                    if e.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    StoreError::Permission {
                        path: path.into(),
                        need: "read",
                        source: e,
                    }
                }
                source => StoreError::Open {
                    path: path.into(),
                    source: source.into(),
                },
            })?;
        let store = ReadOnlyStore {
            db,
            path: path.to_path_buf(),
        };
        let r = store.reader()?;
        r.check_format()?;
        Ok(store)
    }

    fn init(&self, workspace: &Path, tables: &[Table]) -> Result<(), StoreError> {
        let r = self.reader()?;
        if r.format()?.is_some() {
            return r.check_format();
        }
        drop(r);
        let tx = self.begin_write()?;
        {
            let e = self.db_err();
            let mut meta = tx.open_table(META).map_err(|x| e(x.into()))?;
            let existing = meta
                .get(META_FORMAT)
                .map_err(|x| e(x.into()))?
                .map(|g| g.value().to_vec());
            if existing.is_none() {
                meta.insert(META_FORMAT, FORMAT_VERSION.to_le_bytes().as_slice())
                    .map_err(|x| e(x.into()))?;
                meta.insert(META_WORKSPACE, workspace.as_os_str().as_encoded_bytes())
                    .map_err(|x| e(x.into()))?;
                meta.insert(META_STORE_ID, random_id().as_slice())
                    .map_err(|x| e(x.into()))?;
                // A new store has nothing to maintain: it counts as maintained now, so the
                // first command after it never finds a pass due (only the byte budget can
                // make one due sooner).
                meta.insert(schema::META_MAINTAINED, now_ms().to_le_bytes().as_slice())
                    .map_err(|x| e(x.into()))?;
            }
            tx.open_table(OBJECTS).map_err(|x| e(x.into()))?;
            tx.open_table(PACKS).map_err(|x| e(x.into()))?;
            tx.open_table(SNAPSHOTS).map_err(|x| e(x.into()))?;
            for t in tables {
                table::create(&tx, *t).map_err(&e)?;
            }
        }
        tx.commit().map_err(|x| self.db_err()(x.into()))?;
        self.reader()?.check_format()
    }
}

impl ReadOnlyStore {
    /// A read transaction over the tables of the layers above.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn begin_read(&self) -> Result<ReadTx, StoreError> {
        let tx = self.db.begin_read().map_err(|x| StoreError::Db {
            path: self.path.clone(),
            source: redb::Error::from(x).into(),
        })?;
        Ok(ReadTx {
            tx,
            path: self.path.clone(),
        })
    }

    /// A consistent read view.
    ///
    /// # Errors
    /// [`StoreError::Db`] when redb fails.
    pub fn reader(&self) -> Result<StoreReader, StoreError> {
        StoreReader::new(&self.db, &self.path)
    }

    /// The store file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl StoreReader {
    fn format(&self) -> Result<Option<u32>, StoreError> {
        Ok(self
            .meta_value(META_FORMAT)?
            .map(|v| v.try_into().map_or(u32::MAX, u32::from_le_bytes)))
    }

    fn check_format(&self) -> Result<(), StoreError> {
        match self.format()? {
            Some(FORMAT_VERSION | FORMAT_DELTAS | FORMAT_PARITY) => Ok(()),
            // The creating process has not committed its first transaction yet.
            None => Err(StoreError::BeingCreated {
                path: self.path.clone(),
            }),
            Some(found) => Err(StoreError::UnknownFormat {
                path: self.path.clone(),
                found,
                expected: FORMAT_PARITY,
            }),
        }
    }
}
