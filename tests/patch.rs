//! `retrace diff -p`, `--stat` and `-- PATH...` (issue 17): unified diffs as `git diff`
//! prints them, through the real CLI.

use std::os::unix::fs::{PermissionsExt, symlink};

use crate::common::{Env, RETRACE, snapshot_id, stderr, stdout};

fn run(env: &Env, args: &[&str]) -> String {
    let o = env.run(RETRACE, args);
    assert!(o.status.success(), "retrace {args:?}: {}", stderr(&o));
    stdout(&o)
}

/// A snapshot, then one change of each kind on disk.
fn changed(env: &Env) -> String {
    let lines: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    env.write("src/a.txt", &lines);
    env.write("gone.txt", "bye\n");
    env.write("run.sh", "echo hi\n");
    env.write("blob.bin", b"\x00\x01\x02");
    let id = snapshot_id(env);
    env.write("src/a.txt", lines.replace("line 5\n", "line five\n"));
    std::fs::remove_file(env.path("gone.txt")).unwrap();
    std::fs::set_permissions(env.path("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    env.write("blob.bin", b"\x00\x01\x03");
    env.write("new.txt", "fresh\n");
    symlink("src/a.txt", env.path("link")).unwrap();
    id
}

#[test]
fn patches_against_the_disk_read_as_git_prints_them() {
    let env = Env::new();
    let id = changed(&env);
    let out = run(&env, &["diff", &id, "-p", "--color", "never"]);
    let a = out
        .find("diff --git a/src/a.txt b/src/a.txt\n")
        .expect(&out);
    assert!(
        out[a..].starts_with("diff --git a/src/a.txt b/src/a.txt\nindex "),
        "{out}"
    );
    assert!(
        out.contains(
            " 100644\n--- a/src/a.txt\n+++ b/src/a.txt\n@@ -2,7 +2,7 @@\n line 2\n line 3\n \
             line 4\n-line 5\n+line five\n line 6\n line 7\n line 8\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n"),
        "{out}"
    );
    assert!(
        out.contains("--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"),
        "{out}"
    );
    assert!(
        out.contains("diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"),
        "{out}"
    );
    assert!(
        out.contains("Binary files a/blob.bin and b/blob.bin differ\n"),
        "{out}"
    );
    assert!(
        out.contains("new file mode 100644\n")
            && out.contains("+++ b/new.txt\n@@ -0,0 +1 @@\n+fresh\n"),
        "{out}"
    );
    assert!(
        out.contains("diff --git a/link b/link\nnew file mode 120000\n")
            && out.contains("+src/a.txt\n\\ No newline at end of file\n"),
        "{out}"
    );
    // Files in path order, one header each; no colour when not asked.
    assert_eq!(out.matches("diff --git").count(), 6, "{out}");
    assert!(!out.contains('\x1b'));
}

#[test]
fn paths_after_the_separator_restrict_every_form() {
    let env = Env::new();
    let id = changed(&env);
    let out = run(&env, &["diff", &id, "-p", "--", "src"]);
    assert_eq!(out.matches("diff --git").count(), 1, "{out}");
    assert!(out.contains("+line five\n"));
    assert_eq!(
        run(&env, &["diff", &id, "--", "src/", "new.txt"]),
        "A new.txt\nM src/a.txt\n"
    );
    let stat = run(
        &env,
        &["diff", &id, "--stat", "--", "src/a.txt", "blob.bin"],
    );
    assert_eq!(
        stat,
        " blob.bin  | Bin\n src/a.txt | 2 +-\n 2 files changed, 1 insertion(+), 1 deletion(-)\n"
    );
    // As git: a part that is zero is left out (a binary file alone has both zero).
    let stat = run(&env, &["diff", &id, "--stat", "--", "new.txt"]);
    assert!(
        stat.ends_with(" 1 file changed, 1 insertion(+)\n"),
        "{stat}"
    );
    let stat = run(&env, &["diff", &id, "--stat", "--", "blob.bin"]);
    assert!(
        stat.ends_with(" 1 file changed, 0 insertions(+), 0 deletions(-)\n"),
        "{stat}"
    );
    // A path that matches no change: nothing, successfully.
    assert_eq!(run(&env, &["diff", &id, "-p", "--", "src/a"]), "");
}

#[test]
fn patches_between_snapshots_in_json_and_colour() {
    let env = Env::new();
    let id = changed(&env);
    let second = snapshot_id(&env);
    let v: serde_json::Value =
        serde_json::from_str(&run(&env, &["diff", &id, &second, "-p", "--json"])).unwrap();
    let patches = v["patches"].as_array().unwrap();
    let a = patches.iter().find(|p| p["path"] == "src/a.txt").unwrap();
    assert_eq!(
        (a["added"].as_u64(), a["removed"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(a["binary"], false);
    assert!(
        a["text"]
            .as_str()
            .unwrap()
            .contains("-line 5\n+line five\n")
    );
    assert_eq!(v["modified"].as_array().unwrap().len(), 3, "{v}");
    let coloured = run(&env, &["diff", &id, &second, "-p", "--color", "always"]);
    assert!(
        coloured.contains("\x1b[31m-line 5\x1b[0m\n\x1b[32m+line five\x1b[0m\n"),
        "{coloured}"
    );
    assert!(
        coloured.contains("\x1b[36m@@ -2,7 +2,7 @@\x1b[0m\n"),
        "{coloured}"
    );
}

/// `--name-status` (issue 17): every changed path with A, M or D, sorted by path as git
/// sorts them.
#[test]
fn name_status_lists_changes_sorted_by_path() {
    let env = Env::new();
    let id = changed(&env);
    let out = run(&env, &["diff", &id, "--name-status", "--color", "never"]);
    assert_eq!(
        out, "M blob.bin\nD gone.txt\nA link\nA new.txt\nM run.sh\nM src/a.txt\n",
        "{out}"
    );
    let o = env.run(RETRACE, &["diff", &id, "--name-status", "-p"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
