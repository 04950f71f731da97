//! The agent process behind a hook: the owner of the turn a prompt hook begins. The hook's
//! parent is often not the agent but something that ran the hook command for it and exits
//! with it — the agent's `sh -c`, or a wrapper in the command itself (`timeout 30 retrace
//! hook …`, `direnv exec . retrace hook …`). Such an owner dies at once, and an interrupted
//! turn would then look like one whose agent died (conversation-only). So the walk goes up
//! past every such process to the first ancestor that is none.

/// Programs that run a command and are not the agent. Most of them exec it (their pid is
/// then the command's), but `timeout` and `flock` wait for it, and a chain such as
/// `timeout 30 sh -c '…'` puts them above the shell.
const WRAPPERS: &[&str] = &[
    "chrt", "direnv", "env", "flock", "ionice", "nice", "nohup", "prlimit", "setsid", "stdbuf",
    "taskset", "time", "timeout",
];

/// Shells: a wrapper when they run a command (`-c`) or a script, the agent's (or the user's)
/// own shell when interactive.
const SHELLS: &[&str] = &["ash", "bash", "dash", "fish", "ksh", "mksh", "sh", "zsh"];

/// How far up the walk goes: no wrapper chain is this long.
const MAX_DEPTH: usize = 16;

/// The process that owns a turn begun by this hook: the first ancestor that is not a
/// wrapper (a program that runs a command, or a shell running one); the topmost wrapper when every ancestor below init is one.
#[must_use]
pub fn agent_pid() -> u32 {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..MAX_DEPTH {
        if !runs_a_command(pid) {
            return pid;
        }
        match parent_of(pid) {
            Some(p) if p > 1 => pid = p,
            _ => return pid,
        }
    }
    pid
}

/// Whether process `pid` only runs a command for its parent, as far as the system tells (a
/// process it cannot read is taken for the agent). The npm package's launcher (`node
/// …/retrace-cli/bin/retrace`, which names itself in `RETRACE_LAUNCHER_PID` for the binary it
/// starts) is one.
fn runs_a_command(pid: u32) -> bool {
    if std::env::var("RETRACE_LAUNCHER_PID").is_ok_and(|l| l == pid.to_string()) {
        return true;
    }
    let (comm, exe, argv) = crate::platform::process_command(pid);
    let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    [comm.as_str(), exe.as_str()]
        .iter()
        .any(|name| !name.is_empty() && is_runner(name, &argv))
}

/// Whether a process named `name` (its `comm` or its executable's file name) with arguments
/// `argv` (`argv[0]` first) runs a command for its parent: a [`WRAPPERS`] program, or one of
/// the [`SHELLS`] given `-c` or a script.
fn is_runner(name: &str, argv: &[&[u8]]) -> bool {
    if WRAPPERS.contains(&name) {
        return true;
    }
    if !SHELLS.contains(&name) {
        return false;
    }
    // An interactive shell has options only (`-l`, `-i`, `--login`); `-c`, in any cluster
    // (`-lc`), or an operand (a script) makes it a runner.
    argv.iter().skip(1).any(|a| match a.strip_prefix(b"-") {
        None => true,
        Some(rest) => !rest.starts_with(b"-") && rest.contains(&b'c'),
    })
}

/// The parent of process `pid`.
fn parent_of(pid: u32) -> Option<u32> {
    crate::platform::parent_in_stat(&crate::platform::process_stat(pid)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrappers_and_shells_running_a_command_are_not_the_agent() {
        let runs = |name: &str, args: &[&str]| {
            let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            is_runner(name, &argv)
        };
        assert!(runs(
            "timeout",
            &["timeout", "30", "retrace", "hook", "codex"]
        ));
        assert!(runs("env", &["env", "X=1", "retrace"]));
        assert!(runs("direnv", &["direnv", "exec", ".", "retrace"]));
        assert!(runs("sh", &["/bin/sh", "-c", "retrace hook claude-code"]));
        assert!(runs("bash", &["bash", "-lc", "retrace hook claude-code"]));
        assert!(runs("bash", &["/bin/bash", "./my-hook.sh"]));
        // Interactive shells, and the agents themselves, are not.
        assert!(!runs("bash", &["-bash"]));
        assert!(!runs("zsh", &["zsh", "-l", "-i"]));
        assert!(!runs("bash", &["bash", "--login"]));
        assert!(!runs("node", &["node", "/usr/bin/claude", "-c"]));
        assert!(!runs("codex", &["codex", "exec", "fix it"]));
    }
}
