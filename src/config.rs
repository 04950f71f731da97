//! Settings, in layers: defaults < `~/.config/retrace/config.toml` (or
//! `$XDG_CONFIG_HOME/retrace/config.toml`) < `<workspace>/.retrace.toml` < environment. A
//! value that does not parse (`7days`, `-1`, empty) is ignored with one warning naming where
//! it came from, and the layer below applies. `retrace config` shows every effective value and
//! its source; `docs/retention.md` lists them all.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

/// Turns a session keeps by default; the oldest go first.
pub const DEFAULT_MAX_TURNS: u64 = 8000;

/// How long an undo, redo or navigation waits for another process's restore or capture
/// before answering "busy".
pub const DEFAULT_HISTORY_WAIT: Duration = Duration::from_secs(10);

/// Objects younger than this are never collected, referenced or not: a capture in another
/// process may have written them and not yet recorded the snapshot that names them.
pub const DEFAULT_GRACE_SECS: u64 = 3600;

/// What a capture does with a nested repository (a directory below the root holding its own
/// `.git`): the `nested_repos` setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NestedRepos {
    /// Recorded as a nested-repository entry; its files are neither captured nor restored.
    #[default]
    Skip,
    /// Its working files are captured like any directory's, under its own `.gitignore`
    /// files and `.git/info/exclude` (not the enclosing directories' rules); its `.git` never.
    Capture,
}

impl NestedRepos {
    /// The setting's value as written: `skip` or `capture`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            NestedRepos::Skip => "skip",
            NestedRepos::Capture => "capture",
        }
    }

    /// Reads `skip` or `capture` (any case, surrounding blanks allowed).
    #[must_use]
    pub fn parse(text: &str) -> Option<NestedRepos> {
        match text.trim().to_ascii_lowercase().as_str() {
            "skip" => Some(NestedRepos::Skip),
            "capture" => Some(NestedRepos::Capture),
            _ => None,
        }
    }
}

impl fmt::Display for NestedRepos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a step (an agent's tool call) is bracketed by captures: the `step_captures`
/// setting. Edit tools name their files and need none; this is about shell tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepCaptures {
    /// Around every shell tool while a watcher runs (milliseconds each); without one, only
    /// around commands that can destroy work (`git checkout|restore|reset|stash|clean|
    /// switch`, `rm`, `mv`, `sed -i`, a `>` redirection, `truncate`, ...).
    #[default]
    Auto,
    /// Around every shell tool, watcher or not.
    Always,
    /// Only around commands that can destroy work, watcher or not.
    Destructive,
    /// Never: a shell tool's changes are told apart from others' only at turn boundaries.
    Off,
}

impl StepCaptures {
    /// The setting's value as written.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            StepCaptures::Auto => "auto",
            StepCaptures::Always => "always",
            StepCaptures::Destructive => "destructive",
            StepCaptures::Off => "off",
        }
    }

    /// Reads `auto`, `always`, `destructive` or `off` (any case, blanks allowed).
    #[must_use]
    pub fn parse(text: &str) -> Option<StepCaptures> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(StepCaptures::Auto),
            "always" => Some(StepCaptures::Always),
            "destructive" => Some(StepCaptures::Destructive),
            "off" => Some(StepCaptures::Off),
            _ => None,
        }
    }
}

impl fmt::Display for StepCaptures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a running watcher records on its own: the `record` setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    /// Nothing: captures happen when a command, a hook or a library call asks.
    #[default]
    Off,
    /// A snapshot after each burst of writes, once the workspace has been quiet for
    /// `burst_quiet_ms` (never while a session's turn runs: its steps cover that): a local
    /// history of every editor's and every agent's saves (`docs/retention.md`, "Bursts").
    Bursts,
}

impl Record {
    /// The setting's value as written.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Record::Off => "off",
            Record::Bursts => "bursts",
        }
    }

    /// Reads `off` or `bursts` (any case, blanks allowed).
    #[must_use]
    pub fn parse(text: &str) -> Option<Record> {
        match text.trim().to_ascii_lowercase().as_str() {
            "off" => Some(Record::Off),
            "bursts" => Some(Record::Bursts),
            _ => None,
        }
    }
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a setting's value came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "from", content = "at")]
pub enum Source {
    /// Built in.
    Default,
    /// The user's config file.
    User(PathBuf),
    /// The workspace's `.retrace.toml`.
    Project(PathBuf),
    /// An environment variable.
    Env(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => write!(f, "default"),
            Source::User(p) | Source::Project(p) => write!(f, "{}", p.display()),
            Source::Env(v) => write!(f, "${v}"),
        }
    }
}

/// A value and its source.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Setting<T> {
    /// The effective value.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

impl<T> Setting<T> {
    fn new(value: T) -> Setting<T> {
        Setting {
            value,
            source: Source::Default,
        }
    }
}

/// Every setting.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    /// Days a session may stay untouched before its file history expires; fractions allowed;
    /// 0 keeps it forever. Default 7.
    pub retention_days: Setting<f64>,
    /// Bytes a workspace's store may hold before the oldest turns of the least recently used
    /// sessions are evicted; 0 = no limit. Default 2 GiB.
    pub max_store_bytes: Setting<u64>,
    /// Turns a session keeps. Default 8000.
    pub max_turns: Setting<u64>,
    /// Sessions a workspace keeps (least recently used go first). Default 64.
    pub max_sessions: Setting<u64>,
    /// Workspace stores kept under the retrace home (least recently used are set aside
    /// after a day unused). Default 64.
    pub max_workspaces: Setting<u64>,
    /// Bytes all workspace stores together may hold; the least recently used workspaces'
    /// old turns go first; 0 = no limit. Default 10 GiB.
    pub max_total_bytes: Setting<u64>,
    /// Milliseconds undo, redo and navigate wait for another process. Default 10000.
    pub history_wait_ms: Setting<u64>,
    /// Seconds an unreferenced object is kept before collection. Default 3600.
    pub gc_grace_secs: Setting<u64>,
    /// Glob patterns (relative to the workspace root) of files captured although they look
    /// like credentials. Default none.
    pub allow_secrets: Setting<Vec<String>>,
    /// Where action state for external clients is published; empty: `<home>/runtime`.
    pub runtime_dir: Setting<String>,
    /// Whether nested repositories' working files are captured (`capture`) or left out
    /// (`skip`). Default `skip`.
    pub nested_repos: Setting<NestedRepos>,
    /// Minutes a watcher (`retrace watch`) keeps running without a capture asking it
    /// anything; fractions allowed. Default 60.
    pub watch_idle_minutes: Setting<f64>,
    /// Milliseconds a capture waits for the watcher's answer before it walks instead.
    /// Default 50.
    pub watch_timeout_ms: Setting<u64>,
    /// When a shell tool's step is bracketed by captures. Default `auto`.
    pub step_captures: Setting<StepCaptures>,
    /// What a running watcher records on its own. Default `off`.
    pub record: Setting<Record>,
    /// Milliseconds the workspace must be quiet before a burst is captured. Default 1500.
    pub burst_quiet_ms: Setting<u64>,
    /// Milliseconds at least between two bursts' captures. Default 5000.
    pub burst_interval_ms: Setting<u64>,
    /// Hours during which every burst is kept; fractions allowed. Default 1.
    pub bursts_all_hours: Setting<f64>,
    /// Hours during which one burst an hour is kept (the newest of each). Default 24.
    pub bursts_hourly_hours: Setting<f64>,
    /// Days during which one burst a day is kept (the newest of each, UTC days); older
    /// bursts go. Default 7.
    pub bursts_daily_days: Setting<f64>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            retention_days: Setting::new(7.0),
            max_store_bytes: Setting::new(2 << 30),
            max_turns: Setting::new(DEFAULT_MAX_TURNS),
            max_sessions: Setting::new(64),
            max_workspaces: Setting::new(64),
            max_total_bytes: Setting::new(10 << 30),
            history_wait_ms: Setting::new(DEFAULT_HISTORY_WAIT.as_secs() * 1000),
            gc_grace_secs: Setting::new(DEFAULT_GRACE_SECS),
            allow_secrets: Setting::new(Vec::new()),
            runtime_dir: Setting::new(String::new()),
            nested_repos: Setting::new(NestedRepos::Skip),
            watch_idle_minutes: Setting::new(60.0),
            watch_timeout_ms: Setting::new(50),
            step_captures: Setting::new(StepCaptures::Auto),
            record: Setting::new(Record::Off),
            burst_quiet_ms: Setting::new(1500),
            burst_interval_ms: Setting::new(5000),
            bursts_all_hours: Setting::new(1.0),
            bursts_hourly_hours: Setting::new(24.0),
            bursts_daily_days: Setting::new(7.0),
        }
    }
}

/// A non-negative number of days (`7`, `0.5`).
fn parse_days(s: &str) -> Option<f64> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|d| d.is_finite() && *d >= 0.0)
}

/// A non-negative integer, optionally with a byte unit: `500000`, `500MB`, `2GiB`, `1.5G`.
/// A byte count as a setting is written: the largest binary unit that divides it exactly
/// (`2 GiB`, `512 MiB`), else bytes (`1000 B`). `parse_bytes` reads it back.
fn bytes_text(n: u64) -> String {
    for (unit, size) in [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ] {
        if n >= size && n.is_multiple_of(size) {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} B")
}

/// A byte count for reports, rounded to one decimal in the largest binary unit it fills
/// (`12.3 KiB`, `2 GiB`, `999 B`). Settings use the exact `bytes_text`, which reads back.
#[must_use]
pub fn bytes_approx(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    #[allow(clippy::cast_precision_loss)]
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    // Compare the rounded value, so that 1023.96 KiB reads `1 MiB`, not `1024 KiB`.
    while (v * 10.0).round() >= 10240.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    let text = format!("{v:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text} {}", UNITS[unit])
}

fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" => 1e12,
        "tib" => 1024.0f64.powi(4),
        _ => return None,
    };
    let v = n * mult;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    (v < 1.8e19).then_some(v as u64)
}

fn parse_u64(s: &str) -> Option<u64> {
    s.trim().parse().ok()
}

/// The user's config file path.
#[must_use]
pub fn user_file() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("XDG_CONFIG_HOME")
        .or_else(|| env("HOME").map(|h| h.join(".config")))
        .map(|d| d.join("retrace").join("config.toml"))
}

impl Settings {
    /// Every setting as (name, value, source), for display.
    #[must_use]
    pub fn rows<'s>(&'s self) -> Vec<(&'static str, String, &'s Source)> {
        fn row<'s, T: fmt::Debug>(
            n: &'static str,
            s: &'s Setting<T>,
        ) -> (&'static str, String, &'s Source) {
            (n, format!("{:?}", s.value), &s.source)
        }
        let bytes = |n: &'static str, s: &'s Setting<u64>| (n, bytes_text(s.value), &s.source);
        vec![
            row("retention_days", &self.retention_days),
            bytes("max_store_bytes", &self.max_store_bytes),
            bytes("max_total_bytes", &self.max_total_bytes),
            row("max_turns", &self.max_turns),
            row("max_sessions", &self.max_sessions),
            row("max_workspaces", &self.max_workspaces),
            row("history_wait_ms", &self.history_wait_ms),
            row("gc_grace_secs", &self.gc_grace_secs),
            row("allow_secrets", &self.allow_secrets),
            row("runtime_dir", &self.runtime_dir),
            row("watch_idle_minutes", &self.watch_idle_minutes),
            row("watch_timeout_ms", &self.watch_timeout_ms),
            (
                "nested_repos",
                format!("{:?}", self.nested_repos.value.as_str()),
                &self.nested_repos.source,
            ),
            (
                "step_captures",
                format!("{:?}", self.step_captures.value.as_str()),
                &self.step_captures.source,
            ),
            (
                "record",
                format!("{:?}", self.record.value.as_str()),
                &self.record.source,
            ),
            row("burst_quiet_ms", &self.burst_quiet_ms),
            row("burst_interval_ms", &self.burst_interval_ms),
            row("bursts_all_hours", &self.bursts_all_hours),
            row("bursts_hourly_hours", &self.bursts_hourly_hours),
            row("bursts_daily_days", &self.bursts_daily_days),
        ]
    }

    /// The `allow_secrets` patterns compiled (None when there are none).
    #[must_use]
    pub fn allowed_secrets(&self) -> Option<globset::GlobSet> {
        if self.allow_secrets.value.is_empty() {
            return None;
        }
        let mut b = globset::GlobSetBuilder::new();
        for p in &self.allow_secrets.value {
            if let Ok(g) = globset::Glob::new(p) {
                b.add(g);
            }
        }
        b.build().ok()
    }

    /// Defaults, then the user's file, then `<root>/.retrace.toml` (when `root` is given),
    /// then the environment. Returns the settings and one warning per ignored value.
    #[must_use]
    pub fn load(root: Option<&Path>) -> (Settings, Vec<String>) {
        let mut s = Settings::default();
        let mut warnings = Vec::new();
        if let Some(f) = user_file() {
            s.apply_file(&f, &Source::User(f.clone()), &mut warnings);
        }
        if let Some(r) = root {
            let f = r.join(".retrace.toml");
            s.apply_file(&f, &Source::Project(f.clone()), &mut warnings);
        }
        s.apply_env(&mut warnings);
        (s, warnings)
    }

    fn apply_file(&mut self, path: &Path, source: &Source, warnings: &mut Vec<String>) {
        let text = match std::fs::read(path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(t) => t,
                Err(e) => {
                    warnings.push(format!(
                        "ignoring {}: not UTF-8 text (invalid byte at offset {}); save it as \
                         UTF-8 TOML",
                        path.display(),
                        e.utf8_error().valid_up_to()
                    ));
                    return;
                }
            },
            // No file is the usual case: nothing to say.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                warnings.push(format!(
                    "ignoring {}: cannot read it ({e}); check its permissions",
                    path.display()
                ));
                return;
            }
        };
        let table: toml::Table = match text.parse() {
            Ok(t) => t,
            Err(e) => {
                warnings.push(format!(
                    "ignoring {}: not valid TOML ({})",
                    path.display(),
                    e.message()
                ));
                return;
            }
        };
        for (key, value) in &table {
            if key == "allow_secrets" {
                let list: Option<Vec<String>> = value
                    .as_array()
                    .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect());
                match list.filter(|l| l.iter().all(|p| globset::Glob::new(p).is_ok())) {
                    Some(list) => {
                        self.allow_secrets = Setting {
                            value: list,
                            source: source.clone(),
                        }
                    }
                    None => warnings.push(format!(
                        "ignoring allow_secrets in {}: not a list of glob patterns",
                        path.display()
                    )),
                }
                continue;
            }
            // Numbers may be written bare or quoted ("2GiB"); both go through one parser.
            let text = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                other => other.to_string(),
            };
            if !self.set(key, &text, source, warnings) {
                warnings.push(format!(
                    "ignoring unknown setting {key} in {}; see `retrace config`",
                    path.display()
                ));
            }
        }
    }

    fn apply_env(&mut self, warnings: &mut Vec<String>) {
        for (var, key) in [
            ("RETRACE_RETENTION_DAYS", "retention_days"),
            ("RETRACE_MAX_STORE_BYTES", "max_store_bytes"),
            ("RETRACE_MAX_TOTAL_BYTES", "max_total_bytes"),
            ("RETRACE_HISTORY_WAIT_MS", "history_wait_ms"),
            ("RETRACE_RUNTIME_DIR", "runtime_dir"),
            ("RETRACE_NESTED_REPOS", "nested_repos"),
            ("RETRACE_WATCH_IDLE_MINUTES", "watch_idle_minutes"),
            ("RETRACE_WATCH_TIMEOUT_MS", "watch_timeout_ms"),
            ("RETRACE_STEP_CAPTURES", "step_captures"),
            ("RETRACE_RECORD", "record"),
            ("RETRACE_BURST_QUIET_MS", "burst_quiet_ms"),
            ("RETRACE_BURST_INTERVAL_MS", "burst_interval_ms"),
        ] {
            if let Some(v) = std::env::var_os(var) {
                let v = v.to_string_lossy().into_owned();
                self.set(key, &v, &Source::Env(var.into()), warnings);
            }
        }
    }

    /// Sets `key` from `text`; a value that does not parse is ignored with a warning.
    /// Returns whether the key is known.
    fn set(&mut self, key: &str, text: &str, source: &Source, warnings: &mut Vec<String>) -> bool {
        let mut bad = |what: &str, default: String| {
            warnings.push(format!(
                "ignoring {key} = {text:?} from {source}: {what}; using {default}"
            ));
        };
        macro_rules! put {
            ($field:ident, $parse:expr, $what:expr) => {{
                match $parse(text) {
                    Some(v) => {
                        self.$field = Setting {
                            value: v,
                            source: source.clone(),
                        }
                    }
                    None => bad($what, self.$field.value.to_string()),
                }
                true
            }};
        }
        match key {
            "retention_days" => put!(
                retention_days,
                parse_days,
                "not a non-negative number of days"
            ),
            "max_store_bytes" => put!(max_store_bytes, parse_bytes, "not a byte count like 2GiB"),
            "max_total_bytes" => put!(max_total_bytes, parse_bytes, "not a byte count like 10GiB"),
            "max_turns" => put!(
                max_turns,
                |t| parse_u64(t).filter(|n| *n > 0),
                "not a positive integer"
            ),
            "max_sessions" => put!(
                max_sessions,
                |t| parse_u64(t).filter(|n| *n > 0),
                "not a positive integer"
            ),
            "max_workspaces" => put!(
                max_workspaces,
                |t| parse_u64(t).filter(|n| *n > 0),
                "not a positive integer"
            ),
            "history_wait_ms" => put!(history_wait_ms, parse_u64, "not a number of milliseconds"),
            "gc_grace_secs" => put!(gc_grace_secs, parse_u64, "not a number of seconds"),
            "runtime_dir" => put!(
                runtime_dir,
                |t: &str| Some(t.trim().to_string()).filter(|t| !t.is_empty()),
                "not a directory"
            ),
            "watch_idle_minutes" => put!(
                watch_idle_minutes,
                |t: &str| parse_days(t).filter(|m| *m > 0.0),
                "not a positive number of minutes"
            ),
            "watch_timeout_ms" => put!(watch_timeout_ms, parse_u64, "not a number of milliseconds"),
            "nested_repos" => put!(
                nested_repos,
                NestedRepos::parse,
                "not \"skip\" or \"capture\""
            ),
            "step_captures" => put!(
                step_captures,
                StepCaptures::parse,
                "not \"auto\", \"always\", \"destructive\" or \"off\""
            ),
            "record" => put!(record, Record::parse, "not \"off\" or \"bursts\""),
            "burst_quiet_ms" => put!(
                burst_quiet_ms,
                |t| parse_u64(t).filter(|n| *n > 0),
                "not a positive number of milliseconds"
            ),
            "burst_interval_ms" => put!(
                burst_interval_ms,
                parse_u64,
                "not a number of milliseconds"
            ),
            "bursts_all_hours" => put!(bursts_all_hours, parse_days, "not a non-negative number of hours"),
            "bursts_hourly_hours" => put!(
                bursts_hourly_hours,
                parse_days,
                "not a non-negative number of hours"
            ),
            "bursts_daily_days" => put!(bursts_daily_days, parse_days, "not a non-negative number of days"),
            _ => false,
        }
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
