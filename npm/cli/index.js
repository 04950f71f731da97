"use strict";
/**
 * retrace-cli: finds the `retrace` binary of this platform's package (retrace-cli-linux-x64,
 * retrace-cli-linux-x64-musl, retrace-cli-linux-arm64, retrace-cli-linux-arm64-musl), which
 * npm, pnpm and yarn install as an optional dependency picked by `os`, `cpu` and `libc`.
 * No install script, no download: the binary is in the package.
 *
 * `RETRACE_BINARY` names a binary to run instead (a build of your own).
 */
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

/** The oldest glibc minor version (2.x) the glibc builds run on. */
const GLIBC_MIN = 34;

/** The platform packages for this system, the best first (`[]`: none is built for it). */
function platformPackages() {
	if (process.platform !== "linux") return [];
	const arch = { x64: "x64", arm64: "arm64" }[process.arch];
	if (!arch) return [];
	// glibc reports its version; musl does not. The glibc build needs glibc 2.34 or newer
	// (it is built on Ubuntu 22.04); the musl build is static and runs on any Linux, so it
	// is the choice on older glibc and the fallback when the glibc package was skipped.
	const report = typeof process.report?.getReport === "function" ? process.report.getReport() : null;
	const glibc = String(report?.header?.glibcVersionRuntime ?? "");
	const musl = `retrace-cli-linux-${arch}-musl`;
	const [major, minor] = glibc.split(".").map(Number);
	const recent = major > 2 || (major === 2 && minor >= GLIBC_MIN);
	return glibc && recent ? [`retrace-cli-linux-${arch}`, musl] : [musl];
}

/** Why there is no binary, in one line that says what to do. */
function missing(packages) {
	if (packages.length === 0) {
		const where = `${process.platform}-${process.arch}`;
		return process.platform === "linux"
			? `retrace: no prebuilt binary for ${where} (x64 and arm64 only); build it with \`cargo install --locked retrace-cli\`, or set RETRACE_BINARY`
			: `retrace: retrace runs on Linux only for now (${where}: docs/platforms.md says what a port needs)`;
	}
	let version = "";
	try {
		version = `@${require("./package.json").version}`;
	} catch {
		// a launcher outside its package
	}
	return `retrace: the platform package ${packages[0]} is not installed (optional dependencies skipped?); reinstall retrace-cli without --no-optional / --omit=optional, or \`npm install -g ${packages[0]}${version}\`, or set RETRACE_BINARY`;
}

/**
 * The path of this platform's `name` binary (`retrace` or `retrace-dump`).
 * @throws {Error} with a one-line message naming what is missing.
 */
function binaryPath(name = "retrace") {
	const explicit = process.env.RETRACE_BINARY;
	if (explicit) {
		const file = name === "retrace" ? explicit : path.join(path.dirname(explicit), name);
		if (!fs.existsSync(file) || !fs.statSync(file).isFile()) {
			throw new Error(`retrace: RETRACE_BINARY names ${explicit}, and ${file} is not a file`);
		}
		return file;
	}
	const packages = platformPackages();
	for (const pkg of packages) {
		let file;
		try {
			file = require.resolve(`${pkg}/bin/${name}`);
		} catch {
			continue;
		}
		try {
			fs.accessSync(file, fs.constants.X_OK);
		} catch {
			// A package manager that dropped the mode bits: put them back if we may.
			try {
				fs.chmodSync(file, 0o755);
			} catch {
				continue;
			}
		}
		return file;
	}
	throw new Error(missing(packages));
}

/** Runs `name` with this process's arguments, terminal and signals; exits as it exited. */
function run(name) {
	let bin;
	try {
		bin = binaryPath(name);
	} catch (e) {
		process.stderr.write(`${e.message}\n`);
		process.exit(127);
	}
	const { spawn } = require("node:child_process");
	// The binary knows it was started by this launcher: `retrace install` then writes hooks
	// naming plain `retrace` (this launcher, on PATH), and a hook's owner is looked for above
	// this process, which only runs the binary.
	let self = process.argv[1] ?? "";
	try {
		self = fs.realpathSync(self);
	} catch {
		// keep the name as given
	}
	const env = { ...process.env, RETRACE_LAUNCHER: self, RETRACE_LAUNCHER_PID: String(process.pid) };
	const child = spawn(bin, process.argv.slice(2), { stdio: "inherit", env });
	// The terminal sends SIGINT and SIGQUIT to the whole foreground group, the child too: the
	// launcher only outlives it. A signal sent to the launcher alone goes on to the child.
	const forward = (sig) => () => {
		if (sig !== "SIGINT" && sig !== "SIGQUIT") child.kill(sig);
	};
	const signals = ["SIGINT", "SIGQUIT", "SIGTERM", "SIGHUP"];
	const handlers = signals.map((s) => [s, forward(s)]);
	for (const [s, h] of handlers) process.on(s, h);
	child.on("error", (e) => {
		process.stderr.write(`retrace: cannot run ${bin}: ${e.message}\n`);
		process.exit(126);
	});
	child.on("exit", (code, signal) => {
		for (const [s, h] of handlers) process.off(s, h);
		if (signal) {
			// Die of the same signal, so that the shell sees what the user would have seen;
			// where Node ignores it (SIGPIPE), exit as a shell reports it: 128 + its number.
			process.exitCode = 128 + (os.constants.signals[signal] ?? 0);
			process.kill(process.pid, signal);
			setImmediate(() => process.exit());
			return;
		}
		process.exit(code ?? 1);
	});
}

module.exports = { binaryPath, platformPackages, run };
