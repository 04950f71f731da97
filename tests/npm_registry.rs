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

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::registry::{clean, e2e, publish_tree};
use crate::common::succeeded as ok;
use crate::common::{RETRACE, missing_cli, output_within, stderr, stdout};

const LIMIT: Duration = Duration::from_mins(5);

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
    let (registry, staged) = publish_tree(t, None);
    let names: Vec<String> = staged
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "retrace-cli-linux-x64",
            "retrace-cli-linux-x64-musl",
            "retrace-cli",
            "retrace-pi",
            "retrace-opencode"
        ]
    );

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
    // The musl build (no `libc` field) installs on glibc too, as the fallback for an older
    // glibc; on this glibc the launcher picks the glibc build.
    assert!(
        modules
            .join("retrace-cli-linux-x64-musl/bin/retrace")
            .exists()
    );
    let chosen = |which: &str| {
        let o = ok(
            output_within(
                Command::new("node").arg("-p").arg(format!(
                    "require({:?}).binaryPath()",
                    prefix.join("lib/node_modules/retrace-cli").display()
                )),
                LIMIT,
            ),
            "binaryPath",
        );
        assert!(
            stdout(&o).contains(&format!("/{which}/bin/retrace")),
            "{}",
            stdout(&o)
        );
    };
    chosen("retrace-cli-linux-x64");
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
    // Installed through the launcher, hooks name plain `retrace` (the launcher, on PATH) in
    // a project's settings and the launcher's place on PATH in the user's, never the binary
    // inside node_modules, which an upgrade moves.
    let project = t.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let path = format!(
        "{}:{}",
        prefix.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (scope, want) in [
        ("--project", "retrace hook claude-code".to_string()),
        (
            "--user",
            format!(
                "'{}' hook claude-code",
                prefix.join("bin/retrace").display()
            ),
        ),
    ] {
        ok(
            output_within(
                Command::new(&retrace)
                    .args(["install", "claude-code", scope])
                    .current_dir(&project)
                    .env("HOME", &home)
                    .env("RETRACE_HOME", home.join(".retrace"))
                    .env("PATH", &path),
                LIMIT,
            ),
            "retrace install claude-code",
        );
        let settings = if scope == "--user" {
            home.join(".claude/settings.json")
        } else {
            project.join(".claude/settings.json")
        };
        let text = std::fs::read_to_string(&settings).unwrap();
        assert!(text.contains(&format!("\"{want}\"")), "{scope}: {text}");
        assert!(!text.contains("node_modules"), "{text}");
    }

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

    // Without the glibc package, the musl one runs; without either (a package manager that
    // skipped optional dependencies): one line naming the package and how to get it.
    std::fs::remove_dir_all(modules.join("retrace-cli-linux-x64")).unwrap();
    chosen("retrace-cli-linux-x64-musl");
    says_version(&retrace, &home);
    std::fs::remove_dir_all(modules.join("retrace-cli-linux-x64-musl")).unwrap();
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
