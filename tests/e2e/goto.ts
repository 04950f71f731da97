/**
 * Test helper for tests/pi_e2e.rs: navigates the session tree as a user does with /tree,
 * which RPC mode has no command for. `/goto-prompt TEXT` selects the user entry holding
 * TEXT; `/goto-end TEXT` selects the last entry of that prompt's turn; `/goto-inside TEXT`
 * the entry right after the prompt (inside the turn). Answers with a notification starting
 * "goto:".
 */
export default function (pi: any) {
	const text = (e: any) => JSON.stringify(e?.message?.content ?? "");
	const find = (ctx: any, needle: string, where: string): string | undefined => {
		const entries = ctx.sessionManager.getEntries();
		const at = entries.findIndex((e: any) => e.type === "message" && e.message?.role === "user" && text(e).includes(needle));
		if (at < 0 || where === "prompt") return entries[at]?.id;
		if (where === "inside") return entries[at + 1]?.id;
		const next = entries.findIndex((e: any, i: number) => i > at && e.type === "message" && e.message?.role === "user");
		return entries[(next < 0 ? entries.length : next) - 1]?.id;
	};
	for (const where of ["prompt", "end", "inside"]) {
		const name = `goto-${where}`;
		pi.registerCommand(name, {
			description: "test helper: navigate the session tree",
			handler: async (args: string, ctx: any) => {
				const target = find(ctx, args.trim(), where);
				if (!target) return ctx.ui.notify(`goto: no entry for ${args}`, "error");
				const result = await ctx.navigateTree(target, { summarize: false });
				ctx.ui.notify(`goto: ${result?.cancelled ? "cancelled" : "moved"}`, "info");
			},
		});
	}
}
