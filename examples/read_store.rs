//! Reading a store without changing it, as a backup tool or a forensic script would: the
//! `retrace::format` module alone (no CLI, no redb knowledge).
//!
//! `cargo run --no-default-features --example read_store -- [WORKSPACE]` lists the snapshots
//! of the workspace's store (the current directory by default) with their files, and each
//! agent session's turns with their prompts.

use std::path::{Path, PathBuf};

use retrace::format::{EntryKind, StoreView};
use retrace::{Config, ObjectId, Workspace};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    let path = Workspace::locate_store(&dir, &Config::from_env())?;
    if !path.exists() {
        return Err(format!("{} has no store yet ({})", dir.display(), path.display()).into());
    }
    let store = retrace::format::StoreFile::open(&path)?;
    let view = store.view()?;

    for snap in view.snapshots()? {
        let mut files = Vec::new();
        walk(&view, &snap.root, Path::new(""), &mut files)?;
        println!(
            "snapshot {} {}: {} files",
            &snap.root.to_hex()[..12],
            snap.label.as_deref().unwrap_or("-"),
            files.len()
        );
        for (name, len) in files.iter().take(5) {
            println!("  {} ({len} bytes)", name.display());
        }
    }
    for session in view.sessions()? {
        let name = session.name.map_or_else(|| session.key.short(), |n| n.name);
        println!("session {name}");
        for turn in view.turns(&session.key)? {
            let prompt = turn.prompt.unwrap_or_default();
            println!(
                "  turn {} ({}): {}",
                turn.number,
                turn.state.name(),
                prompt.escape_debug()
            );
        }
    }
    Ok(())
}

/// Every file below tree `id`, with its length read back from the store.
fn walk(
    view: &StoreView,
    id: &ObjectId,
    at: &Path,
    out: &mut Vec<(PathBuf, usize)>,
) -> Result<(), Box<dyn std::error::Error>> {
    use std::os::unix::ffi::OsStrExt;
    for entry in view.tree(id)?.entries {
        let path = at.join(std::ffi::OsStr::from_bytes(&entry.name));
        match entry.kind {
            EntryKind::Dir => walk(view, &entry.id, &path, out)?,
            EntryKind::File | EntryKind::Executable | EntryKind::Symlink => {
                let len = view.file(&entry.id)?.len();
                out.push((path, len));
            }
            // A nested repository's files are never captured.
            _ => {}
        }
    }
    Ok(())
}
