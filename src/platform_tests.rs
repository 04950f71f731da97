//! Unit tests of `platform.rs`.

use super::*;

#[test]
fn the_parent_is_read_past_a_name_with_spaces_and_parentheses() {
    assert_eq!(parent_in_stat("42 (a (b) c) S 7 42 42 0"), Some(7));
    assert_eq!(parent_in_stat("42 (a b) c) S 17 42 42 0"), Some(17));
    assert_eq!(parent_in_stat("42 (sh) S 1 42"), Some(1));
    assert_eq!(parent_in_stat("garbage"), None);
}

#[test]
fn this_process_is_read() {
    let stat = process_stat(std::process::id()).unwrap();
    assert_eq!(parent_in_stat(&stat), Some(rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get().unsigned_abs())));
    assert!(boot_id().is_some() && hostname().is_some());
    assert!(memory_kib(true).is_some_and(|k| k > 0));
    let root = rustix::fs::open(".", PATH_ONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
    assert!(fd_path(root.as_fd()).is_dir());
}

#[test]
fn filesystems_are_told_apart_by_their_type_number() {
    assert_eq!(filesystem_of_type(0xEF53), Filesystem::Local);
    assert_eq!(filesystem_of_type(0x0102_1994), Filesystem::Local);
    assert_eq!(filesystem_of_type(0x6969), Filesystem::Remote("NFS"));
    assert_eq!(filesystem_of_type(0x6573_5546), Filesystem::Remote("FUSE"));
    // overlayfs promises nothing about a changing lower layer.
    assert_eq!(filesystem_of_type(0x794C_7630), Filesystem::Unknown);
    assert_eq!(filesystem(Path::new("/nonexistent/retrace")), Filesystem::Unknown);
    assert!(!matches!(filesystem(Path::new("/proc")), Filesystem::Local));
}
