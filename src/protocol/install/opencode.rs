//! `retrace install|uninstall opencode`: the OpenCode plugin (`adapters/opencode/retrace.ts`)
//! written into OpenCode's plugin directory, and `"snapshot": false` set in its config, so
//! OpenCode keeps no shadow git repository and its `/undo` restores files through retrace.
//!
//! The config (`opencode.json`, or `opencode.jsonc`; comments and trailing commas are
//! kept) is edited as text like the agents' settings: only the `snapshot` member changes.
//! Installing twice changes nothing; uninstall removes the plugin, puts back the `snapshot`
//! value found before (removes the member when there was none, leaves it when the user has
//! changed it since) and removes what install created once nothing else is in it.

use std::path::{Path, PathBuf};

use super::{
    Changes, Installed, Node, Style, found_on_path, line_indent, read_text, recorded_at,
    remember_at, scan, splice, write_atomic, ws_before,
};

/// The plugin, as `retrace install opencode` writes it.
pub const PLUGIN: &str = include_str!("../../../adapters/opencode/retrace.ts");

/// How every version of the plugin begins: a file that does is retrace's to replace.
const MARKER: &str = "/**\n * retrace for OpenCode:";

/// The config member retrace sets.
const KEY: &str = "snapshot";

/// The config member that names plugins by npm package, and retrace's package.
const PLUGINS: &str = "plugin";
/// The npm package of the plugin (`npm/stage.mjs`), which OpenCode installs by name with the
/// `retrace` binary it depends on.
pub const NPM_PLUGIN: &str = "retrace-opencode";
/// The record's name for the package name an install appended to a `plugin` list of the
/// user's (only such an entry, or a member it added, is taken out by uninstall).
const PLUGIN_ENTRY: &str = "plugin:retrace-opencode";

/// Where the plugin and the config go: a project's `.opencode/` and `opencode.json`, or the
/// user's `~/.config/opencode/`.
#[derive(Clone, Debug)]
pub struct OpenCode {
    /// The directory holding `plugins/`: `<project>/.opencode` or the user's config
    /// directory (`$XDG_CONFIG_HOME/opencode`, else `~/.config/opencode`).
    pub dir: PathBuf,
    /// The config file whose `snapshot` is set.
    pub config: PathBuf,
    /// Whether this is the user's (every project's) rather than one project's.
    pub user: bool,
    /// The record of what an install found and created (`installed.json` in the retrace
    /// home), for uninstall.
    pub record: PathBuf,
    /// Name the plugin's npm package in the config (`"plugin": ["retrace-opencode"]`)
    /// instead of writing the plugin file (`retrace install opencode --npm`).
    pub by_name: bool,
}

impl OpenCode {
    /// The project's (or, with `user`, the user's) OpenCode directories, remembering what
    /// an install does in the retrace home `home`.
    #[must_use]
    pub fn new(project: &Path, user: bool, home: &Path) -> OpenCode {
        let (dir, config_dir) = if user {
            let dir = config_home(
                std::env::var_os("XDG_CONFIG_HOME"),
                std::env::var_os("HOME"),
            )
            .join("opencode");
            (dir.clone(), dir)
        } else {
            (project.join(".opencode"), project.to_path_buf())
        };
        // OpenCode reads both; an existing `opencode.jsonc` alone is the one to edit.
        let json = config_dir.join("opencode.json");
        let jsonc = config_dir.join("opencode.jsonc");
        let config = if !json.exists() && jsonc.exists() {
            jsonc
        } else {
            json
        };
        OpenCode {
            dir,
            config,
            user,
            record: home.join("installed.json"),
            by_name: false,
        }
    }

    /// The plugin file.
    #[must_use]
    pub fn plugin(&self) -> PathBuf {
        self.dir.join("plugins").join("retrace.ts")
    }

    /// What the user does next, in plain words.
    #[must_use]
    #[allow(clippy::unused_self)] // as every install target's: what follows this install
    pub fn next_step(&self) -> &'static str {
        "Next: start `opencode` here (one already running does not load the plugin). \
         OpenCode's /undo, /redo and message revert now restore the files through retrace, \
         shell edits included, and OpenCode keeps no snapshot repository of its own. A file \
         edited since a turn is never overwritten: retrace says which and changes nothing."
    }
}

/// The user's config directory as OpenCode finds it: `$XDG_CONFIG_HOME` when it is an
/// absolute path, else `~/.config`.
fn config_home(xdg: Option<std::ffi::OsString>, home: Option<std::ffi::OsString>) -> PathBuf {
    xdg.map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .unwrap_or_else(|| {
            home.map_or_else(|| PathBuf::from("/"), PathBuf::from)
                .join(".config")
        })
}

/// Writes the plugin (replacing an older version of it) and sets `"snapshot": false`,
/// remembering what was there before.
///
/// # Errors
/// A message naming the file when it cannot be read, parsed or written, or when a
/// `retrace.ts` that is not retrace's is in the way (then nothing is changed: with
/// OpenCode's snapshots off and no plugin, `/undo` would not restore files).
pub fn install(target: &OpenCode, exe: &Path) -> Result<Changes, String> {
    let plugin = target.plugin();
    let mut record = recorded_at(&target.record, &target.config);
    let existing = read_text(&plugin)?;
    if let Some(text) = &existing
        && !target.by_name
        && text != PLUGIN
        && !text.starts_with(MARKER)
    {
        return Err(format!(
            "{} exists and is not retrace's plugin; nothing was changed. Move it away and run \
             this again",
            plugin.display()
        ));
    }
    let original = read_text(&target.config)?;
    let (text, blank) = match &original {
        Some(t) if !t.trim().is_empty() => (t.clone(), None),
        Some(t) => ("{}\n".to_string(), Some(t.clone())),
        None => ("{}\n".to_string(), None),
    };
    let plain = plain(&text);
    let root = scan(&plain, &target.config)?;
    let edited = match root.member(KEY) {
        Some((_, value)) if &text[value.start..value.end] == "false" => None,
        Some((_, value)) => {
            record
                .set
                .entry(KEY.to_string())
                .or_insert_with(|| Some(text[value.start..value.end].to_string()));
            Some(splice(&text, value.start..value.end, "false"))
        }
        None => {
            record.set.insert(KEY.to_string(), None);
            Some(insert_member(&text, &plain, &root, KEY, "false"))
        }
    };
    let base = edited.as_deref().unwrap_or(&text);
    let edited = if target.by_name {
        with_package(base, &target.config, &mut record)?.or(edited)
    } else {
        // The file is the plugin now: the package named too would load it twice.
        let dropped = without_package(base, &target.config, record.set.get(PLUGINS) == Some(&None))?;
        if dropped.is_some() {
            record.set.remove(PLUGIN_ENTRY);
        }
        dropped.or(edited)
    };
    if edited.is_some() {
        super::writable(&target.config)?;
        match (&original, blank) {
            (None, _) => record.create(&super::follow_links(&target.config)?),
            (Some(_), Some(b)) => record.blank = Some(b),
            // An empty object comes back as it was written (`{}`, `{ }`...).
            (Some(t), None) if root.len() == 0 => record.blank = Some(t.clone()),
            _ => {}
        }
    }
    if existing.is_none() && !target.by_name {
        record.create(&plugin);
    }
    remember_at(&target.record, &target.config, &record)?;
    let mut changes = Changes::default();
    match existing {
        // By name: a copy of the file would load the plugin twice.
        Some(t) if target.by_name && t.starts_with(MARKER) => {
            std::fs::remove_file(&plugin)
                .map_err(|e| format!("cannot remove {}: {e}", plugin.display()))?;
            changes.push(&plugin, "removed the copied plugin: OpenCode loads it by name now");
        }
        _ if target.by_name => {}
        None => {
            write_atomic(&plugin, PLUGIN, false)?;
            changes.push(&plugin, "added the retrace plugin");
        }
        Some(t) if t != PLUGIN => {
            write_atomic(&plugin, PLUGIN, false)?;
            changes.push(&plugin, "updated the retrace plugin");
        }
        Some(_) => {}
    }
    if let Some(text) = edited {
        write_atomic(&target.config, &text, false)?;
        changes.push(
            &target.config,
            if target.by_name {
                "named the plugin \"retrace-opencode\" at this version (OpenCode installs it \
                 from npm, with the retrace binary) and set \"snapshot\": false"
            } else {
                "set \"snapshot\": false (OpenCode's own snapshots off)"
            },
        );
    }
    for later in overriding(target) {
        changes.lines.push(format!(
            "note: {} sets \"snapshot\" too, and OpenCode reads it after {}: set it to false \
             there as well, or OpenCode keeps its own snapshots",
            later.display(),
            target.config.display()
        ));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !target.by_name && !found_on_path(exe, &path) && std::env::var_os("RETRACE_BIN").is_none()
    {
        changes.lines.push(format!(
            "note: the plugin runs the `retrace` it finds on PATH, and {} is not on PATH: add \
             its directory to PATH, or set RETRACE_BIN={} where OpenCode runs",
            exe.display(),
            exe.display()
        ));
    }
    Ok(changes)
}

/// The config files OpenCode reads after the target's (a project's `opencode.jsonc` after its
/// `opencode.json`, then `.opencode/opencode.json[c]`) that set `snapshot` to anything but
/// `false`: theirs is the value that counts.
fn overriding(target: &OpenCode) -> Vec<PathBuf> {
    let Some(dir) = target.config.parent() else {
        return Vec::new();
    };
    let mut later = vec![dir.join("opencode.jsonc")];
    if !target.user {
        later.extend([
            target.dir.join("opencode.json"),
            target.dir.join("opencode.jsonc"),
        ]);
    }
    later
        .into_iter()
        .filter(|p| *p != target.config)
        .filter(|p| {
            let Ok(Some(text)) = read_text(p) else {
                return false;
            };
            let plain = plain(&text);
            scan(&plain, p).is_ok_and(|root| {
                root.member(KEY)
                    .is_some_and(|(_, v)| &plain[v.start..v.end] != "false")
            })
        })
        .collect()
}

/// Removes the plugin, puts `snapshot` back as install found it (unless changed since), and
/// removes the files and directories install created once nothing else is in them.
///
/// # Errors
/// As [`install`].
pub fn uninstall(target: &OpenCode) -> Result<Changes, String> {
    let plugin = target.plugin();
    let record = recorded_at(&target.record, &target.config);
    let mut changes = Changes::default();
    match read_text(&plugin)? {
        Some(t) if t.starts_with(MARKER) => {
            std::fs::remove_file(&plugin)
                .map_err(|e| format!("cannot remove {}: {e}", plugin.display()))?;
            changes.push(&plugin, "removed");
        }
        Some(_) => changes.push(&plugin, "left alone: not retrace's"),
        None => {}
    }
    let added = record.set.get(PLUGINS);
    if (added.is_some() || record.set.contains_key(PLUGIN_ENTRY))
        && let Some(text) = read_text(&target.config)?
        && let Some(text) = without_package(&text, &target.config, added == Some(&None))?
    {
        write_atomic(&target.config, &text, false)?;
        changes.push(&target.config, "removed the plugin \"retrace-opencode\"");
    }
    if let Some(before) = record.set.get(KEY)
        && let Some(original) = read_text(&target.config)?
        && !original.trim().is_empty()
    {
        let plain = plain(&original);
        let root = scan(&plain, &target.config)?;
        match root.member(KEY) {
            Some((i, value)) if &original[value.start..value.end] == "false" => {
                let mut text = match before {
                    Some(raw) => splice(&original, value.start..value.end, raw),
                    None => remove_member(&original, &plain, &root, i),
                };
                let real = super::follow_links(&target.config)?;
                let empty = super::is_empty_object(&self::plain(&text));
                if empty && record.created(&real) {
                    super::writable(&target.config)?;
                    std::fs::remove_file(&real)
                        .map_err(|e| format!("cannot remove {}: {e}", real.display()))?;
                    changes.push(&target.config, "removed the file, which install created");
                } else {
                    if empty && let Some(blank) = &record.blank {
                        text.clone_from(blank);
                    }
                    write_atomic(&target.config, &text, false)?;
                    let what = match before {
                        Some(raw) => format!("put \"snapshot\" back to {raw}"),
                        None => "removed \"snapshot\", which install added".to_string(),
                    };
                    changes.push(&target.config, what);
                }
            }
            Some(_) => changes.push(
                &target.config,
                "left \"snapshot\" alone: it was changed since install set it",
            ),
            None => {}
        }
    } else if !record.set.contains_key(KEY)
        && let Ok(Some(text)) = read_text(&target.config)
        && let Ok(root) = scan(&plain(&text), &target.config)
        && root
            .member(KEY)
            .is_some_and(|(_, v)| &text[v.start..v.end] == "false")
    {
        changes.push(
            &target.config,
            "left \"snapshot\": false alone: no record of an install setting it (another \
             RETRACE_HOME, or set by hand). Without the plugin OpenCode's /undo restores no \
             files: remove it to turn OpenCode's own snapshots back on",
        );
    }
    for dir in record.created.iter().rev().map(Path::new) {
        if dir.symlink_metadata().is_ok_and(|m| m.is_dir()) && std::fs::remove_dir(dir).is_ok() {
            changes.push(dir, "removed the directory, which install created");
        }
    }
    remember_at(&target.record, &target.config, &Installed::default())?;
    Ok(changes)
}

/// The package as an install names it: at this retrace's version, so that the plugin OpenCode
/// installs speaks the same protocol and store as the `retrace` the user runs.
fn pinned() -> String {
    format!("{NPM_PLUGIN}@{}", env!("CARGO_PKG_VERSION"))
}

/// Whether the `plugin` entry `node` (a JSON string in `plain`) names retrace's package,
/// with or without a version (`retrace-opencode@0.2.0`).
fn names_ours(plain: &str, node: &Node) -> bool {
    serde_json::from_str::<String>(&plain[node.start..node.end]).is_ok_and(|name| {
        name == NPM_PLUGIN
            || name
                .strip_prefix(NPM_PLUGIN)
                .is_some_and(|v| v.starts_with('@'))
    })
}

/// `text` with retrace's package in its `plugin` list (the member added when missing,
/// which `record` keeps for uninstall); `None` when it is there already.
///
/// # Errors
/// When `plugin` is not a list, or the text is not JSON.
fn with_package(text: &str, path: &Path, record: &mut Installed) -> Result<Option<String>, String> {
    let plain = plain(text);
    let root = scan(&plain, path)?;
    let Some((_, list)) = root.member(PLUGINS) else {
        record.set.insert(PLUGINS.to_string(), None);
        let value = serde_json::to_string(&[pinned()]).unwrap_or_default();
        return Ok(Some(insert_member(text, &plain, &root, PLUGINS, &value)));
    };
    let Some(items) = list.elements() else {
        return Err(format!(
            "{}: \"plugin\" is not a list of package names; fix it first (nothing was changed)",
            path.display()
        ));
    };
    if items.iter().any(|n| names_ours(&plain, n)) {
        return Ok(None);
    }
    record.set.insert(PLUGIN_ENTRY.to_string(), None);
    super::append(text, list, None, &pinned(), &Style::of(&plain, &root)).map(Some)
}

/// `text` without retrace's package in its `plugin` list (and without the member when
/// `drop_member` and nothing else is left in it); `None` when it names none.
///
/// # Errors
/// When the text is not JSON.
fn without_package(text: &str, path: &Path, drop_member: bool) -> Result<Option<String>, String> {
    let mut text = text.to_string();
    let mut changed = false;
    loop {
        let plain = plain(&text);
        if plain.trim().is_empty() {
            break;
        }
        let root = scan(&plain, path)?;
        let Some((at, list)) = root.member(PLUGINS) else {
            break;
        };
        let Some(items) = list.elements() else {
            break;
        };
        if let Some(i) = items.iter().position(|n| names_ours(&plain, n)) {
            text = super::remove(&text, list, i);
            changed = true;
            continue;
        }
        if changed && items.is_empty() && drop_member {
            text = remove_member(&text, &plain, &root, at);
        }
        break;
    }
    Ok(changed.then_some(text))
}

/// `text` (JSON with comments) with every comment and trailing comma turned into spaces,
/// byte for byte, so that it is plain JSON whose values sit where they sit in `text`.
fn plain(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    // Where the last `,` outside strings is, while only blanks follow it.
    let mut comma: Option<usize> = None;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                comma = None;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |e| i + 2 + e + 2);
                for b in &mut out[i..end] {
                    if *b != b'\n' && *b != b'\r' {
                        *b = b' ';
                    }
                }
                i = end;
            }
            b',' => {
                comma = Some(i);
                i += 1;
            }
            b'}' | b']' => {
                if let Some(c) = comma.take() {
                    out[c] = b' ';
                }
                i += 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            _ => {
                comma = None;
                i += 1;
            }
        }
    }
    // Only ASCII bytes were replaced, each by a space: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// `text` with the member `"key": value` added to the object `root`: after its last member,
/// on a line of its own when the members are, else right after the `{`.
fn insert_member(text: &str, plain: &str, root: &Node, key: &str, value: &str) -> String {
    let style = Style::of(plain, root);
    let quoted = serde_json::to_string(key).unwrap_or_else(|_| format!("\"{key}\""));
    if let Some(&(start, end)) = root.spans().last() {
        let ws = ws_before(plain, start);
        let sep = if ws.contains('\n') {
            format!("{}{}", style.newline, line_indent(text, start))
        } else {
            " ".to_string()
        };
        return splice(text, end..end, &format!(",{sep}{quoted}: {value}"));
    }
    let line = line_indent(text, root.start);
    let item = format!(
        "{nl}{line}{unit}{quoted}: {value}",
        nl = style.newline,
        unit = style.unit
    );
    // An object with nothing but blanks inside gets its closing brace on a line of its own.
    if plain[root.start + 1..root.end - 1] == text[root.start + 1..root.end - 1]
        && text[root.start + 1..root.end - 1].trim().is_empty()
    {
        return splice(
            text,
            root.start + 1..root.end - 1,
            &format!("{item}{}{line}", style.newline),
        );
    }
    splice(text, root.start + 1..root.start + 1, &item)
}

/// `text` without member `i` of `root`, and the separator install put before it (or the
/// comma after it).
fn remove_member(text: &str, plain: &str, root: &Node, i: usize) -> String {
    let spans = root.spans();
    let (start, end) = spans[i];
    if i > 0 {
        let previous = spans[i - 1].1;
        let between = &plain[previous..start];
        if between.trim_start().starts_with(',') && between.trim() == "," {
            return splice(text, previous..end, "");
        }
    }
    // Up to the next member, past a comma that follows; else from the `{` side's blanks.
    let after = &plain[end..];
    let rest = after.trim_start();
    if let Some(past) = rest.strip_prefix(',') {
        let next = plain.len() - past.trim_start().len();
        return splice(text, start..next, "");
    }
    let from = start - ws_before(plain, start).len();
    splice(text, from..end, "")
}

#[cfg(test)]
#[path = "opencode_tests.rs"]
mod tests;
