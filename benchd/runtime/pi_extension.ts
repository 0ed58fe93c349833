/**
 * bench's adapter for pi: pi reports for itself to the bench daemon.
 *
 * Written in the part of TypeScript that is plain JavaScript (CommonJS, no type
 * annotations): pi loads it with jiti, and node loads it as it is, so the tests can
 * drive it without pi (tests/standin/pi.js).
 *
 * bench adds this file to one session's pi command line (`pi -e THIS
 * --bench-program=BENCH [--bench-mid-turn=1]`, benchd/runtime/adapters.py); the user's
 * own ~/.pi configuration is not touched. At each lifecycle event bench needs, it runs
 * `bench hook EVENT` with the event's JSON on standard input (the protocol and the
 * event names of every adapter, docs/agents.md) and acts on the answer:
 *
 * - session_start: `start` (idle at its prompt);
 * - agent_start: `prompt` (a run started; not for pi's own retries inside a usage
 *   limit, which stay `limited`);
 * - agent_end: `stop`, or `stop-failure` when the run ended on an error or was
 *   stopped (`error: "rate_limit"` for a 429 / rate or usage limit, with pi's error
 *   message, which may say when the limit resets). A `stop` answered with
 *   `{"decision": "block", "reason": LINE}` hands LINE to pi as its next user message
 *   (the door for mail that arrived mid-turn: nothing is typed into the terminal);
 * - session_shutdown (quitting): `end`;
 * - with --bench-mid-turn only: tool_result: `tool` (a process per tool call, hence
 *   opt-in); a line in the answer (`additionalContext`) is handed to pi as a steering
 *   message, taken before its next model call.
 *
 * pi has no permission prompts, so nothing here ever reports `permission`.
 * A report that fails (no daemon, refused) is dropped: pi never waits on bench for
 * more than HOOK_TIMEOUT_MS, and never breaks because of it.
 */

const { spawn } = require("node:child_process");

const HOOK_TIMEOUT_MS = 30_000; // a report the daemon answers at once; this bounds a stuck one
const ANSWER_BYTES = 256 * 1024; // of a hook's answer read (a wake line is far shorter)
const IDLE_WAIT_MS = 5_000; // how long a handed-over line waits for pi's run to settle
const IDLE_POLL_MS = 20;
// pi's own words for a usage or rate limit (its error message, e.g. "429 You have hit
// your usage limit ...").
const LIMIT_RE = /\b429\b|rate.?limit|usage.?limit|too many requests|quota/i;

/** @param pi pi's ExtensionAPI (docs/extensions.md in pi's package) */
module.exports = function bench(pi) {
	pi.registerFlag("bench-program", {
		description: "the bench program this session reports through (set by bench)",
		type: "string",
	});
	pi.registerFlag("bench-mid-turn", {
		description: "hand bench mail over after tool calls too (set by bench --mid-turn)",
		type: "boolean",
		default: false,
	});

	// What was last reported, to send each change once: "idle", "working", "limited".
	let state = "idle";
	let fresh = false; // a prompt (typed, or handed over) is about to start a run
	let queue = Promise.resolve(); // reports go out in order

	const program = () => {
		const given = pi.getFlag("bench-program");
		return typeof given === "string" && given ? given : "bench";
	};

	/** Run `bench hook EVENT`, PAYLOAD (an object) as its JSON input: its output, or "". */
	const run = (event, payload) =>
		new Promise((resolve) => {
			let out = "";
			let done = false;
			const finish = (text) => {
				if (!done) {
					done = true;
					clearTimeout(timer);
					resolve(text);
				}
			};
			let child;
			try {
				// The compiled client takes the event alone; `bench` takes `hook EVENT`.
				const exe = program();
				const args = /(^|\/)bench-hook$/.test(exe) ? [event] : ["hook", event];
				child = spawn(exe, args, { stdio: ["pipe", "pipe", "ignore"] });
			} catch {
				return finish("");
			}
			const timer = setTimeout(() => {
				child.kill("SIGKILL");
				finish("");
			}, HOOK_TIMEOUT_MS);
			child.on("error", () => finish(""));
			child.stdout.on("data", (chunk) => {
				if (out.length < ANSWER_BYTES) out += chunk.toString("utf8");
			});
			child.on("close", (code) => finish(code === 0 ? out : ""));
			child.stdin.on("error", () => {}); // the daemon may answer before reading it all
			child.stdin.end(JSON.stringify(payload));
		});

	/** Report EVENT after the reports before it; the daemon's answer (its JSON), or {}. */
	const report = (event, payload = {}) => {
		const next = queue.then(() => run(event, { hook_event_name: event, ...payload }));
		queue = next.catch(() => "");
		return next.then((text) => {
			try {
				const answer = JSON.parse(text.trim() || "{}");
				return answer && typeof answer === "object" ? answer : {};
			} catch {
				return {};
			}
		});
	};

	/** A line handed over at a run's end: pi's next user message once its run has
	 * settled (pi is not idle until every agent_end listener has returned). */
	const handOver = (line, ctx) => {
		const deadline = Date.now() + IDLE_WAIT_MS;
		const attempt = () => {
			if (ctx.isIdle()) {
				pi.sendUserMessage(line);
			} else if (Date.now() >= deadline) {
				pi.sendUserMessage(line, { deliverAs: "followUp" }); // taken at its next end
			} else {
				setTimeout(attempt, IDLE_POLL_MS);
			}
		};
		setTimeout(attempt, 0);
	};

	pi.on("session_start", async (event) => {
		state = "idle";
		await report("start", { source: event.reason });
	});

	pi.on("before_agent_start", async () => {
		fresh = true; // pi's own retries start runs without it
	});

	pi.on("agent_start", async () => {
		const retry = !fresh && state === "limited";
		fresh = false;
		if (retry || state === "working") return;
		state = "working";
		await report("prompt");
	});

	pi.on("message_end", async (event) => {
		// A retry inside a usage limit that got an answer: the limit is over, pi works.
		const m = event.message;
		if (state === "limited" && m?.role === "assistant" && m.stopReason !== "error") {
			state = "working";
			await report("prompt");
		}
	});

	pi.on("agent_end", async (event, ctx) => {
		const last = [...(event.messages ?? [])].reverse().find((m) => m.role === "assistant");
		const failed = last?.stopReason === "error";
		const why = (last?.errorMessage ?? "").slice(0, 2000);
		if (failed && LIMIT_RE.test(why)) {
			if (state === "limited") return; // pi retries by itself: one report per limit
			state = "limited";
			await report("stop-failure", { error: "rate_limit", error_message: why });
			return;
		}
		state = "idle";
		if (failed || last?.stopReason === "aborted") {
			// Another error, or the operator stopped it (Escape): idle, but no line handed
			// over; a wake waits for the usual idle gate (and for the operator's typing).
			const error = failed ? "unknown" : "aborted";
			await report("stop-failure", { error, error_message: why });
			return;
		}
		const answer = await report("stop", { stop_reason: last?.stopReason ?? null });
		if (answer.decision === "block" && typeof answer.reason === "string" && answer.reason) {
			state = "working"; // the daemon says so too: the line goes on as its next prompt
			fresh = true;
			handOver(answer.reason, ctx);
		}
	});

	pi.on("tool_result", async (event) => {
		if (!pi.getFlag("bench-mid-turn")) return;
		const answer = await report("tool", { tool_name: event.toolName });
		const added = (answer.hookSpecificOutput || {}).additionalContext;
		if (typeof added === "string" && added) {
			pi.sendUserMessage(added, { deliverAs: "steer" }); // before its next model call
		}
	});

	pi.on("session_shutdown", async (event) => {
		if (event.reason === "quit") await report("end");
	});
};
