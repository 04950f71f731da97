use super::*;

#[test]
fn aider_prompts_are_blocks_of_hash_lines_and_commands_are_not_prompts() {
    let text = "\n# aider chat started at 2026-12-06 17:55:21\n\n> Added .aider* to \
                .gitignore  \n> aider --message make hello.txt\nwith two lines  \n\n\
                #### make hello.txt  \n#### with two lines  \n\nCreating the file.\n\n\
                #### /ask what?  \n\n#### what?  \n\n#### <blank>  \n\nA reply:\n\n\
                #### A heading the model wrote\n";
    assert_eq!(
        AiderHistory::prompts(text),
        ["make hello.txt\nwith two lines", "what?"]
    );
}

#[test]
fn aider_history_is_read_from_where_the_run_began_and_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".aider.chat.history.md");
    std::fs::write(&path, "#### an old prompt  \n").unwrap();
    let mut h = AiderHistory::new(&path);
    assert!(h.poll().is_empty());
    let append = |s: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(s.as_bytes()).unwrap();
    };
    append("\n#### first  \n#### sec");
    assert_eq!(h.poll(), ["first"]);
    append("ond  \n\nreply\n");
    assert_eq!(h.poll(), ["second"]);
    std::fs::write(&path, "#### after a truncation  \n").unwrap();
    assert_eq!(h.poll(), ["after a truncation"]);
    // Another, longer file renamed into its place is read from its start too.
    let other = dir.path().join("other");
    std::fs::write(&other, "#### one  \n\nreply\n\n#### replaced and longer  \n").unwrap();
    std::fs::rename(&other, &path).unwrap();
    assert_eq!(h.poll(), ["one", "replaced and longer"]);
}

#[test]
fn the_history_file_follows_aiders_options_and_the_git_root() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("a/b");
    std::fs::create_dir_all(&sub).unwrap();
    let argv = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
    assert_eq!(
        aider_history_file(&argv(&["aider"]), &sub),
        sub.join(".aider.chat.history.md")
    );
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    assert_eq!(
        aider_history_file(&argv(&["aider", "--no-git"]), &sub),
        dir.path().join(".aider.chat.history.md")
    );
    assert_eq!(
        aider_history_file(&argv(&["aider", "--chat-history-file", "h.md"]), &sub),
        sub.join("h.md")
    );
    assert_eq!(
        aider_history_file(&argv(&["aider", "--chat-history-file=/x/h.md"]), &sub),
        PathBuf::from("/x/h.md")
    );
    std::fs::write(
        sub.join(".aider.conf.yml"),
        "model: x\nchat-history-file: \"notes/chat.md\"  # mine\n",
    )
    .unwrap();
    assert_eq!(
        aider_history_file(&argv(&["aider"]), &sub),
        sub.join("notes/chat.md")
    );
    assert!(source_for(&argv(&["/usr/bin/aider"]), &sub).is_some());
    assert!(source_for(&argv(&["vim"]), &sub).is_none());
}
