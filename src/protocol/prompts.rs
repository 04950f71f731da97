//! The prompts an agent without hooks records on disk, read while `retrace wrap` runs it, so
//! that each prompt begins a turn of its own named by it. Read-only and tolerant: a record
//! that cannot be found or read gives no prompts (the run is then one turn with a step per
//! burst), never a failure. `docs/adapters.md` says what each agent gives.

use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// New prompts as an agent records them.
pub trait PromptSource {
    /// The prompts recorded since the last call (complete ones only), oldest first.
    fn poll(&mut self) -> Vec<String>;
    /// Where it reads, for messages.
    fn describe(&self) -> String;
}

/// The prompt source for the wrapped command `argv`, run in `cwd`, if its agent records
/// prompts retrace can read.
#[must_use]
pub fn source_for(argv: &[OsString], cwd: &Path) -> Option<Box<dyn PromptSource>> {
    let program = Path::new(argv.first()?).file_name()?.to_str()?;
    match program {
        "aider" => Some(Box::new(AiderHistory::new(&aider_history_file(argv, cwd)))),
        _ => None,
    }
}

/// Where Aider writes its chat history: `--chat-history-file`, else
/// `AIDER_CHAT_HISTORY_FILE`, else `.aider.chat.history.md` in the git repository's root
/// holding `cwd` (Aider's own rule, with `--no-git` too), else in `cwd`.
#[must_use]
pub fn aider_history_file(argv: &[OsString], cwd: &Path) -> PathBuf {
    let mut given: Option<OsString> = None;
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        let text = a.to_string_lossy();
        if text == "--chat-history-file" {
            given = args.next().cloned();
        } else if let Some(v) = text.strip_prefix("--chat-history-file=") {
            given = Some(v.into());
        }
    }
    let given = given.or_else(|| std::env::var_os("AIDER_CHAT_HISTORY_FILE"));
    if let Some(g) = given.filter(|g| !g.is_empty()) {
        return cwd.join(g);
    }
    let root = cwd
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(cwd);
    // `.aider.conf.yml` in the working directory, the git root, then the home directory,
    // the first that sets it (Aider's own order).
    let home = std::env::var_os("HOME").map(PathBuf::from);
    for dir in [Some(cwd), Some(root), home.as_deref()].into_iter().flatten() {
        if let Some(v) = yaml_value(&dir.join(".aider.conf.yml"), "chat-history-file") {
            return cwd.join(v);
        }
    }
    root.join(".aider.chat.history.md")
}

/// The plain scalar value of a top-level `key: value` line of a YAML file (quotes taken
/// off), if the file has one: enough for the one setting read here, without a YAML parser.
fn yaml_value(path: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let v = l.strip_prefix(key)?.trim_start().strip_prefix(':')?;
        let v = v.split(" #").next()?.trim().trim_matches(|c| c == '"' || c == '\'');
        (!v.is_empty()).then(|| v.to_string())
    })
}

/// Aider's `.aider.chat.history.md`: each prompt is appended, before the model is asked, as
/// a block of `#### <line>  ` lines (one per line of the prompt, each ending in two spaces),
/// in one write. (In architect mode the architect's plan is passed on as the editor's
/// prompt, and recorded as one: such a prompt makes two turns.) Commands
/// (`/add`, `/ask …`) are not prompts: `/ask what?` is followed by `#### what?` when Aider
/// runs it, which is.
pub struct AiderHistory {
    path: PathBuf,
    /// Bytes read so far (the file's length when the run began: earlier prompts are not
    /// this run's).
    offset: u64,
    /// A line read without its newline yet.
    partial: Vec<u8>,
    /// The file's inode: another file put in its place is read from its start.
    inode: Option<u64>,
}

impl AiderHistory {
    /// Reads `path` from its end as it is now.
    #[must_use]
    pub fn new(path: &Path) -> AiderHistory {
        let meta = std::fs::metadata(path).ok();
        AiderHistory {
            path: path.to_path_buf(),
            offset: meta.as_ref().map_or(0, std::fs::Metadata::len),
            partial: Vec::new(),
            inode: meta.map(|m| m.ino()),
        }
    }

    /// The prompts in `text` (whole lines), oldest first.
    #[must_use]
    pub fn prompts(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut block: Option<Vec<&str>> = None;
        for line in text.lines() {
            // Aider ends each line of a prompt with two spaces (a markdown line break); a
            // `####` heading in the model's reply has none.
            match line.strip_prefix("#### ").and_then(|l| l.strip_suffix("  ")) {
                Some(l) => block.get_or_insert_with(Vec::new).push(l),
                None => {
                    if let Some(b) = block.take() {
                        out.push(b.join("\n"));
                    }
                }
            }
        }
        if let Some(b) = block {
            out.push(b.join("\n"));
        }
        out.retain(|p| !p.starts_with('/') && p != "<blank>" && !p.trim().is_empty());
        out
    }
}

impl PromptSource for AiderHistory {
    fn poll(&mut self) -> Vec<String> {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let Ok(meta) = f.metadata() else {
            return Vec::new();
        };
        let len = meta.len();
        if len < self.offset || self.inode.is_some_and(|i| i != meta.ino()) {
            // Truncated, or another file in its place: read it from the start.
            self.offset = 0;
            self.partial.clear();
        }
        self.inode = Some(meta.ino());
        if len == self.offset || f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut bytes = std::mem::take(&mut self.partial);
        let Ok(n) = f.take(len - self.offset).read_to_end(&mut bytes) else {
            return Vec::new();
        };
        self.offset += n as u64;
        // Keep an unfinished last line for the next poll.
        let cut = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        self.partial = bytes.split_off(cut);
        AiderHistory::prompts(&String::from_utf8_lossy(&bytes))
    }

    fn describe(&self) -> String {
        format!("Aider's chat history {}", self.path.display())
    }
}

#[cfg(test)]
#[path = "prompts_tests.rs"]
mod tests;
