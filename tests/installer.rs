//! `install.sh` against a local HTTP server on loopback serving release archives this test
//! builds from this run's binaries, as the release workflow lays them out
//! (`retrace-<version>-<target>.tar.gz` holding `retrace-<version>-<target>/{retrace,
//! retrace-dump}`, and `SHA256SUMS`): a good archive is verified and installed, and the
//! installed `retrace` runs; a wrong checksum is refused with nothing installed; an unknown
//! machine and macOS get one clear line (a fake `uname` first on PATH stands in for them).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::{RETRACE, output_within, stderr, stdout};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const LIMIT: Duration = Duration::from_mins(2);

/// Serves the files of `dir` over HTTP/1.0 on a free loopback port, from a thread that
/// lives as long as the test process; returns the base URL.
fn serve(dir: PathBuf) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut line = String::new();
            let mut reader = BufReader::new(&stream);
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // Skip the headers.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/");
            let file = dir.join(path.trim_start_matches('/'));
            let mut out = &stream;
            let _ = match std::fs::read(&file) {
                Ok(body) if !path.contains("..") => out
                    .write_all(
                        format!(
                            "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .and_then(|()| out.write_all(&body)),
                _ => out.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
            };
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// A release directory: the archive for `target` (with this run's binaries) and a
/// `SHA256SUMS` listing it, with its right checksum unless `wrong_sum`.
fn release(dir: &Path, target: &str, wrong_sum: bool) {
    let name = format!("retrace-{VERSION}-{target}");
    let stage = dir.join("stage").join(&name);
    std::fs::create_dir_all(&stage).unwrap();
    let bins = Path::new(RETRACE).parent().unwrap();
    for b in ["retrace", "retrace-dump"] {
        std::fs::copy(bins.join(b), stage.join(b)).unwrap();
    }
    let archive = format!("{name}.tar.gz");
    let o = Command::new("tar")
        .args(["-czf"])
        .arg(dir.join(&archive))
        .arg("-C")
        .arg(dir.join("stage"))
        .arg(&name)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_dir_all(dir.join("stage")).unwrap();
    let o = Command::new("sha256sum")
        .arg(&archive)
        .current_dir(dir)
        .output()
        .unwrap();
    let mut sums = stdout(&o);
    if wrong_sum {
        sums = format!("{}{}", "0".repeat(64), &sums[64..]);
    }
    std::fs::write(dir.join("SHA256SUMS"), sums).unwrap();
}

/// Runs `install.sh ARGS` with `HOME` at `home`, and `uname` answering `uname_s`/`uname_m`
/// when given.
fn install(home: &Path, args: &[&str], uname: Option<(&str, &str)>) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh");
    let mut path = std::env::var("PATH").unwrap_or_default();
    if let Some((s, m)) = uname {
        let fake = home.join("fake-bin");
        std::fs::create_dir_all(&fake).unwrap();
        let uname = fake.join("uname");
        std::fs::write(
            &uname,
            format!("#!/bin/sh\ncase \"$1\" in -m) echo {m} ;; *) echo {s} ;; esac\n"),
        )
        .unwrap();
        std::fs::set_permissions(&uname, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path = format!("{}:{path}", fake.display());
    }
    output_within(
        Command::new("sh")
            .arg(script)
            .args(args)
            .env("HOME", home)
            .env("PATH", path)
            .env_remove("RETRACE_DOWNLOAD_URL")
            .env_remove("RETRACE_INSTALL_DIR"),
        LIMIT,
    )
}

fn gnu_target() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "aarch64-unknown-linux-gnu",
        _ => "x86_64-unknown-linux-gnu",
    }
}

/// Under `dir`: a release served on loopback (its checksum wrong with `wrong_sum`) and a
/// home to install into; the home and the release's URL.
fn site_and_home(dir: &Path, wrong_sum: bool) -> (PathBuf, String) {
    let site = dir.join("site");
    std::fs::create_dir_all(&site).unwrap();
    release(&site, gnu_target(), wrong_sum);
    let url = serve(site);
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    (home, url)
}

#[test]
fn the_installer_verifies_and_installs_a_release() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, url) = site_and_home(tmp.path(), false);
    let o = install(
        &home,
        &["--version", VERSION, "--base-url", &url, "--libc", "gnu"],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let bin = home.join(".local/bin");
    let v = Command::new(bin.join("retrace"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(stdout(&v).contains(VERSION), "{}", stdout(&v));
    assert!(bin.join("retrace-dump").is_file());
    // ~/.local/bin is not on the test's PATH: it says how to put it there.
    assert!(
        stderr(&o).contains("not on your PATH") && stderr(&o).contains("export PATH"),
        "{}",
        stderr(&o)
    );
    // Nothing left beside the binaries.
    let mut names: Vec<_> = std::fs::read_dir(&bin)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["retrace", "retrace-dump"]);

    // --dir, again over an existing install: replaced whole.
    let other = tmp.path().join("other");
    let o = install(
        &home,
        &[
            "--version",
            VERSION,
            "--base-url",
            &url,
            "--libc",
            "gnu",
            "--dir",
            other.to_str().unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(other.join("retrace").is_file());
}

#[test]
fn a_wrong_checksum_installs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, url) = site_and_home(tmp.path(), true);
    let o = install(
        &home,
        &["--version", VERSION, "--base-url", &url, "--libc", "gnu"],
        None,
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("checksum mismatch") && stderr(&o).contains("nothing installed"),
        "{}",
        stderr(&o)
    );
    assert!(!home.join(".local/bin/retrace").exists());
    // A platform the release has no archive for: refused the same way, nothing installed.
    let o = install(
        &home,
        &["--version", VERSION, "--base-url", &url, "--libc", "musl"],
        None,
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot download"), "{}", stderr(&o));
    assert!(!home.join(".local/bin").exists());
}

#[test]
fn an_unknown_platform_gets_one_clear_line() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let args = ["--version", VERSION, "--base-url", "http://127.0.0.1:9"];
    for (s, m, says) in [
        (
            "Linux",
            "riscv64",
            "no prebuilt retrace for Linux on riscv64",
        ),
        ("Darwin", "arm64", "no prebuilt retrace for macOS yet"),
        ("FreeBSD", "amd64", "no prebuilt retrace for FreeBSD"),
    ] {
        let o = install(home, &args, Some((s, m)));
        assert!(!o.status.success());
        let said = stderr(&o);
        assert_eq!(said.lines().count(), 1, "{said}");
        assert!(said.contains(says), "{said}");
    }
    // Without a release named: it asks for one instead of guessing.
    let o = install(home, &[], None);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--version"), "{}", stderr(&o));
    assert!(!home.join(".local/bin").exists());
}
