use super::*;

#[test]
fn changes_on_different_lines_merge_and_the_same_lines_conflict() {
    let base = b"one\ntwo\nthree\nfour\nfive\n";
    let ours = b"ONE\ntwo\nthree\nfour\nfive\n";
    let theirs = b"one\ntwo\nthree\nfour\nFIVE\n";
    assert_eq!(
        three_way(base, ours, theirs).unwrap(),
        b"ONE\ntwo\nthree\nfour\nFIVE\n"
    );
    let clash = b"one\ntwo\nthree\nfour\n5\n";
    assert_eq!(three_way(base, clash, theirs), Err(Unmerged::Conflict));
    // The same change on both sides is no conflict.
    assert_eq!(three_way(base, theirs, theirs).unwrap(), theirs);
}

#[test]
fn binary_and_oversized_files_are_not_merged() {
    assert_eq!(three_way(b"a\n", b"a\0\n", b"b\n"), Err(Unmerged::Binary));
    let big = vec![b'x'; usize::try_from(MAX_MERGE_BYTES).unwrap() + 1];
    assert_eq!(three_way(&big, b"a\n", b"b\n"), Err(Unmerged::TooLarge));
}

#[test]
fn changes_that_only_touch_merge_when_asked_and_overlaps_still_conflict() {
    // Taking out a session's appended line, another's line right after it.
    let base = b"base\nA\n";
    let ours = b"base\nA\nB\n";
    let theirs = b"base\n";
    assert_eq!(three_way(base, ours, theirs), Err(Unmerged::Conflict));
    assert_eq!(
        three_way_touching(base, ours, theirs).unwrap(),
        b"base\nB\n"
    );
    // Two neighbouring lines taken out, one by each side.
    let base = b"base\nA\nB\n";
    assert_eq!(
        three_way_touching(base, b"base\nB\n", b"base\nA\n").unwrap(),
        b"base\n"
    );
    // Beside lines the other side replaced, it is a conflict, as for git.
    assert_eq!(
        three_way_touching(b"x\ny\n", b"new\nx\ny\n", b"X\ny\n"),
        Err(Unmerged::Conflict)
    );
    assert_eq!(
        three_way_touching(b"x\ny\n", b"X\ny\n", b"x\nY\n"),
        Err(Unmerged::Conflict)
    );
    // Two insertions at one point, an insertion inside replaced lines, overlapping
    // replacements: conflicts.
    assert_eq!(
        three_way_touching(b"a\n", b"a\nb\n", b"a\nc\n"),
        Err(Unmerged::Conflict)
    );
    assert_eq!(
        three_way_touching(b"a\nb\nc\nd\n", b"a\nb\nnew\nc\nd\n", b"a\nd\n"),
        Err(Unmerged::Conflict)
    );
    // An insertion at the start of lines the other side deleted stays, before them.
    assert_eq!(
        three_way_touching(b"a\nb\nc\n", b"a\nnew\nb\nc\n", b"a\nc\n").unwrap(),
        b"a\nnew\nc\n"
    );
    assert_eq!(
        three_way_touching(b"a\nb\nc\n", b"a\nB\nc\n", b"a\nb2\nc\n"),
        Err(Unmerged::Conflict)
    );
    // What three_way merges, it merges alike.
    let (b, o, t) = (
        b"one\ntwo\nthree\nfour\nfive\n",
        b"ONE\ntwo\nthree\nfour\nfive\n",
        b"one\ntwo\nthree\nfour\nFIVE\n",
    );
    assert_eq!(three_way_touching(b, o, t), three_way(b, o, t));
}
