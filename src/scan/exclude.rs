//! Hard exclusions: names no `.gitignore` negation can bring back.

/// Names excluded everywhere in the workspace, whatever the ignore rules say.
pub const HARD_EXCLUSIONS: &[&str] = &[
    ".git",
    "node_modules",
    ".retrace-tmp-*, .*.retrace-tmp-* (retrace's own temp files)",
];

/// Agents' own records of their conversations, never captured (and, in a snapshot an older
/// retrace took, never restored over): restoring one would rewind the agent's own history
/// under it. Aider's chat and input history and tags cache (its configuration files,
/// `.aider.conf.yml`, `.aiderignore`, are the user's and captured), Crush's database.
pub const AGENT_RECORDS: &[&str] = &[
    ".aider.chat.history.md",
    ".aider.input.history",
    ".aider.llm.history",
    ".aider.tags.cache.v*",
    ".crush",
];

/// Names of credentials, excluded by default (named in capture results, and allowed back
/// only by the `allow_secrets` setting). Files whose first KiB holds a private-key header are
/// excluded the same way.
pub const SECRET_NAMES: &[&str] = &[
    ".env",
    ".env.* (but the templates .env.example, .env.sample, .env.template, .env.dist)",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
];

/// The marker in the name of a temp file a restore writes before renaming it into place.
pub const TEMP_MARKER: &[u8] = b".retrace-tmp-";

/// Whether a file or directory name is hard-excluded.
#[must_use]
pub fn is_hard_excluded(name: &[u8]) -> bool {
    is_never_restored(name) || is_agent_record(name)
}

/// Whether a name is one a restore refuses to write (`.git`, `node_modules`, temp files): a
/// snapshot naming one is damaged or hostile. (An agent's record, which older versions
/// captured, is left alone instead.)
#[must_use]
pub fn is_never_restored(name: &[u8]) -> bool {
    name == b".git" || name == b"node_modules" || is_temp(name)
}

/// Whether a name is an agent's own record ([`AGENT_RECORDS`]).
#[must_use]
pub fn is_agent_record(name: &[u8]) -> bool {
    matches!(
        name,
        b".aider.chat.history.md" | b".aider.input.history" | b".aider.llm.history" | b".crush"
    ) || name.starts_with(b".aider.tags.cache.v")
}

/// `.env` templates, usually committed and holding no secrets: kept in snapshots.
const ENV_TEMPLATES: &[&[u8]] = &[b"example", b"sample", b"template", b"dist"];

/// Whether a file name is a credential's by name ([`SECRET_NAMES`]).
#[must_use]
pub fn is_secret_name(name: &[u8]) -> bool {
    name == b".env"
        || name
            .strip_prefix(b".env.")
            .is_some_and(|rest| !ENV_TEMPLATES.contains(&rest))
        || name.ends_with(b".pem")
        || name.ends_with(b".key")
        || [&b"id_rsa"[..], b"id_dsa", b"id_ecdsa", b"id_ed25519"]
            .iter()
            .any(|p| name.starts_with(p))
}

/// Whether the start of a file holds a PEM private-key header
/// (`-----BEGIN ... PRIVATE KEY-----`).
#[must_use]
pub fn looks_like_private_key(head: &[u8]) -> bool {
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    find(head, b"-----BEGIN ").is_some_and(|i| {
        let rest = &head[i..];
        let line_end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        find(&rest[..line_end], b"PRIVATE KEY-----").is_some()
    })
}

/// Whether a name is one of retrace's restore temp files (`.retrace-tmp-<pid>-<n>`, and
/// `.<name>.retrace-tmp-<pid>-<n>` as older versions named them),
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
            b".main.rs.retrace-tmp-42-7",
            b".aider.chat.history.md",
            b".aider.tags.cache.v4",
            b".crush",
        ] {
            assert!(is_hard_excluded(n), "{n:?}");
        }
        for n in [
            &b".env"[..],
            b".env.local",
            b"server.pem",
            b"tls.key",
            b"id_rsa",
            b"id_ed25519.pub",
        ] {
            assert!(is_secret_name(n), "{n:?}");
        }
        for n in [
            &b"env"[..],
            b".envrc",
            b"key.rs",
            b"pem.txt",
            b"ids.txt",
            b".env.example",
            b".env.sample",
            b".env.template",
            b".env.dist",
        ] {
            assert!(!is_secret_name(n), "{n:?}");
        }
        // A template's name with more after it is no template.
        assert!(is_secret_name(b".env.example.local"));
        assert!(is_secret_name(b".env.production"));
        assert!(looks_like_private_key(
            b"junk\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blb"
        ));
        assert!(looks_like_private_key(b"-----BEGIN RSA PRIVATE KEY-----\n"));
        assert!(!looks_like_private_key(b"-----BEGIN CERTIFICATE-----\n"));
        assert!(!looks_like_private_key(
            b"-----BEGIN PUBLIC KEY-----\nPRIVATE KEY-----"
        ));
        for n in [
            &b".gitignore"[..],
            b"env",
            b".envrc",
            b"node_modules2",
            b"src",
            b"aider.md",
            b".crushrc",
            b".aider.conf.yml",
            b".aiderignore",
        ] {
            assert!(!is_hard_excluded(n), "{n:?}");
        }
    }
}
