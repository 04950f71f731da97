//! Unit tests of `mcp.rs`.

use super::cap_patch;

#[test]
fn long_patches_are_cut_at_a_line_and_say_so() {
    let text = "+line é\n".repeat(100);
    assert_eq!(cap_patch(&text, 10_000), text);
    let cut = cap_patch(&text, 100);
    assert!(cut.starts_with("+line é\n"), "{cut}");
    let kept = cut.find('[').unwrap();
    assert!(kept <= 100 && cut[..kept].ends_with('\n'), "{cut}");
    assert!(
        cut.ends_with("more bytes; give `paths` to see the rest]"),
        "{cut}"
    );
}
