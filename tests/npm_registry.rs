//! The npm packages through a real registry: `npm/stage.mjs` builds every package from this
//! tree (the launcher `retrace-cli`, the platform package with the binaries this test run
//! built, the Pi extension and the OpenCode plugin), a real Verdaccio on 127.0.0.1 (installed
//! by `tests/e2e/install-clients.sh`, its storage in a temporary directory) takes them with
//! `npm publish`, and then, each in a clean prefix and `HOME`: `npm install -g retrace-cli`
//! gives a `retrace` whose `--version` and `demo` work; pnpm, yarn 1 and yarn 4 installs of
//! it work too; without its platform package the launcher says in one line which package is
//! missing; `RETRACE_BINARY` overrides it; exit codes pass through.
//!
//! Without the registry or the package managers the test says so and passes, except under
//! `CI`, where it fails.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{RETRACE, missing_cli, output_within, stderr, stdout};

const LIMIT: Duration = Duration::from_mins(5);

fn e2e() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/e2e")
}

/// A Verdaccio on a free loopback port, killed when dropped.
struct Registry {
    child: Child,
    url: String,
    port: u16,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    fn start(dir: &Path) -> Registry {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // Only what is published here exists: no uplink to the public registry.
        let config = dir.join("config.yaml");
        std::fs::write(
            &config,
            "storage: ./storage\nmax_body_size: 200mb\npackages:\n  '**':\n    access: $all\n    publish: $anonymous\n\
             log: { type: stdout, format: pretty, level: warn }\n",
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
fn clean(cmd: &mut Command, home: &Path, registry: &Registry) {
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

fn ok(o: Output, what: &str) -> Output {
    assert!(
        o.status.success(),
        "{what}: {:?}\n{}\n{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    o
}

/// `retrace --version` of `bin` says this build's version.
fn says_version(bin: &Path, home: &Path) {
    let o = ok(
        output_within(Command::new(bin).arg("--version").env("HOME", home), LIMIT),
        "retrace --version",
    );
    assert!(
        stdout(&o).contains(env!("CARGO_PKG_VERSION")),
        "{}",
        stdout(&o)
    );
}

#[test]
fn the_npm_packages_install_from_a_registry_and_run() {
    let tools = [
        "verdaccio/node_modules/verdaccio/bin/verdaccio",
        "pnpm/node_modules/pnpm/bin/pnpm.cjs",
        "yarn-1/node_modules/yarn/bin/yarn.js",
        "yarn-4/node_modules/@yarnpkg/cli-dist/bin/yarn.js",
    ];
    if missing_cli(
        tools.iter().all(|t| e2e().join(t).exists()),
        "Verdaccio, pnpm and yarn",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let version = env!("CARGO_PKG_VERSION");

    // Every package, built from this tree with the binaries of this test run.
    let bin_dir = Path::new(RETRACE).parent().unwrap();
    let o = ok(
        output_within(
            Command::new("node")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("npm/stage.mjs"))
                .args(["--out".as_ref(), t.join("stage").as_os_str()])
                .args(["--binaries", &format!("linux-x64={}", bin_dir.display())]),
            LIMIT,
        ),
        "stage",
    );
    let staged: Vec<PathBuf> = stdout(&o).lines().map(PathBuf::from).collect();
    let names: Vec<String> = staged
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "retrace-cli-linux-x64",
            "retrace-cli",
            "retrace-pi",
            "retrace-opencode"
        ]
    );

    std::fs::create_dir_all(t.join("registry")).unwrap();
    let registry = Registry::start(&t.join("registry"));
    for dir in &staged {
        let mut c = Command::new("npm");
        clean(&mut c, &t.join("publisher"), &registry);
        ok(
            output_within(c.arg("publish").arg(dir), LIMIT),
            &format!("npm publish {}", dir.display()),
        );
    }

    // npm, globally, in a clean prefix: the launcher and only this platform's package.
    let home = t.join("npm-home");
    let prefix = t.join("npm-prefix");
    let mut c = Command::new("npm");
    clean(&mut c, &home, &registry);
    ok(
        output_within(
            c.args(["install", "-g", "--prefix"])
                .arg(&prefix)
                .arg("retrace-cli"),
            LIMIT,
        ),
        "npm install -g retrace-cli",
    );
    let retrace = prefix.join("bin/retrace");
    says_version(&retrace, &home);
    let modules = prefix.join("lib/node_modules/retrace-cli/node_modules");
    assert!(modules.join("retrace-cli-linux-x64/bin/retrace").exists());
    let dump = ok(
        output_within(
            Command::new(prefix.join("bin/retrace-dump")).arg("--help"),
            LIMIT,
        ),
        "retrace-dump --help",
    );
    assert!(!stdout(&dump).is_empty());
    // The main job, through the launcher.
    let demo = t.join("demo");
    std::fs::create_dir_all(&demo).unwrap();
    let o = ok(
        output_within(
            Command::new(&retrace)
                .arg("demo")
                .current_dir(&demo)
                .env("HOME", &home)
                .env("RETRACE_HOME", home.join(".retrace")),
            LIMIT,
        ),
        "retrace demo",
    );
    assert!(stdout(&o).contains("undo"), "{}", stdout(&o));
    // Exit codes pass through: a usage error is clap's 2, as from the binary itself.
    let wrong = output_within(Command::new(&retrace).arg("no-such-command"), LIMIT);
    let direct = output_within(Command::new(RETRACE).arg("no-such-command"), LIMIT);
    assert_eq!(wrong.status.code(), direct.status.code());
    assert_eq!(wrong.status.code(), Some(2));
    // RETRACE_BINARY runs another binary (here: a script saying who it is).
    let fake = t.join("fake-retrace");
    std::fs::write(&fake, "#!/bin/sh\necho fake \"$@\"\nexit 7\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = output_within(
        Command::new(&retrace)
            .arg("status")
            .env("RETRACE_BINARY", &fake),
        LIMIT,
    );
    assert_eq!(
        (stdout(&o).trim(), o.status.code()),
        ("fake status", Some(7))
    );

    // Without the platform package (a package manager that skipped optional dependencies):
    // one line naming it and how to get it; nothing runs.
    std::fs::remove_dir_all(modules.join("retrace-cli-linux-x64")).unwrap();
    let o = output_within(Command::new(&retrace).arg("--version"), LIMIT);
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    let said = stderr(&o);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("retrace-cli-linux-x64") && said.contains("RETRACE_BINARY"),
        "{said}"
    );

    // pnpm 10, globally (its global bin directory must be on PATH).
    let home = t.join("pnpm-home");
    let pnpm_home = home.join("pnpm");
    std::fs::create_dir_all(&pnpm_home).unwrap();
    let mut c = Command::new("node");
    clean(&mut c, &home, &registry);
    let path = format!(
        "{}:{}",
        pnpm_home.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    ok(
        output_within(
            c.arg(e2e().join("pnpm/node_modules/pnpm/bin/pnpm.cjs"))
                .args(["add", "-g", "retrace-cli"])
                .env("PNPM_HOME", &pnpm_home)
                .env("PATH", &path),
            LIMIT,
        ),
        "pnpm add -g retrace-cli",
    );
    says_version(&pnpm_home.join("retrace"), &home);

    // yarn 1, globally (it reads the registry from the environment, not --registry).
    let home = t.join("yarn1-home");
    let y1 = home.join("prefix");
    let mut c = Command::new("node");
    clean(&mut c, &home, &registry);
    ok(
        output_within(
            c.arg(e2e().join("yarn-1/node_modules/yarn/bin/yarn.js"))
                .args(["global", "add", "--prefix"])
                .arg(&y1)
                .arg("--global-folder")
                .arg(home.join("global"))
                .arg("retrace-cli"),
            LIMIT,
        ),
        "yarn global add retrace-cli",
    );
    says_version(&y1.join("bin/retrace"), &home);

    // yarn 4, in a project (it has no global installs).
    let home = t.join("yarn4-home");
    let project = home.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("package.json"),
        r#"{"name":"p","private":true}"#,
    )
    .unwrap();
    std::fs::write(
        project.join(".yarnrc.yml"),
        format!(
            "npmRegistryServer: \"{}\"\nunsafeHttpWhitelist: [\"127.0.0.1\"]\n\
             nodeLinker: node-modules\nenableTelemetry: false\nenableGlobalCache: false\n\
             npmMinimalAgeGate: 0\n",
            registry.url
        ),
    )
    .unwrap();
    std::fs::write(project.join("yarn.lock"), "").unwrap();
    let mut c = Command::new("node");
    clean(&mut c, &home, &registry);
    ok(
        output_within(
            c.arg(e2e().join("yarn-4/node_modules/@yarnpkg/cli-dist/bin/yarn.js"))
                .args(["add", &format!("retrace-cli@{version}")])
                .current_dir(&project),
            LIMIT,
        ),
        "yarn add retrace-cli",
    );
    says_version(&project.join("node_modules/.bin/retrace"), &home);
}
