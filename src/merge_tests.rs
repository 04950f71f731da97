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
