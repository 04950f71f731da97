/**
 * retrace for Pi and Oh-My-Pi: every prompt is one undo unit of the whole workspace.
 *
 * The extension starts `retrace serve` (JSON-RPC over stdio, see docs/protocol.md in the
 * retrace repository) and brackets every prompt with a turn:
 *
 * - `before_agent_start` begins the turn, anchored at the current leaf (the prompt is not in
 *   the session yet there); its before-snapshot is taken in the background;
 * - the first `tool_call` waits for that snapshot (up to a deadline), so no tool edits a file
 *   before retrace has read it;
 * - each call of a tool that can write (`bash`, `edit`, `write`) is a step of the turn:
 *   `tool_call` begins it (an edit names its file; a shell command is captured before it
 *   runs when retrace's `step_captures` setting says so, and only then does the tool wait),
 *   `tool_result` ends it. Steps tell this session's writes from the user's and other
 *   sessions' ones, so each undoes only its own;
 * - `agent_settled` (Pi 1.x) or `agent_end` (Pi 0.7x, Oh-My-Pi) ends the turn, however many
 *   tool rounds it took.
 *
 * `/undo` restores the files of the last turn (shell edits too) and moves the conversation
 * back to its prompt, which Pi puts back in the editor; `/redo` re-applies both;
 * `/checkpoint [label]` saves the files as they are now. Navigating the session tree offers
 * to restore the workspace to the chosen node too.
 *
 * It never breaks the agent: without the `retrace` binary (on PATH, or `RETRACE_BIN`) it
 * warns once and does nothing else; any failure is a notification.
 *
 * Written against the extension API Pi 0.73, Pi 1.x and Oh-My-Pi share; loaded as
 * TypeScript by the host (jiti, or Bun), so it has no build step and no dependencies.
 */

import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";

// The hosts' types differ between Pi, Pi 1.x and Oh-My-Pi; only the members used here are
// named, so one file serves all three.
interface Entry {
	id: string;
	parentId: string | null;
	type: string;
	message?: { role?: string };
}
interface Ctx {
	cwd: string;
	hasUI: boolean;
	agent?: { kind?: string };
	sessionManager: {
		getSessionId(): string;
		getLeafId(): string | null;
		getBranch(): Entry[];
		getEntries(): Entry[];
		getEntry(id: string): Entry | undefined;
	};
	ui: {
		notify(message: string, type?: "info" | "warning" | "error"): void;
		select(title: string, options: string[]): Promise<string | undefined>;
	};
	waitForIdle?(): Promise<void>;
	navigateTree?(targetId: string, options?: { summarize?: boolean }): Promise<{ cancelled: boolean }>;
}
interface Host {
	on(event: string, handler: (event: any, ctx: Ctx) => unknown): void;
	registerCommand(name: string, options: { description: string; handler: (args: string, ctx: Ctx) => Promise<void> }): void;
}

/** An outcome of undo, redo, navigate or checkpoint (docs/protocol.md). */
interface Outcome {
	result: string;
	ok: boolean;
	message: string;
	anchor?: string;
}

/** The anchor of a turn begun before the session has any entry. */
const ROOT = "pi:root";
const BOTH = "Files and conversation";
const CONVERSATION = "Conversation only";
const RESTORE = "Restore the files to that point too";
const KEEP = "Keep the files as they are";
/** How long a tool waits for the turn's before-snapshot (`RETRACE_BEFORE_TIMEOUT_MS`). */
const BEFORE_TIMEOUT_MS = (() => {
  // `retrace serve` takes a non-negative integer: a fraction, a negative or a huge value is
  // invalid params there, so it is made one here.
  const n = Number(process.env.RETRACE_BEFORE_TIMEOUT_MS);
  return Number.isFinite(n) && n > 0 ? Math.min(Math.floor(n), 2 ** 31) : 25_000;
})();

/** The host's tools whose calls are steps: a shell tool may write anything. */
const SHELL_TOOLS = new Set(["bash"]);
/** The host's tools that write the file their input names (`path`). */
const EDIT_TOOLS = new Set(["edit", "write"]);

/** A tool call as `tool_call` and `tool_result` report it. */
interface ToolEvent {
	toolName?: string;
	toolCallId?: string;
	input?: Record<string, unknown>;
}

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
	if (explicit) return fs.existsSync(explicit) ? explicit : null;
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

/**
 * Whether the host ends a run with `agent_settled` (Pi 1.x): there `agent_end` may be followed
 * by a retry, a compaction retry or queued messages, all part of the same prompt.
 */
function hostSettles(): boolean {
	try {
		let dir = path.dirname(fs.realpathSync(process.argv[1] ?? ""));
		for (let i = 0; i < 8; i++) {
			const manifest = path.join(dir, "package.json");
			if (fs.existsSync(manifest)) {
				const pkg = JSON.parse(fs.readFileSync(manifest, "utf8"));
				if (typeof pkg.name === "string" && pkg.name.endsWith("/pi-coding-agent")) {
					return pkg.name.startsWith("@earendil-works/") && Number(String(pkg.version).split(".")[0]) >= 1;
				}
			}
			dir = path.dirname(dir);
		}
	} catch {
		// unknown host: end turns at agent_end until agent_settled is seen
	}
	return false;
}

const isPrompt = (e: Entry) => e.type === "message" && e.message?.role === "user";

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** A `retrace serve` child process and its JSON-RPC requests. */
class RetraceServer {
	private child: ChildProcessWithoutNullStreams;
	private buffer = "";
	private nextId = 1;
	private pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
	private failure: Error | null = null;

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

export default function retrace(pi: Host): void {
	let server: RetraceServer | null = null;
	let session: string | null = null;
	let opening: Promise<string | null> | null = null;
	let unavailable = false;
	let warned = false;
	let turn: { anchor: string; before?: Promise<any>; rounds: Set<string>; steps: Set<string> } | null = null;
	let internalNavigation = false;
	let settles = hostSettles();

	const notify = (ctx: Ctx, message: string, type: "info" | "warning" | "error" = "info") => {
		try {
			ctx.ui.notify(message, type);
		} catch {
			// no UI to tell
		}
	};
	const isMain = (ctx: Ctx) => (ctx.agent?.kind ?? "main") === "main";

	/** Opens this session's history once; `null` when retrace is unavailable or a subagent. */
	const open = (ctx: Ctx): Promise<string | null> => {
		if (session) return Promise.resolve(session);
		if (unavailable || !isMain(ctx)) return Promise.resolve(null);
		opening ??= (async () => {
			const bin = findRetrace();
			if (!bin) {
				unavailable = true;
				if (!warned) {
					warned = true;
					notify(ctx, "retrace: the retrace binary is not on PATH (nor in RETRACE_BIN); /undo, /redo and /checkpoint are off", "warning");
				}
				return null;
			}
			server = new RetraceServer(bin);
			try {
				const opened = await server.call("open", { workspace: ctx.cwd, session: ctx.sessionManager.getSessionId(), agent: "pi" });
				session = opened.session;
				for (const w of opened.warnings ?? []) notify(ctx, `retrace: ${w}`, "warning");
				return session;
			} catch (e) {
				unavailable = true;
				notify(ctx, `retrace: cannot open the workspace history: ${errorText(e)}`, "warning");
				await server.close();
				server = null;
				return null;
			} finally {
				opening = null;
			}
		})();
		return opening;
	};

	/** One request for this session; a failure is a notification and `null`. */
	const call = async (ctx: Ctx, method: string, params: Record<string, unknown> = {}): Promise<any> => {
		if (!session || !server) return null;
		try {
			return await server.call(method, { session, ...params });
		} catch (e) {
			notify(ctx, `retrace: ${method} failed: ${errorText(e)}`, "error");
			return null;
		}
	};

	const endTurn = async (ctx: Ctx) => {
		const ending = turn;
		if (!ending) return;
		turn = null;
		await ending.before;
		const leaf = ctx.sessionManager.getLeafId() ?? ROOT;
		await round(ctx, ending, leaf);
		await call(ctx, "end_turn", { anchor: leaf });
	};

	/** Records the entries the turn has added so far (tool calls, results, custom entries) but
	 * `except`, so that navigating to one later says which turn it lies in instead of naming
	 * no snapshot. The hosts append entries at different moments, so the branch is read. */
	const round = async (ctx: Ctx, of = turn, except?: string) => {
		if (!of) return;
		const branch = ctx.sessionManager.getBranch();
		const start = of.anchor === ROOT ? 0 : branch.findIndex((e) => e.id === of.anchor) + 1;
		if (start === 0 && of.anchor !== ROOT) return;
		for (const entry of branch.slice(start)) {
			if (isPrompt(entry) || entry.id === except || of.rounds.has(entry.id)) continue;
			of.rounds.add(entry.id);
			await call(ctx, "round", { anchor: entry.id });
		}
	};

	/** The user entry of the turn that began at `anchor`: Pi moves the leaf to its parent and
	 * puts its text back in the editor. */
	const promptEntry = (ctx: Ctx, anchor: string): string | null => {
		const branch = ctx.sessionManager.getBranch();
		const start = anchor === ROOT ? 0 : branch.findIndex((e) => e.id === anchor) + 1;
		if (anchor === ROOT || start > 0) {
			const found = branch.slice(start).find(isPrompt);
			if (found) return found.id;
		}
		const children = ctx.sessionManager.getEntries().filter((e) => isPrompt(e) && (e.parentId ?? ROOT) === anchor);
		return children.at(-1)?.id ?? null;
	};

	const moveConversation = async (ctx: Ctx, target: string) => {
		if (!ctx.navigateTree || target === ROOT) return;
		internalNavigation = true;
		try {
			await ctx.navigateTree(target, { summarize: false });
		} finally {
			internalNavigation = false;
		}
	};

	/** Opens the session for a command, or says why the command cannot run. */
	const ready = async (ctx: Ctx, name: string): Promise<boolean> => {
		if (!isMain(ctx)) {
			notify(ctx, `retrace: /${name} works in the main session; this is a subagent`, "warning");
			return false;
		}
		if (!(await open(ctx))) {
			if (warned) notify(ctx, `retrace: /${name} is off: retrace is not available`, "warning");
			return false;
		}
		await ctx.waitForIdle?.();
		await endTurn(ctx);
		return true;
	};

	const guard =
		<E>(handler: (event: E, ctx: Ctx) => Promise<unknown>) =>
		async (event: E, ctx: Ctx) => {
			try {
				return await handler(event, ctx);
			} catch (e) {
				notify(ctx, `retrace: ${errorText(e)}`, "error");
				return undefined;
			}
		};

	// Every handler is guarded: a failure is a notification, never the agent's problem.
	const on = <E>(event: string, handler: (event: E, ctx: Ctx) => Promise<unknown>) => pi.on(event, guard(handler));

	on("session_start", async (_event, ctx) => {
		await open(ctx);
	});

	on("before_agent_start", async (event: { prompt?: string }, ctx) => {
		if (!(await open(ctx))) return;
		await endTurn(ctx);
		const anchor = ctx.sessionManager.getLeafId() ?? ROOT;
		const begun = await call(ctx, "begin_turn", { anchor, prompt: event.prompt });
		if (begun) turn = { anchor, rounds: new Set(), steps: new Set() };
	});

	/** Begins the step of a tool call that can write, and waits for it: a shell command's
	 * capture, when one is taken, must hold the disk as it was before the command, and an
	 * edit's begin reads the file it names as it was before the edit (on a loaded machine a
	 * tool that did not wait could write first, and its own write would then count as
	 * someone else's). */
	const beginStep = async (ctx: Ctx, event: ToolEvent) => {
		const of = turn;
		const tool = event.toolName ?? "";
		const shell = SHELL_TOOLS.has(tool);
		if (!of || !event.toolCallId || (!shell && !EDIT_TOOLS.has(tool))) return;
		const input = event.input ?? {};
		const text = (k: string) => (typeof input[k] === "string" ? (input[k] as string) : undefined);
		const file = text("path") ?? text("file_path");
		// An edit tool that names no file may write anything, as a shell command does.
		const files = shell || !file ? [] : [path.resolve(ctx.cwd, file)];
		of.steps.add(event.toolCallId);
		const begun = call(ctx, "begin_step", {
			tool,
			call: event.toolCallId,
			summary: (shell ? text("command") : file) ?? "",
			files,
		});
		await begun;
	};

	on("tool_call", async (event: ToolEvent, ctx) => {
		if (!turn) return;
		if (!turn.before) {
			turn.before = call(ctx, "wait_before", { timeout_ms: BEFORE_TIMEOUT_MS });
			const waited = await turn.before;
			if (waited?.before === "conversation_only") {
				notify(ctx, `retrace: ${waited.reason}; /undo of this turn will move the conversation only`, "warning");
			}
		}
		await turn?.before;
		await round(ctx);
		await beginStep(ctx, event);
	});

	on("tool_result", async (event: ToolEvent, ctx) => {
		const id = event.toolCallId;
		if (!turn || !id || !turn.steps.delete(id)) return;
		await call(ctx, "end_step", { call: id });
	});

	on("turn_end", async (_event, ctx) => {
		await round(ctx);
	});

	on("agent_end", async (_event, ctx) => {
		if (!settles) await endTurn(ctx);
	});

	on("agent_settled", async (_event, ctx) => {
		settles = true;
		await endTurn(ctx);
	});

	on("session_before_tree", async (event: { preparation: { targetId: string } }, ctx) => {
		if (internalNavigation || !session || !ctx.hasUI) return undefined;
		const target = event.preparation.targetId;
		const entry = ctx.sessionManager.getEntry(target);
		// Choosing a prompt moves the leaf to its parent: the state before that prompt.
		const leaf = entry?.type === "message" && entry.message?.role === "user" ? (entry.parentId ?? ROOT) : target;
		const choice = await ctx.ui.select("retrace: the workspace", [RESTORE, KEEP]);
		if (choice === undefined) return { cancel: true };
		if (choice === KEEP) {
			// Recorded so a later redo or navigation knows where the conversation went.
			await server?.call("navigate", { session, anchor: leaf, mode: "conversation" }).catch(() => null);
			return undefined;
		}
		const moved: Outcome | null = await call(ctx, "navigate", { anchor: leaf, mode: "both" });
		if (!moved) return { cancel: true };
		if (!moved.ok) {
			notify(ctx, `retrace: ${moved.message}; nothing was moved`, "warning");
			return { cancel: true };
		}
		notify(ctx, `retrace: ${moved.message}`);
		return undefined;
	});

	on("session_shutdown", async (_event, ctx) => {
		await endTurn(ctx);
		const closing = server;
		server = null;
		session = null;
		await closing?.close();
	});

	pi.registerCommand("undo", {
		description: "Undo the last prompt: its files (shell edits too) and the conversation (retrace)",
		handler: guard(async (_args: string, ctx) => {
			if (!(await ready(ctx, "undo"))) return;
			let mode = "both";
			if (ctx.hasUI) {
				const choice = await ctx.ui.select("retrace: undo the last prompt", [BOTH, CONVERSATION]);
				if (choice === undefined) return notify(ctx, "retrace: undo cancelled");
				if (choice === CONVERSATION) mode = "conversation";
			}
			const undone: Outcome | null = await call(ctx, "undo", { mode });
			if (!undone) return;
			if (!undone.ok) return notify(ctx, `retrace: ${undone.message}`, "warning");
			if (undone.anchor) await moveConversation(ctx, promptEntry(ctx, undone.anchor) ?? undone.anchor);
			notify(ctx, `retrace: ${undone.message}`);
		}),
	});

	pi.registerCommand("redo", {
		description: "Redo the last undone prompt: files and conversation (retrace)",
		handler: guard(async (_args: string, ctx) => {
			if (!(await ready(ctx, "redo"))) return;
			const redone: Outcome | null = await call(ctx, "redo");
			if (!redone) return;
			if (!redone.ok) return notify(ctx, `retrace: ${redone.message}`, "warning");
			if (redone.anchor) await moveConversation(ctx, redone.anchor);
			notify(ctx, `retrace: ${redone.message}`);
		}),
	});

	pi.registerCommand("checkpoint", {
		description: "Save the workspace as it is now, e.g. before editing by hand (retrace)",
		handler: guard(async (args: string, ctx) => {
			if (!(await ready(ctx, "checkpoint"))) return;
			const label = args.trim();
			const saved: Outcome | null = await call(ctx, "checkpoint", label ? { label } : {});
			if (saved) notify(ctx, `retrace: ${saved.message}`, saved.ok ? "info" : "warning");
		}),
	});

	/** A turn number as typed after a command: `3` or `turn:3`; null when absent or not one. */
	const turnArg = (args: string): number | null | undefined => {
		const text = args.trim().replace(/^turn:/, "");
		if (text === "") return undefined;
		return /^[0-9]+$/.test(text) ? Number(text) : null;
	};

	pi.registerCommand("revert", {
		description: "Revert one earlier prompt's file changes, keeping every later change: /revert N (retrace)",
		handler: guard(async (args: string, ctx) => {
			const n = turnArg(args);
			if (n == null) return notify(ctx, "retrace: /revert takes a turn number (see /diff or `retrace log`), e.g. /revert 2", "warning");
			if (!(await ready(ctx, "revert"))) return;
			const reverted: Outcome | null = await call(ctx, "revert", { turn: n });
			if (!reverted) return;
			notify(ctx, `retrace: ${reverted.message}`, reverted.ok ? "info" : "warning");
		}),
	});

	pi.registerCommand("diff", {
		description: "List the files a prompt changed, with lines added and removed: /diff [N] (retrace)",
		handler: guard(async (args: string, ctx) => {
			let n = turnArg(args);
			if (n === null) return notify(ctx, "retrace: /diff takes a turn number, e.g. /diff 2 (default: the last)", "warning");
			if (!(await ready(ctx, "diff"))) return;
			if (n === undefined) {
				const status = await call(ctx, "status");
				if (!status) return;
				if (status.cursor == null) return notify(ctx, "retrace: no turn is applied: nothing to show");
				n = status.cursor as number;
			}
			const shown = await call(ctx, "show", { ref: `turn:${n}` });
			if (!shown) return;
			const paths: { path: string; change: string; added: number; removed: number; binary: boolean }[] = shown.paths ?? [];
			const lines = [`retrace: turn ${n} changed ${paths.length} file(s)`];
			for (const p of paths.slice(0, 40)) {
				lines.push(`${p.change} ${p.path}  ${p.binary ? "binary" : `+${p.added} -${p.removed}`}`);
			}
			if (paths.length > 40) lines.push(`... and ${paths.length - 40} more (retrace show turn:${n})`);
			notify(ctx, lines.join("\n"));
		}),
	});
}
