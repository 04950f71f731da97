//! A real npm registry on loopback (Verdaccio, installed by `tests/e2e/install-clients.sh`)
//! holding every npm package built from this tree (`npm/stage.mjs`) with this test run's
//! binaries, for the packaging tests and the adapters' tests through the registry.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{RETRACE, output_within, stderr, stdout};

const LIMIT: Duration = Duration::from_mins(5);

/// `target/e2e/`, where the install script puts the tools.
pub fn e2e() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e")
}

/// Whether Verdaccio is installed.
pub fn installed() -> bool {
    e2e()
        .join("verdaccio/node_modules/verdaccio/bin/verdaccio")
        .exists()
}

/// A Verdaccio on a free loopback port, killed when dropped.
pub struct Registry {
    child: Child,
    /// `http://127.0.0.1:PORT/`.
    pub url: String,
    /// Its port.
    pub port: u16,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    /// Starts one with its storage under `dir`, and waits until it answers. Only what is
    /// published to it exists, unless `upstream` names a registry it proxies for every
    /// package but retrace's own (`retrace-*` are always the ones published here).
    pub fn start(dir: &Path, upstream: Option<&str>) -> Registry {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (uplinks, proxy) = upstream.map_or((String::new(), ""), |url| {
            (
                format!("uplinks:\n  up:\n    url: {url}\n"),
                "    proxy: up\n",
            )
        });
        let config = dir.join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "storage: ./storage\nmax_body_size: 200mb\n{uplinks}packages:\n  'retrace-*':\n    \
                 access: $all\n    publish: $anonymous\n  '**':\n    access: $all\n    \
                 publish: $anonymous\n{proxy}log: {{ type: stdout, format: pretty, level: warn }}\n"
            ),
        )
        .unwrap();
        let child = Command::new("node")
            .arg(e2e().join("verdaccio/node_modules/verdaccio/bin/verdaccio"))
            .args(["--config".as_ref(), config.as_os_str()])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .current_dir(dir)
            .stdout(std::fs::File::create(dir.join("verdaccio.log")).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let registry = Registry {
            child,
            url: format!("http://127.0.0.1:{port}/"),
            port,
        };
        let start = Instant::now();
        while !registry.ping() {
            assert!(
                start.elapsed() < LIMIT,
                "Verdaccio did not answer: {}",
                std::fs::read_to_string(dir.join("verdaccio.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        registry
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let request = format!(
            "GET /-/ping HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n\r\n",
            self.port
        );
        let mut answer = String::new();
        s.write_all(request.as_bytes()).is_ok()
            && s.read_to_string(&mut answer).is_ok()
            && answer.starts_with("HTTP/1.1 200")
    }
}

/// A clean home for one package manager: its own `HOME`, caches and npm settings.
pub fn clean(cmd: &mut Command, home: &Path, registry: &Registry) {
    std::fs::create_dir_all(home).unwrap();
    let npmrc = home.join(".npmrc");
    std::fs::write(
        &npmrc,
        format!(
            "registry={}\n//127.0.0.1:{}/:_authToken=test\nfund=false\naudit=false\n",
            registry.url, registry.port
        ),
    )
    .unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("npm_config_userconfig", &npmrc)
        .env("npm_config_cache", home.join(".npm"))
        .env("npm_config_registry", &registry.url)
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .current_dir(home);
}

/// Every package staged from this tree with this run's binaries, published to a fresh
/// registry under `dir` (proxying `upstream` for other packages, see [`Registry::start`]);
/// the registry and the staged package directories (in publishing order).
pub fn publish_tree(dir: &Path, upstream: Option<&str>) -> (Registry, Vec<PathBuf>) {
    let bin_dir = Path::new(RETRACE).parent().unwrap();
    let o = output_within(
        Command::new("node")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("npm/stage.mjs"))
            .args(["--out".as_ref(), dir.join("stage").as_os_str()])
            .args(["--binaries", &format!("linux-x64={}", bin_dir.display())])
            // The same binaries stand in for the static musl build: its package and the
            // launcher's choice between the two are what is tested.
            .args([
                "--binaries",
                &format!("linux-x64-musl={}", bin_dir.display()),
            ]),
        LIMIT,
    );
    assert!(o.status.success(), "stage: {}", stderr(&o));
    let staged: Vec<PathBuf> = stdout(&o).lines().map(PathBuf::from).collect();
    std::fs::create_dir_all(dir.join("registry")).unwrap();
    let registry = Registry::start(&dir.join("registry"), upstream);
    for package in &staged {
        let mut c = Command::new("npm");
        clean(&mut c, &dir.join("publisher"), &registry);
        let o = output_within(c.arg("publish").arg(package), LIMIT);
        assert!(
            o.status.success(),
            "npm publish {}: {}",
            package.display(),
            stderr(&o)
        );
    }
    (registry, staged)
}

/// The registry this machine's npm uses (`npm config get registry`).
pub fn upstream() -> String {
    let o = Command::new("npm")
        .args(["config", "get", "registry"])
        .output()
        .unwrap();
    let url = stdout(&o).trim().to_string();
    if url.is_empty() {
        "https://registry.npmjs.org/".into()
    } else {
        url
    }
}

/// `PATH` without any directory that holds a `retrace`: where only an npm package can
/// bring the binary.
pub fn path_without_retrace() -> String {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !Path::new(d).join("retrace").exists())
        .collect::<Vec<_>>()
        .join(":")
}
