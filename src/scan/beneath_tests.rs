use super::*;

fn setup() -> (tempfile::TempDir, Root) {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(ws.join("d/sub")).unwrap();
    std::fs::write(ws.join("d/sub/f"), b"inside").unwrap();
    std::fs::create_dir_all(t.path().join("outside/sub")).unwrap();
    std::fs::write(t.path().join("outside/sub/f"), b"SECRET").unwrap();
    std::os::unix::fs::symlink(t.path().join("outside"), ws.join("link")).unwrap();
    let root = Root::open(&ws).unwrap();
    (t, root)
}

fn read(fd: OwnedFd) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut out).unwrap();
    out
}

#[test]
fn opens_below_the_root_and_never_through_a_symlink() {
    let (_t, root) = setup();
    assert_eq!(
        read(root.open_at(b"d/sub/f", OFlags::RDONLY).unwrap()),
        b"inside"
    );
    for rel in [&b"link/sub/f"[..], b"link/sub", b"link", b"d/../link/sub/f"] {
        let e = root.open_at(rel, OFlags::RDONLY).unwrap_err();
        assert!(swapped(e), "{}: {e}", String::from_utf8_lossy(rel));
        let e = by_components(root.fd.as_fd(), rel, OFlags::RDONLY | OFlags::NOFOLLOW).unwrap_err();
        assert!(
            swapped(e),
            "by components, {}: {e}",
            String::from_utf8_lossy(rel)
        );
    }
    let f = by_components(root.fd.as_fd(), b"d/sub/f", OFlags::RDONLY | OFlags::NOFOLLOW);
    assert_eq!(read(f.unwrap()), b"inside");
    assert!(root.dir(b"").is_ok() && root.dir(b"d/sub").is_ok());
    assert_eq!(
        root.open_at(b"d/nothing/f", OFlags::RDONLY).unwrap_err(),
        Errno::NOENT
    );
}
