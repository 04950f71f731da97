/**
 * Tests of the extension against a scripted host, for what the real CLIs cannot be made to
 * do from a test: a subagent session (Oh-My-Pi) and a host without a UI (print mode).
 * Run by tests/pi_e2e.rs with Node 22 (`node --test`, which loads TypeScript as is), with
 * RETRACE_BIN naming the retrace binary and RETRACE_HOME a private store.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

import retrace from "./index.ts";

type Handler = (event: any, ctx: any) => Promise<any>;

/** A host with one linear session whose entries the test appends. */
function scriptedHost(options: { hasUI: boolean; kind?: string }) {
	const handlers = new Map<string, Handler[]>();
	const commands = new Map<string, (args: string, ctx: any) => Promise<void>>();
	const notes: string[] = [];
	const selects: string[] = [];
	const navigations: string[] = [];
	const entries: { id: string; parentId: string | null; type: string; message?: { role: string } }[] = [];
	const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "retrace-pi-"));
	let leaf: string | null = null;
	const sessionManager = {
		getSessionId: () => "scripted-session",
		getLeafId: () => leaf,
		getEntries: () => entries,
		getEntry: (id: string) => entries.find((e) => e.id === id),
		getBranch: () => {
			const branch = [];
			for (let e = entries.find((x) => x.id === leaf); e; e = entries.find((x) => x.id === e?.parentId)) branch.unshift(e);
			return branch;
		},
	};
	const ctx = {
		cwd: workspace,
		hasUI: options.hasUI,
		agent: options.kind ? { kind: options.kind } : undefined,
		sessionManager,
		ui: {
			notify: (message: string) => notes.push(message),
			select: async (title: string) => {
				selects.push(title);
				return undefined;
			},
		},
		waitForIdle: async () => {},
		navigateTree: async (target: string) => {
			navigations.push(target);
			const entry = sessionManager.getEntry(target);
			leaf = entry?.message?.role === "user" ? entry.parentId : target;
			return { cancelled: false };
		},
	};
	retrace({
		on: (event, handler) => handlers.set(event, [...(handlers.get(event) ?? []), handler as Handler]),
		registerCommand: (name, command) => commands.set(name, command.handler),
	});
	const append = (role: string) => {
		const id = `e${entries.length}`;
		entries.push({ id, parentId: leaf, type: "message", message: { role } });
		leaf = id;
	};
	const emit = async (event: string, payload: any = {}) => {
		for (const h of handlers.get(event) ?? []) await h(payload, ctx);
	};
	return {
		ctx,
		workspace,
		notes,
		selects,
		navigations,
		append,
		emit,
		command: (name: string, args = "") => commands.get(name)?.(args, ctx),
	};
}

test("a subagent session is not checkpointed and /undo says so", async () => {
	const host = scriptedHost({ hasUI: true, kind: "sub" });
	await host.emit("session_start");
	await host.emit("before_agent_start", { prompt: "work" });
	await host.command("undo");
	assert.equal(host.notes.length, 1, host.notes.join("\n"));
	assert.match(host.notes[0], /works in the main session; this is a subagent/);
	assert.equal(host.selects.length, 0);
});

test("without a UI, /undo restores files and conversation without asking", async () => {
	const host = scriptedHost({ hasUI: false });
	await host.emit("session_start");
	host.append("user");
	host.append("assistant");
	await host.emit("before_agent_start", { prompt: "write a file" });
	host.append("user");
	await host.emit("tool_call", { toolName: "write" });
	fs.writeFileSync(path.join(host.workspace, "made.txt"), "by the agent\n");
	host.append("assistant");
	await host.emit("agent_end");
	await host.emit("agent_settled");

	await host.command("undo");
	assert.equal(host.selects.length, 0, "no question without a UI");
	assert.ok(!fs.existsSync(path.join(host.workspace, "made.txt")), host.notes.join("\n"));
	// The conversation moves to the turn's prompt (e2), which puts it back in the editor.
	assert.deepEqual(host.navigations, ["e2"]);
	assert.match(host.notes.at(-1) ?? "", /turn 1: restored/);

	await host.command("redo");
	assert.equal(fs.readFileSync(path.join(host.workspace, "made.txt"), "utf8"), "by the agent\n");
	assert.deepEqual(host.navigations, ["e2", "e3"]);
	await host.emit("session_shutdown");
});

test("/revert N takes back an earlier prompt's files and /diff [N] lists what a prompt changed", async () => {
	const host = scriptedHost({ hasUI: false });
	await host.emit("session_start");
	const prompt = async (text: string, work: () => void) => {
		host.append("user");
		await host.emit("before_agent_start", { prompt: text });
		await host.emit("tool_call", { toolName: "write" });
		work();
		host.append("assistant");
		await host.emit("agent_end");
		await host.emit("agent_settled");
	};
	const file = (name: string) => path.join(host.workspace, name);
	await prompt("first", () => fs.writeFileSync(file("one.txt"), "one\ntwo\n"));
	await prompt("second", () => fs.writeFileSync(file("two.txt"), "2\n"));

	await host.command("diff", "1");
	assert.match(host.notes.at(-1) ?? "", /turn 1 changed 1 file\(s\)\nA one.txt  \+2 -0/);
	await host.command("diff");
	assert.match(host.notes.at(-1) ?? "", /turn 2 changed 1 file\(s\)\nA two.txt/);
	await host.command("revert", "x");
	assert.match(host.notes.at(-1) ?? "", /takes a turn number/);

	await host.command("revert", "1");
	assert.ok(!fs.existsSync(file("one.txt")), host.notes.join("\n"));
	assert.equal(fs.readFileSync(file("two.txt"), "utf8"), "2\n");
	assert.match(host.notes.at(-1) ?? "", /restored files/);
	// /undo takes the revert back; the conversation does not move for it.
	await host.command("undo");
	assert.equal(fs.readFileSync(file("one.txt"), "utf8"), "one\ntwo\n");
	assert.deepEqual(host.navigations, []);
	await host.emit("session_shutdown");
});

/** Points RETRACE_BIN, for the extensions started until `stop`, at a wrapper that copies every
 * line `retrace serve` reads and writes to files: the JSON-RPC the extension spoke. */
function traceRetrace() {
	const real = process.env.RETRACE_BIN ?? "retrace";
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "retrace-trace-"));
	const wrapper = path.join(dir, "retrace");
	const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;
	fs.writeFileSync(
		wrapper,
		`#!/bin/sh\ntee -a ${quote(path.join(dir, "in"))} | ${quote(real)} "$@" | tee -a ${quote(path.join(dir, "out"))}\n`,
		{ mode: 0o755 },
	);
	process.env.RETRACE_BIN = wrapper;
	const lines = (name: string) =>
		fs.existsSync(path.join(dir, name))
			? fs.readFileSync(path.join(dir, name), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l))
			: [];
	return {
		real,
		/** Each request with its answer's result. */
		exchanges: () => {
			const out = lines("out");
			return lines("in").map((req: any) => ({ ...req, result: out.find((r: any) => r.id === req.id)?.result }));
		},
		stop: () => {
			process.env.RETRACE_BIN = real;
		},
	};
}

test("each tool call that can write is a step: an edit names its file, a shell command is captured before it runs", async () => {
	const trace = traceRetrace();
	const host = scriptedHost({ hasUI: false });
	const file = (name: string) => path.join(host.workspace, name);
	fs.writeFileSync(file("notes.txt"), "old\n");
	try {
		await host.emit("session_start");
		host.append("user");
		await host.emit("before_agent_start", { prompt: "work" });
		const tool = async (toolName: string, toolCallId: string, input: Record<string, unknown>, work: () => void) => {
			await host.emit("tool_call", { type: "tool_call", toolName, toolCallId, input });
			work();
			await host.emit("tool_result", { type: "tool_result", toolName, toolCallId, input, content: [], isError: false });
		};
		await tool("write", "w1", { path: "made.txt", content: "made\n" }, () => fs.writeFileSync(file("made.txt"), "made\n"));
		await tool("read", "r1", { path: "made.txt" }, () => {});
		// The user saves notes.txt while the turn runs; the agent's shell command removes it.
		fs.writeFileSync(file("notes.txt"), "the user's edit\n");
		await tool("bash", "b1", { command: "rm notes.txt" }, () => fs.rmSync(file("notes.txt")));
		host.append("assistant");
		await host.emit("agent_end");
		await host.emit("agent_settled");
		await host.emit("session_shutdown");
	} finally {
		trace.stop();
	}
	const steps = trace.exchanges().filter((m: any) => String(m.method).endsWith("_step"));
	assert.deepEqual(
		steps.map((m: any) => [m.method, m.params.call, m.params.tool, m.params.summary, m.params.files, m.result?.recorded]),
		[
			["begin_step", "w1", "write", "made.txt", [file("made.txt")], true],
			["end_step", "w1", undefined, undefined, undefined, true],
			["begin_step", "b1", "bash", "rm notes.txt", [], true],
			["end_step", "b1", undefined, undefined, undefined, true],
		],
	);
	// The capture before `rm` holds the user's edit: it comes back byte for byte.
	const before = steps[2].result.snapshot;
	assert.equal(typeof before, "string", JSON.stringify(steps[2]));
	const { execFileSync } = await import("node:child_process");
	execFileSync(trace.real, ["restore", before, "--force", "--", "notes.txt"], { cwd: host.workspace });
	assert.equal(fs.readFileSync(file("notes.txt"), "utf8"), "the user's edit\n");
});
