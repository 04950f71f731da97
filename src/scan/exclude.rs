//! Hard exclusions: names no `.gitignore` negation can bring back.

/// Names excluded everywhere in the workspace, whatever the ignore rules say.
pub const HARD_EXCLUSIONS: &[&str] = &[".git", "node_modules", ".env", ".env.*"];

/// Whether a file or directory name is hard-excluded.
#[must_use]
pub fn is_hard_excluded(name: &[u8]) -> bool {
    name == b".git" || name == b"node_modules" || name == b".env" || name.starts_with(b".env.")
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
