#!/usr/bin/env node
// Assembles retrace's npm packages from built binaries, ready for `npm publish`:
//
//   node npm/stage.mjs --out DIR [--version X.Y.Z] [--repository URL] --binaries linux-x64=DIR …
//
// Each `--binaries PLATFORM=DIR` names a directory holding that platform's `retrace` and
// `retrace-dump` (PLATFORM: linux-x64, linux-x64-musl, linux-arm64, linux-arm64-musl). Writes
// DIR/retrace-cli (the launcher, with the staged platforms as optional dependencies),
// DIR/retrace-cli-PLATFORM (the binaries; `os`, `cpu` and `libc` let package managers pick
// one), DIR/retrace-pi (the Pi and Oh-My-Pi extension) and DIR/retrace-opencode (the OpenCode
// plugin), each depending on retrace-cli. The version defaults to Cargo.toml's. No package
// has an install script. Prints the package directories, one per line, in publishing order.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.dirname(here);
const PLATFORMS = {
	"linux-x64": { os: ["linux"], cpu: ["x64"], libc: ["glibc"] },
	"linux-arm64": { os: ["linux"], cpu: ["arm64"], libc: ["glibc"] },
	// The static musl builds run on any Linux: no `libc`, so that they also install where the
	// glibc is older than the glibc builds need (the launcher picks them there).
	"linux-x64-musl": { os: ["linux"], cpu: ["x64"] },
	"linux-arm64-musl": { os: ["linux"], cpu: ["arm64"] },
};

function fail(message) {
	process.stderr.write(`stage: ${message}\n`);
	process.exit(2);
}

const args = process.argv.slice(2);
let out = null;
let version = null;
let repository = null;
const binaries = {};
for (let i = 0; i < args.length; i++) {
	const value = args[i + 1];
	if (args[i] === "--out" && value) out = path.resolve(args[++i]);
	else if (args[i] === "--version" && value) version = args[++i];
	// npm's provenance wants the source repository named in each package.
	else if (args[i] === "--repository" && value) repository = args[++i];
	else if (args[i] === "--binaries" && value) {
		const [platform, dir] = args[++i].split(/=(.*)/s);
		if (!PLATFORMS[platform]) fail(`unknown platform ${platform} (known: ${Object.keys(PLATFORMS).join(", ")})`);
		if (!dir) fail(`--binaries ${platform}= needs a directory`);
		binaries[platform] = path.resolve(dir);
	} else fail(`unknown argument ${args[i]} (usage: --out DIR [--version X.Y.Z] --binaries PLATFORM=DIR …)`);
}
if (!out) fail("--out DIR is required");
if (Object.keys(binaries).length === 0) fail("at least one --binaries PLATFORM=DIR is required");
if (!version) {
	const cargo = fs.readFileSync(path.join(repo, "Cargo.toml"), "utf8");
	version = cargo.match(/^version\s*=\s*"([^"]+)"/m)?.[1];
	if (!version) fail("no version in Cargo.toml; give --version");
}

const common = {
	version,
	license: "MIT",
	homepage: "https://crates.io/crates/retrace-cli",
	keywords: ["undo", "snapshot", "checkpoint", "agent", "ai"],
	...(repository ? { repository: { type: "git", url: `git+${repository.replace(/\/$/, "")}.git` } } : {}),
};

function write(dir, manifest, files) {
	fs.rmSync(dir, { recursive: true, force: true });
	fs.mkdirSync(dir, { recursive: true });
	fs.writeFileSync(path.join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
	manifest.files = [...(manifest.files ?? []), "LICENSE"];
	fs.writeFileSync(path.join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
	for (const [name, from, mode] of [...files, ["LICENSE", path.join(repo, "LICENSE")]]) {
		const to = path.join(dir, name);
		fs.mkdirSync(path.dirname(to), { recursive: true });
		fs.copyFileSync(from, to);
		fs.chmodSync(to, mode ?? 0o644);
	}
	return dir;
}

const staged = [];
for (const [platform, dir] of Object.entries(binaries)) {
	const files = ["retrace", "retrace-dump"].map((b) => {
		const from = path.join(dir, b);
		if (!fs.existsSync(from)) fail(`${from} does not exist`);
		return [`bin/${b}`, from, 0o755];
	});
	const name = `retrace-cli-${platform}`;
	const readme = path.join(out, ".readme", name);
	fs.mkdirSync(path.dirname(readme), { recursive: true });
	fs.writeFileSync(readme, `# ${name}\n\nThe \`retrace\` binaries for ${platform}, installed by [retrace-cli](https://www.npmjs.com/package/retrace-cli) as an optional dependency. Install \`retrace-cli\`, not this package.\n`);
	staged.push(
		write(
			path.join(out, name),
			{
				name,
				...common,
				description: `The retrace binaries for ${platform} (installed by retrace-cli)`,
				...PLATFORMS[platform],
				files: ["bin/"],
				preferUnplugged: true,
			},
			[...files, ["README.md", readme]],
		),
	);
}
fs.rmSync(path.join(out, ".readme"), { recursive: true, force: true });

const optional = Object.fromEntries(Object.keys(binaries).map((p) => [`retrace-cli-${p}`, version]));
staged.push(
	write(
		path.join(out, "retrace-cli"),
		{
			name: "retrace-cli",
			...common,
			description: "A workspace time machine for AI coding agents: whole-workspace undo, redo and restore",
			main: "index.js",
			bin: { retrace: "bin/retrace", "retrace-dump": "bin/retrace-dump" },
			files: ["index.js", "bin/", "README.md"],
			engines: { node: ">=18" },
			optionalDependencies: optional,
		},
		[
			["index.js", path.join(here, "cli/index.js")],
			["bin/retrace", path.join(here, "cli/bin/retrace"), 0o755],
			["bin/retrace-dump", path.join(here, "cli/bin/retrace-dump"), 0o755],
			["README.md", path.join(here, "cli/README.md")],
		],
	),
);

const pi = JSON.parse(fs.readFileSync(path.join(repo, "adapters/pi/package.json"), "utf8"));
delete pi.scripts;
staged.push(
	write(
		path.join(out, "retrace-pi"),
		{ ...pi, ...common, keywords: pi.keywords, dependencies: { "retrace-cli": version } },
		[
			["index.ts", path.join(repo, "adapters/pi/index.ts")],
			["README.md", path.join(repo, "adapters/pi/README.md")],
		],
	),
);

staged.push(
	write(
		path.join(out, "retrace-opencode"),
		{
			name: "retrace-opencode",
			...common,
			description: "OpenCode's /undo, /redo and revert restoring the whole workspace, backed by retrace",
			keywords: ["opencode", "opencode-plugin", "undo", "checkpoint"],
			type: "module",
			main: "retrace.ts",
			files: ["retrace.ts", "README.md"],
			dependencies: { "retrace-cli": version },
		},
		[
			["retrace.ts", path.join(repo, "adapters/opencode/retrace.ts")],
			["README.md", path.join(repo, "adapters/opencode/README.md")],
		],
	),
);

process.stdout.write(`${staged.join("\n")}\n`);
