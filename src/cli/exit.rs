//! How a command ends: the exit codes (README, "Exit codes"), the two kinds of mistake the
//! CLI itself finds (a usage error, a refusal), and how a failure is classified for its exit
//! code and its `--json` `result`.

use crate::cli::json;
use crate::object::terminal_text;
use crate::{Error, RestoreError, ShareError};

/// Exit code of success.
pub const OK: u8 = 0;

/// Exit code of a refusal by a guard (conflict, dirty) or nothing to do (nothing to undo
/// or redo, no changes).
pub const REFUSED: u8 = 1;

/// Exit code of "busy: another retrace process holds the workspace; try again" (as usage
/// errors, which clap reports with 2 too).
pub const BUSY: u8 = 2;

/// Exit code of an error.
pub const FAILED: u8 = 3;

/// Exit code of a usage error (a bad snapshot id, say).
pub const USAGE: u8 = 2;

/// Exit code of a repair after which some snapshots stay broken.
pub const STILL_BROKEN: u8 = 4;

/// A mistake in how a command was called (an unknown name, a malformed argument): exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// A refusal that is not a library outcome (nothing to act on): exit 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// `e` as the umbrella [`Error`] that [`classify`] and the messages read, when it is a
/// library operation's own error (`Workspace::open`'s [`crate::OpenError`],
/// `Workspace::snapshot`'s [`crate::CaptureError`], `Workspace::restore`'s
/// [`RestoreError`]) as `?` carried it; anything else, and one wrapped in context, stays as
/// it is.
pub fn umbrella(e: anyhow::Error) -> anyhow::Error {
    fn lift<E: std::error::Error + Send + Sync + 'static>(e: anyhow::Error) -> anyhow::Error
    where
        Error: From<E>,
    {
        // `is` on the error itself, not through a context (as `downcast` would look).
        if !(*e).is::<E>() {
            return e;
        }
        match e.downcast::<E>() {
            Ok(typed) => Error::from(typed).into(),
            Err(e) => e,
        }
    }
    lift::<RestoreError>(lift::<crate::CaptureError>(lift::<crate::OpenError>(e)))
}

/// The `result` of `--json` and the exit code of a command that failed with `e`.
pub fn classify(e: &anyhow::Error) -> (&'static str, u8) {
    if e.downcast_ref::<Usage>().is_some() {
        return ("usage", USAGE);
    }
    if e.downcast_ref::<Refused>().is_some() {
        return ("refused", REFUSED);
    }
    match e.downcast_ref::<Error>() {
        // Named as the session commands name the same refusals.
        Some(Error::Restore(r)) if matches!(**r, RestoreError::Dirty { .. }) => ("dirty", REFUSED),
        Some(Error::Restore(r)) if matches!(**r, RestoreError::Held { .. }) => ("held", REFUSED),
        Some(e) if e.is_busy() => ("busy", BUSY),
        Some(
            Error::Store(crate::StoreError::BadSnapshotId(_))
            | Error::NoSuchOwner { .. }
            | Error::Anchor { .. }
            | Error::Inspect { .. }
            | Error::Share(ShareError::BadRef(_)),
        ) => ("usage", USAGE),
        Some(Error::Restore(r)) if matches!(**r, RestoreError::Path { .. }) => ("usage", USAGE),
        // What the ref, the bundle or this workspace already holds stands in the way.
        Some(Error::Share(
            ShareError::Conflict { .. }
            | ShareError::Diverged { .. }
            | ShareError::NotRetrace { .. }
            | ShareError::Bundle { .. }
            | ShareError::Refused { .. }
            | ShareError::Missing { .. }
            | ShareError::Nothing { .. },
        )) => ("refused", REFUSED),
        _ => ("error", FAILED),
    }
}

/// The usage error of `--json` given to a command that has no JSON answer.
pub fn no_json(command: &str) -> anyhow::Error {
    Usage(format!(
        "`retrace {command}` has no JSON answer: leave out --json (docs/json.md lists the \
         commands that have one)"
    ))
    .into()
}

/// Prints clap's usage error `e` in retrace's one error style (`retrace: ` and the message,
/// then clap's tip and usage lines), or with `--json` anywhere in the arguments as one JSON
/// object with clap's detail (what was wrong and the tip, not its usage lines); exit 2.
pub fn usage_error(e: &clap::Error) -> u8 {
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    if std::env::args().any(|a| a == "--json") {
        let message: Vec<&str> = text
            .lines()
            .map(str::trim)
            .take_while(|l| !l.starts_with("Usage:"))
            .filter(|l| !l.is_empty())
            .collect();
        json::print(
            serde_json::json!({"result": "usage", "ok": false, "message": message.join("; ")}),
        );
    } else {
        eprint!("retrace: {text}");
    }
    USAGE
}

/// Reports the failure `e` of a command: with `json`, one JSON object on stdout and nothing
/// on stderr (a refusal of paths lists them as the session commands' refusals do); else
/// one line on stderr. Returns the exit code.
pub fn report(e: &anyhow::Error, json: bool) -> u8 {
    let (result, code) = classify(e);
    // Library errors already carry their cause in one line; others get the chain.
    let message = if e.downcast_ref::<Error>().is_some() {
        format!("{e}")
    } else {
        format!("{e:#}")
    };
    if json {
        let mut v = serde_json::json!({"result": result, "ok": false, "message": message});
        if let Some(Error::Restore(r)) = e.downcast_ref::<Error>() {
            match &**r {
                RestoreError::Dirty { paths, count } => {
                    v["paths"] = serde_json::json!(paths);
                    v["count"] = serde_json::json!(count);
                }
                RestoreError::Held { held } => {
                    let paths: Vec<&str> = held.iter().map(|h| h.path.as_str()).collect();
                    v["paths"] = serde_json::json!(paths);
                    v["count"] = serde_json::json!(held.len());
                }
                _ => {}
            }
        }
        json::print(v);
    } else {
        // Paths and names from outside are in it: shown escaped, exact in JSON.
        eprintln!("retrace: {}", terminal_text(&message));
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    /// README: exit codes 0 success, 1 refused, 2 usage or busy, 3 errors.
    #[test]
    fn busy_exits_2_refused_1_errors_3() {
        let busy = |path: &str| crate::StoreError::Busy {
            path: path.into(),
            secs: 120,
        };
        let lock_busy = anyhow::Error::from(Error::Store(busy("/h/lock")));
        assert_eq!(classify(&lock_busy), ("busy", 2));
        let capture_busy = anyhow::Error::from(Error::Restore(Box::new(RestoreError::Capture(
            crate::CaptureError::Store(busy("/h/store.redb")),
        ))));
        assert_eq!(classify(&capture_busy), ("busy", 2));
        let dirty = anyhow::Error::from(Error::from(RestoreError::Dirty {
            paths: vec!["a".into()],
            count: 1,
        }));
        assert_eq!(classify(&dirty), ("dirty", 1));
        let failed = anyhow::Error::from(Error::from(crate::OpenError::Workspace {
            path: "/w".into(),
            reason: "not a directory".into(),
        }));
        assert_eq!(classify(&failed), ("error", 3));
        assert_eq!(classify(&anyhow::anyhow!("other")), ("error", 3));
    }

    /// `Workspace::open`, `snapshot` and `restore` answer their own error types: `?` into
    /// anyhow carries those, and `umbrella` makes them the `Error` `classify` reads.
    #[test]
    fn per_operation_errors_classify_as_the_umbrella_error() {
        let busy = || crate::StoreError::Busy {
            path: "/h/store.redb".into(),
            secs: 120,
        };
        let open_busy = umbrella(crate::OpenError::Store(busy()).into());
        assert_eq!(classify(&open_busy), ("busy", 2));
        assert!(open_busy.downcast_ref::<Error>().is_some());
        let snapshot_busy = umbrella(crate::CaptureError::Store(busy()).into());
        assert_eq!(classify(&snapshot_busy), ("busy", 2));
        let dirty = umbrella(
            RestoreError::Dirty {
                paths: vec!["a".into()],
                count: 1,
            }
            .into(),
        );
        assert_eq!(classify(&dirty), ("dirty", 1));
        let held = umbrella(RestoreError::Held { held: Vec::new() }.into());
        assert_eq!(classify(&held), ("held", 1));
        let path = umbrella(
            RestoreError::Path {
                path: "..".into(),
                reason: "outside".into(),
            }
            .into(),
        );
        assert_eq!(classify(&path), ("usage", 2));
        // Context stays: the message a caller added is kept.
        let wrapped = umbrella(anyhow::Error::from(crate::OpenError::Store(busy())).context("x"));
        assert_eq!(wrapped.to_string(), "x");
    }
}
