//! Leases: which process owns a pending turn, and whether that owner is provably gone.
//!
//! A turn begun and never ended blocks undo and redo of its session (`busy`). When its owner
//! died (an agent killed mid-turn), another process may clean it up, but only when the death
//! is certain: the lease must come from this very machine, boot and pid namespace (host id,
//! hostname, boot id, pid-namespace inode all equal to ours), and `kill(pid, 0)` must answer
//! ESRCH, or the pid must now belong to a process started at another time (pid reuse).
//! Anything uncertain (another host or container, an unreadable identity, a record of a
//! future version) keeps the turn pending; `retrace-dump sessions` shows why.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Version of the lease record written today.
pub const LEASE_VERSION: u8 = 1;

/// Who owns a pending turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// Record version ([`LEASE_VERSION`]).
    pub version: u8,
    /// Random id of this lease.
    pub owner_id: [u8; 16],
    /// The machine's persistent random id (`$RETRACE_HOME/host-id`).
    pub host_id: String,
    /// Hostname.
    pub hostname: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// Inode of `/proc/self/ns/pid` of the process that wrote the lease.
    pub pid_ns: u64,
    /// The owner's pid.
    pub pid: u32,
    /// The owner's start time (clock ticks after boot, `/proc/<pid>/stat` field 22).
    pub start_time: u64,
    /// Unix milliseconds when the lease was written.
    pub heartbeat_ms: u64,
}

/// What is known of a lease's owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "owner", content = "detail", rename_all = "snake_case")]
pub enum Liveness {
    /// The owner runs (or cannot be shown not to).
    Alive,
    /// The owner is gone, for certain.
    Dead,
    /// It cannot be known from here; kept.
    Uncertain(String),
}

/// This machine's identity, as a lease records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// See [`LeaseRecord::host_id`].
    pub host_id: String,
    /// See [`LeaseRecord::hostname`].
    pub hostname: String,
    /// See [`LeaseRecord::boot_id`].
    pub boot_id: String,
    /// See [`LeaseRecord::pid_ns`].
    pub pid_ns: u64,
}

/// The host id held in the text of a `host-id` file: its trimmed contents, when they are
/// 32 bytes long (what [`host_id`] writes); None for anything else.
#[must_use]
pub fn parse_host_id(text: &str) -> Option<String> {
    Some(text.trim())
        .filter(|s| s.len() == 32)
        .map(str::to_string)
}

/// The persistent random id of this machine, created on first use under `home`.
#[must_use]
pub fn host_id(home: &Path) -> Option<String> {
    let path = home.join("host-id");
    let read = || {
        std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| parse_host_id(&t))
    };
    if let Some(id) = read() {
        return Some(id);
    }
    let mut h = blake3::Hasher::new();
    h.update(format!("{:?}{}", std::time::SystemTime::now(), std::process::id()).as_bytes());
    h.update(
        crate::platform::random_uuid()
            .unwrap_or_default()
            .as_bytes(),
    );
    let id = h.finalize().to_hex()[..32].to_string();
    // Written by rename, so two first uses never see half a file; the first writer wins.
    let tmp = home.join(format!(".host-id.{}", std::process::id()));
    std::fs::write(&tmp, &id).ok()?;
    if std::fs::hard_link(&tmp, &path).is_err() {
        let _ = std::fs::remove_file(&tmp);
        // Another process won, or the file is damaged: then no id, never a damaged one.
        return read();
    }
    let _ = std::fs::remove_file(&tmp);
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    }
    Some(id)
}

/// Why a lease cannot be made: what of this machine or of the owner could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The host id under the retrace home can be neither read nor created.
    #[error("cannot read or create host-id")]
    HostId,
    /// Neither `/proc/sys/kernel/hostname` nor `HOSTNAME` gives the hostname.
    #[error("cannot read the hostname")]
    Hostname,
    /// `/proc/sys/kernel/random/boot_id` cannot be read.
    #[error("cannot read the boot id")]
    BootId,
    /// `/proc/self/ns/pid` cannot be read.
    #[error("cannot read the pid namespace: {0}")]
    PidNamespace(#[source] std::io::Error),
    /// The owner named does not run.
    #[error("process {pid} does not exist")]
    NoSuchProcess {
        /// The pid given.
        pid: u32,
    },
}

/// This process's identity, or why it cannot be read.
///
/// # Errors
/// [`LeaseError`] naming what could not be read.
pub fn identity(home: &Path) -> Result<Identity, LeaseError> {
    Ok(Identity {
        host_id: host_id(home).ok_or(LeaseError::HostId)?,
        hostname: crate::platform::hostname()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .ok_or(LeaseError::Hostname)?,
        boot_id: crate::platform::boot_id().ok_or(LeaseError::BootId)?,
        pid_ns: crate::platform::pid_namespace().map_err(LeaseError::PidNamespace)?,
    })
}

/// The start time of process `pid` (clock ticks after boot), if it exists.
#[must_use]
pub fn start_time(pid: u32) -> Option<u64> {
    parse_start_time(&crate::platform::process_stat(pid)?)
}

/// The start time (field 22) in the text of a `/proc/<pid>/stat` file; None when the text
/// does not have one.
#[must_use]
pub fn parse_start_time(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: fields resume after the
    // last ')'. starttime is field 22, the 20th after it.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A lease naming process `pid` as the owner.
///
/// # Errors
/// [`LeaseError`] when this machine's identity or the owner's start time cannot be read.
pub fn new_lease(home: &Path, pid: u32) -> Result<LeaseRecord, LeaseError> {
    let me = identity(home)?;
    let start = start_time(pid).ok_or(LeaseError::NoSuchProcess { pid })?;
    let mut owner_id = [0u8; 16];
    owner_id.copy_from_slice(
        &blake3::hash(format!("{pid} {start} {:?}", std::time::SystemTime::now()).as_bytes())
            .as_bytes()[..16],
    );
    Ok(LeaseRecord {
        version: LEASE_VERSION,
        owner_id,
        host_id: me.host_id,
        hostname: me.hostname,
        boot_id: me.boot_id,
        pid_ns: me.pid_ns,
        pid,
        start_time: start,
        heartbeat_ms: crate::store::now_ms(),
    })
}

/// Whether the lease's owner is alive, dead, or unknowable from here.
#[must_use]
pub fn liveness(lease: &LeaseRecord, home: &Path) -> Liveness {
    if lease.version != LEASE_VERSION {
        return Liveness::Uncertain(format!("lease record of version {}", lease.version));
    }
    let me = match identity(home) {
        Ok(me) => me,
        Err(e) => return Liveness::Uncertain(e.to_string()),
    };
    if lease.host_id != me.host_id || lease.hostname != me.hostname {
        return Liveness::Uncertain(format!("owned by another host ({})", lease.hostname));
    }
    if lease.boot_id != me.boot_id {
        return Liveness::Uncertain("owned by an earlier boot of this machine".into());
    }
    if lease.pid_ns != me.pid_ns {
        return Liveness::Uncertain("owned by a process in another pid namespace".into());
    }
    let Some(pid) = i32::try_from(lease.pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return Liveness::Uncertain(format!("impossible pid {}", lease.pid));
    };
    match rustix::process::test_kill_process(pid) {
        Err(rustix::io::Errno::SRCH) => Liveness::Dead,
        // The pid exists (EPERM: it belongs to another user): alive unless it was reused.
        Ok(()) | Err(rustix::io::Errno::PERM) => match start_time(lease.pid) {
            Some(t) if t != lease.start_time => Liveness::Dead,
            _ => Liveness::Alive,
        },
        Err(e) => Liveness::Uncertain(format!("cannot probe process {}: {e}", lease.pid)),
    }
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
