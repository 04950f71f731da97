/**
 * retrace for OpenCode: OpenCode's own /undo, /redo and message revert restore the whole
 * workspace (shell edits too) from retrace's deduplicated store, with OpenCode's snapshots
 * turned off (`"snapshot": false`, which `retrace install opencode` sets).
 *
 * One `retrace serve` child process (JSON-RPC over stdio, docs/protocol.md in the retrace
 * repository) serves every session of this OpenCode instance:
 *
 * - a user message (`chat.message`) begins a turn, anchored at the message's id; its
 *   before-snapshot is taken in the background and the turn's first tool call waits for it;
 * - each call of a tool that can write (`bash`, `edit`, `write`, `multiedit`, `patch`,
 *   `apply_patch`) is a step of the turn: `tool.execute.before` begins it (an edit names its
 *   files; a shell command is captured before it runs when retrace's `step_captures`
 *   setting says so, and only then does the tool wait), `tool.execute.after` ends it, so
 *   each session undoes only what it wrote itself. A subagent's tool calls are steps of its
 *   parent's turn;
 * - the session going idle ends the turn, however many steps and tools it took;
 * - OpenCode's revert of a message (what `/undo`, `/redo` and the message menu do) sets the
 *   session's `revert` point: every turn anchored at or after it is undone, files only
 *   (OpenCode moves its own conversation), and unrevert redoes them. retrace's guards hold:
 *   a file edited since is never overwritten. When retrace refuses, nothing is written and
 *   OpenCode's revert point is moved back to where the files are, so the conversation and
 *   the files never disagree; either way retrace's one-line result is shown as a toast;
 * - sending a prompt after a revert makes it final (OpenCode deletes the reverted messages);
 *   the new turn then replaces retrace's redo stack.
 *
 * Subagent (task) sessions are not checkpointed: their edits belong to the parent's turn.
 * Without the `retrace` binary (on PATH, or `RETRACE_BIN`) the plugin warns once and does
 * nothing else. Loaded as TypeScript by OpenCode (Bun): no build step, and no runtime
 * dependency (the import below is of types only).
 */

import type { Plugin } from "@opencode-ai/plugin";
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";

/** An outcome of undo or redo (docs/protocol.md). */
interface Outcome {
	result: string;
	ok: boolean;
	message: string;
	paths?: (string | { path: string; reason?: string })[];
}

/** A turn as `log` lists it. */
interface LogEntry {
	kind: string;
	number: number;
	anchor?: string | null;
}

/** `status` as `log` returns it. */
interface Status {
	cursor?: number | null;
	redo_turn?: [number, string] | null;
}

/** The session fields read here (OpenCode's `Session`). */
interface SessionInfo {
	id: string;
	parentID?: string;
	revert?: { messageID: string; partID?: string } | null;
}

type Variant = "info" | "success" | "warning" | "error";

/** How long a tool waits for the turn's before-snapshot (`RETRACE_BEFORE_TIMEOUT_MS`). */
const BEFORE_TIMEOUT_MS = (() => {
	const n = Number(process.env.RETRACE_BEFORE_TIMEOUT_MS);
	return Number.isFinite(n) && n > 0 ? Math.min(Math.floor(n), 2 ** 31) : 25_000;
})();

/** OpenCode's tools whose calls are steps: a shell tool may write anything. */
const SHELL_TOOLS = new Set(["bash"]);
/** OpenCode's tools that write the files their arguments name. */
const EDIT_TOOLS = new Set(["edit", "write", "multiedit", "patch", "apply_patch"]);

/** The files a patch in the `*** Begin Patch` format (OpenCode's `patch` and `apply_patch`)
 * adds, deletes, updates or moves to. */
function patchFiles(patch: string): string[] {
	const files: string[] = [];
	for (const line of patch.split("\n")) {
		const m = /^\*\*\* (?:Add File|Delete File|Update File|Move to): (.+)$/.exec(line.trimEnd());
		const f = m?.[1]?.trim();
		if (f && !files.includes(f)) files.push(f);
	}
	return files;
}

/** The files a call of an edit tool writes (absolute), and its one-line summary. */
function editOf(args: Record<string, unknown>, directory: string): { files: string[]; summary: string } {
	const text = (k: string) => (typeof args[k] === "string" ? (args[k] as string) : undefined);
	const patch = text("patchText");
	const named = patch !== undefined ? patchFiles(patch) : [text("filePath") ?? text("path")].filter((f): f is string => !!f);
	return { files: named.map((f) => path.resolve(directory, f)), summary: named.join(", ") };
}

/** At most this many undo or redo steps for one revert (a guard against a loop). */
const MAX_STEPS = 10_000;

/** The binary of the `retrace-cli` package this one depends on (installed from npm), if any. */
function fromDependency(): string | null {
	try {
		const require = createRequire(import.meta.url);
		const bin: unknown = require("retrace-cli").binaryPath();
		return typeof bin === "string" ? bin : null;
	} catch {
		return null;
	}
}

/**
 * The `retrace` binary: `RETRACE_BIN` (or `RETRACE_BINARY`, as the npm launcher reads it), else
 * the `retrace-cli` npm package this one was installed with, else the first `retrace` on PATH.
 */
function findRetrace(): string | null {
	const explicit = process.env.RETRACE_BIN || process.env.RETRACE_BINARY;
	if (explicit) {
		try {
			fs.accessSync(explicit, fs.constants.X_OK);
			return fs.statSync(explicit).isFile() ? explicit : null;
		} catch {
			return null;
		}
	}
	const bundled = fromDependency();
	if (bundled) return bundled;
	for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
		if (!dir) continue;
		const candidate = path.join(dir, "retrace");
		try {
			fs.accessSync(candidate, fs.constants.X_OK);
			if (fs.statSync(candidate).isFile()) return candidate;
		} catch {
			// not here
		}
	}
	return null;
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** A `retrace serve` child process and its JSON-RPC requests. */
class RetraceServer {
	private child: ChildProcessWithoutNullStreams;
	private buffer = "";
	private nextId = 1;
	private pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
	private failure: Error | null = null;

	/** Whether the child has exited or could not start: a new one is needed. */
	get failed(): boolean {
		return this.failure !== null;
	}

	constructor(bin: string) {
		this.child = spawn(bin, ["serve"], { stdio: ["pipe", "pipe", "pipe"] });
		this.child.stdout.setEncoding("utf8");
		this.child.stdout.on("data", (chunk: string) => this.receive(chunk));
		this.child.stderr.on("data", () => {});
		this.child.stdin.on("error", () => {});
		this.child.on("error", (e) => this.fail(e));
		this.child.on("exit", (code) => this.fail(new Error(`retrace serve exited (${code})`)));
	}

	call(method: string, params: Record<string, unknown>): Promise<any> {
		if (this.failure) return Promise.reject(this.failure);
		const id = this.nextId++;
		return new Promise((resolve, reject) => {
			this.pending.set(id, { resolve, reject });
			this.child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
		});
	}

	/** Asks the server to finish pending work and exit; waits for it a little. */
	async close(): Promise<void> {
		const exited = new Promise<void>((resolve) => {
			if (this.child.exitCode !== null) resolve();
			this.child.once("exit", () => resolve());
		});
		this.call("shutdown", {}).catch(() => {});
		this.child.stdin.end();
		let timer: ReturnType<typeof setTimeout> | undefined;
		await Promise.race([exited, new Promise((resolve) => (timer = setTimeout(resolve, 5_000)))]);
		clearTimeout(timer);
	}

	// Records are split on "\n" only (JSON strings may hold U+2028).
	private receive(chunk: string): void {
		this.buffer += chunk;
		for (let i = this.buffer.indexOf("\n"); i >= 0; i = this.buffer.indexOf("\n")) {
			const line = this.buffer.slice(0, i);
			this.buffer = this.buffer.slice(i + 1);
			let message: any;
			try {
				message = JSON.parse(line);
			} catch {
				continue;
			}
			const waiter = message.id == null ? undefined : this.pending.get(message.id);
			if (!waiter) continue; // a $/progress notification
			this.pending.delete(message.id);
			if (message.error) waiter.reject(new Error(message.error.message));
			else waiter.resolve(message.result);
		}
	}

	private fail(e: Error): void {
		if (this.failure) return;
		this.failure = e;
		for (const waiter of this.pending.values()) waiter.reject(e);
		this.pending.clear();
	}
}

/** What the plugin keeps for one OpenCode session. */
interface Tracked {
	/** retrace's handle, once opened. */
	handle: string | null;
	opening: Promise<string | null> | null;
	/** The turn in progress: its anchor, the wait for its before-snapshot, and the tool
	 * calls (OpenCode's `callID`) whose steps are running. */
	turn: { anchor: string; before?: Promise<any>; steps?: Set<string> } | null;
	/** The revert point last seen on the session (`null`: none). */
	revert: string | null;
	/** Whether OpenCode removed messages or parts of the session since the last revert
	 * point was seen: a revert cleared after that was made final by a prompt. */
	removed: boolean;
	/** Whether the session's `revert` has been seen since this plugin started. */
	seen: boolean;
	/** This session's work, in the order OpenCode reported it. */
	queue: Promise<unknown>;
}

/** The plugin: exported under one name, as OpenCode calls every exported function. */
export const RetracePlugin: Plugin = async ({ client, directory }) => {
	let server: RetraceServer | null = null;
	let unavailable = false;
	const sessions = new Map<string, Tracked>();
	/** Each session's parent (subagent sessions have one), from OpenCode's events. */
	const parents = new Map<string, string | null>();

	const say = (message: string, variant: Variant = "info") => {
		const level = variant === "error" ? "error" : variant === "warning" ? "warn" : "info";
		// Neither may fail the agent: without a TUI the toast goes nowhere.
		client.app.log({ body: { service: "retrace", level, message } }).catch(() => {});
		client.tui.showToast({ body: { title: "retrace", message, variant } }).catch(() => {});
	};

	const tracked = (id: string): Tracked => {
		let s = sessions.get(id);
		if (!s) {
			s = { handle: null, opening: null, turn: null, revert: null, removed: false, seen: false, queue: Promise.resolve() };
			sessions.set(id, s);
		}
		return s;
	};

	/** Runs `work` after the session's earlier work; a failure is a toast, never thrown. */
	const enqueue = (id: string, work: () => Promise<unknown>): Promise<unknown> => {
		const s = tracked(id);
		const next = s.queue.then(work).catch((e) => say(`retrace: ${errorText(e)}`, "error"));
		s.queue = next;
		return next;
	};

	/** Whether the session is a subagent's (it has a parent). */
	const isSubagent = async (id: string): Promise<boolean> => {
		if (!parents.has(id)) {
			try {
				const got = await client.session.get({ path: { id } });
				parents.set(id, (got.data as SessionInfo | undefined)?.parentID ?? null);
			} catch {
				return false;
			}
		}
		return parents.get(id) != null;
	};

	/** The main session a (subagent) session belongs to. */
	const rootOf = (id: string): string => {
		let at = id;
		for (let i = 0; i < 64; i++) {
			const parent = parents.get(at);
			if (parent == null) return at;
			at = parent;
		}
		return at;
	};

	/** Opens the session's history once; `null` when retrace is unavailable. */
	const open = (id: string): Promise<string | null> => {
		const s = tracked(id);
		if (server?.failed) {
			// It died (killed, or the store failed it): start a new one, and open again.
			say("retrace: retrace serve had stopped; starting it again", "warning");
			server = null;
			for (const t of sessions.values()) t.handle = null;
		}
		if (s.handle) return Promise.resolve(s.handle);
		if (unavailable) return Promise.resolve(null);
		s.opening ??= (async () => {
			if (!server) {
				const bin = findRetrace();
				if (!bin) {
					unavailable = true;
					say(
						"retrace: the retrace binary is not on PATH (nor in RETRACE_BIN): /undo and /redo will not restore files, as OpenCode's own snapshots are off",
						"warning",
					);
					return null;
				}
				server = new RetraceServer(bin);
			}
			try {
				const opened = await server.call("open", { workspace: directory, session: id, agent: "opencode" });
				s.handle = opened.session;
				for (const w of opened.warnings ?? []) say(`retrace: ${w}`, "warning");
				return s.handle;
			} catch (e) {
				say(`retrace: cannot open the workspace history: ${errorText(e)}`, "warning");
				return null;
			} finally {
				s.opening = null;
			}
		})();
		return s.opening;
	};

	/** One request for the session; a failure is a toast and `null`. */
	const call = async (id: string, method: string, params: Record<string, unknown> = {}): Promise<any> => {
		const handle = await open(id);
		if (!handle || !server) return null;
		try {
			return await server.call(method, { session: handle, ...params });
		} catch (e) {
			say(`retrace: ${method} failed: ${errorText(e)}`, "error");
			return null;
		}
	};

	/** Ends the session's turn (only the one begun at `anchor`, when given). */
	const endTurn = async (id: string, anchor?: string) => {
		const s = tracked(id);
		const ending = s.turn;
		if (!ending || (anchor !== undefined && ending.anchor !== anchor)) return;
		s.turn = null;
		await ending.before;
		await call(id, "end_turn", {});
	};

	/**
	 * Each turn's anchor for ordering: its message id, or, for a turn retrace made itself (a
	 * revert or restore from the CLI, with no anchor), just after the turn before it.
	 */
	const anchors = (entries: LogEntry[]): Map<number, string> => {
		const byNumber = new Map<number, string>();
		let last = "";
		for (const e of [...entries].filter((e) => e.kind !== "checkpoint").sort((a, b) => a.number - b.number)) {
			if (e.anchor) last = e.anchor;
			byNumber.set(e.number, e.anchor ? e.anchor : `${last}\uffff`);
		}
		return byNumber;
	};

	/** The undo or redo that brings the files one turn nearer to `target` (`null`: unreverted). */
	const nextStep = (status: Status, anchorOf: Map<number, string>, target: string | null) => {
		const cursor = status.cursor == null ? undefined : anchorOf.get(status.cursor);
		if (cursor !== undefined && target !== null && cursor >= target) return "undo";
		const redo = status.redo_turn ? anchorOf.get(status.redo_turn[0]) : undefined;
		if (redo !== undefined && (target === null || redo < target)) return "redo";
		return null;
	};

	const pathsOf = (o: Outcome) =>
		(o.paths ?? [])
			.slice(0, 5)
			.map((p) => (typeof p === "string" ? p : p.reason ? `${p.path} (${p.reason})` : p.path))
			.join(", ");

	/**
	 * Brings the files to OpenCode's revert point `target`: undo every applied turn anchored
	 * at or after it, redo every undone one before it. On a refusal, moves OpenCode's revert
	 * point to where the files are.
	 */
	const sync = async (id: string, target: string | null, partial: boolean) => {
		const done: string[] = [];
		// Undo and redo add no turn: the anchors are read once.
		const log = await call(id, "log");
		if (!log) return;
		const anchorOf = anchors(log.entries ?? []);
		let status: Status | null = log.status ?? {};
		let was = "";
		for (let i = 0; status && i < MAX_STEPS; i++) {
			const step = nextStep(status, anchorOf, target);
			// A step that moved nothing would be asked for again.
			const now = JSON.stringify([status.cursor, status.redo_turn]);
			if (!step || now === was) break;
			was = now;
			const out: Outcome | null = await call(id, step, step === "undo" ? { mode: "files" } : {});
			if (!out) return;
			if (out.result === "nothing_to_undo" || out.result === "nothing_to_redo") break;
			if (!out.ok) {
				await realign(id, target);
				const before = done.length ? ` (after ${done.join("; ")})` : "";
				const paths = pathsOf(out);
				const refused =
					out.result === "conflict" || out.result === "dirty"
						? `${step} refused: ${paths} changed since the turn (${out.result}); nothing was overwritten`
						: `${step} refused: ${out.message}`;
				say(`retrace: ${refused}${before}. OpenCode's revert was moved back to match the files`, "warning");
				return;
			}
			done.push(`${step}: ${out.message}`);
			status = await call(id, "status");
		}
		if (done.length === 0) return;
		const note = partial ? " (retrace restores whole turns: the files are as at the end of that message's turn)" : "";
		say(`retrace: ${done.join("; ")}${note}`, "success");
	};

	/** Moves OpenCode's revert point to where the files are (after a refused step). */
	const realign = async (id: string, wanted: string | null) => {
		const log = await call(id, "log");
		if (!log) return;
		const anchorOf = anchors(log.entries ?? []);
		const redo = log.status?.redo_turn ? anchorOf.get(log.status.redo_turn[0]) : undefined;
		const point = redo === undefined ? null : redo;
		// A turn retrace made itself has no message to revert to.
		if (point === wanted || point?.endsWith("\uffff")) return;
		const s = tracked(id);
		s.revert = point;
		try {
			if (point === null) await client.session.unrevert({ path: { id } });
			else await client.session.revert({ path: { id }, body: { messageID: point } });
		} catch (e) {
			say(`retrace: cannot move OpenCode's revert point back: ${errorText(e)}`, "error");
		}
	};

	/** A session's `revert` as OpenCode reported it. */
	const revertChanged = (info: SessionInfo, created: boolean) => {
		const s = tracked(info.id);
		const point = info.revert?.messageID ?? null;
		if (!s.seen) {
			// First sight of a session that existed before (OpenCode restarted): retrace's
			// history may be at another point, e.g. reverted before the restart. The sync
			// brings the files to OpenCode's point and does nothing when they are there; a
			// new session has no history.
			s.seen = true;
			s.revert = point;
			s.removed = false;
			if (!created) enqueue(info.id, () => sync(info.id, point, Boolean(info.revert?.partID)));
			return;
		}
		if (point === s.revert) return;
		const previous = s.revert;
		s.revert = point;
		// Cleared because the reverted messages were deleted: a prompt made the revert final,
		// and its turn replaces the redo stack. Anything else clearing it is an unrevert.
		const final = point === null && previous !== null && s.removed;
		s.removed = false;
		if (final) return;
		enqueue(info.id, () => sync(info.id, point, Boolean(info.revert?.partID)));
	};

	return {
		event: async ({ event }) => {
			// Called as OpenCode publishes, not awaited: what must keep its order is recorded
			// here at once, and the work is queued per session.
			const e = event as { type: string; properties: any };
			switch (e.type) {
				case "session.created":
				case "session.updated": {
					const info = e.properties.info as SessionInfo;
					parents.set(info.id, info.parentID ?? null);
					if (info.parentID == null && !unavailable) revertChanged(info, e.type === "session.created");
					break;
				}
				case "message.removed":
				case "message.part.removed":
					tracked(e.properties.sessionID).removed = true;
					break;
				case "session.idle":
				case "session.status": {
					if (e.type === "session.status" && e.properties.status?.type !== "idle") break;
					const id = e.properties.sessionID;
					const anchor = sessions.get(id)?.turn?.anchor;
					if (anchor !== undefined) enqueue(id, () => endTurn(id, anchor));
					break;
				}
				case "session.deleted": {
					const id = (e.properties.info as SessionInfo).id;
					if (sessions.has(id)) enqueue(id, () => endTurn(id));
					break;
				}
			}
		},

		"chat.message": async (input, output) => {
			const id = input.sessionID;
			if (unavailable || (await isSubagent(id))) return;
			const prompt = output.parts
				.map((p: any) => (p.type === "text" && !p.synthetic ? p.text : ""))
				.filter(Boolean)
				.join("\n");
			const anchor = output.message.id;
			await enqueue(id, async () => {
				// Sent while the agent works (OpenCode queues it into the running loop): it
				// is part of the turn in progress, which ends when the session is idle.
				if (tracked(id).turn) return;
				const begun = await call(id, "begin_turn", { anchor, prompt });
				if (begun) tracked(id).turn = { anchor };
			});
		},

		"tool.execute.before": async (input, output) => {
			const root = rootOf(input.sessionID);
			const turn = sessions.get(root)?.turn;
			if (!turn) return;
			if (!turn.before) {
				turn.before = call(root, "wait_before", { timeout_ms: BEFORE_TIMEOUT_MS }).then((waited) => {
					if (waited?.before === "conversation_only") {
						say(`retrace: ${waited.reason}; /undo of this turn will not restore its files`, "warning");
					}
					return waited;
				});
			}
			await turn.before;
			// A step of the main session's turn, also for a subagent's call.
			const shell = SHELL_TOOLS.has(input.tool);
			if (!input.callID || (!shell && !EDIT_TOOLS.has(input.tool))) return;
			const args = (output?.args ?? {}) as Record<string, unknown>;
			const edit = shell ? { files: [], summary: typeof args.command === "string" ? args.command : "" } : editOf(args, directory);
			turn.steps ??= new Set();
			turn.steps.add(input.callID);
			const begun = call(root, "begin_step", { tool: input.tool, call: input.callID, summary: edit.summary, files: edit.files });
			// Waited for: a capture, when one is taken, must hold the disk as it was before the
			// command, and an edit's begin reads the files it names as they were before the edit
			// (a tool that did not wait could write first on a loaded machine, and its own write
			// would then count as someone else's).
			await begun;
		},

		"tool.execute.after": async (input) => {
			const root = rootOf(input.sessionID);
			const turn = sessions.get(root)?.turn;
			if (!turn?.steps?.delete(input.callID)) return;
			await call(root, "end_step", { call: input.callID });
		},

		dispose: async () => {
			for (const id of sessions.keys()) enqueue(id, () => endTurn(id));
			await Promise.all([...sessions.values()].map((s) => s.queue));
			const closing = server;
			server = null;
			await closing?.close();
		},
	};
};
