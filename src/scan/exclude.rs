//! Hard exclusions: names no `.gitignore` negation can bring back.

/// Names excluded everywhere in the workspace, whatever the ignore rules say.
pub const HARD_EXCLUSIONS: &[&str] = &[
    ".git",
    "node_modules",
    ".env",
    ".env.*",
    ".*.retrace-tmp-* (retrace's own temp files)",
];

/// The marker in the name of a temp file a restore writes before renaming it into place.
pub const TEMP_MARKER: &[u8] = b".retrace-tmp-";

/// Whether a file or directory name is hard-excluded.
#[must_use]
pub fn is_hard_excluded(name: &[u8]) -> bool {
    name == b".git"
        || name == b"node_modules"
        || name == b".env"
        || name.starts_with(b".env.")
        || is_temp(name)
}

/// Whether a name is one of retrace's restore temp files (`.<name>.retrace-tmp-<pid>-<n>`),
/// which a process killed mid-write can leave behind: never user data.
#[must_use]
pub fn is_temp(name: &[u8]) -> bool {
    name.first() == Some(&b'.') && name.windows(TEMP_MARKER.len()).any(|w| w == TEMP_MARKER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excludes_git_node_modules_and_env_files() {
        for n in [
            &b".git"[..],
            b"node_modules",
            b".env",
            b".env.local",
            b".env.production",
            b".main.rs.retrace-tmp-42-7",
        ] {
            assert!(is_hard_excluded(n), "{n:?}");
        }
        for n in [
            &b".gitignore"[..],
            b"env",
            b".envrc",
            b"node_modules2",
            b"src",
        ] {
            assert!(!is_hard_excluded(n), "{n:?}");
        }
    }
}
