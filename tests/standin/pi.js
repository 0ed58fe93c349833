// A stand-in for pi (0.73) that loads extensions (`-e FILE`) and drives their events as
// pi does, for the pi adapter's tests without pi (tests/conformance/test_pi_adapter.py).
// Run as a program named `pi` (the tests put a `pi` script first on PATH that execs
// `node THIS`), so `bench spawn --agent pi` gives it bench's extension and its flags.
//
// It reads lines in the terminal's cooked mode and runs one prompt at a time:
//   session_start at start, then the ready line `0.0%/128k (auto)`;
//   each prompt (a typed line, or one an extension sent with sendUserMessage while
//   idle): before_agent_start, agent_start, then by its words
//     `work S`: a tool call lasting S seconds (tool_result after it; steering messages
//               sent meanwhile are taken before the next model call),
//     `limit TEXT`: a failed model call, "429 TEXT", retried twice as pi does (each
//               retry: agent_start and agent_end again, without before_agent_start),
//     `fail`: a failed model call that is no limit,
//     anything else: an answer `ok: LINE`;
//   then message_end and agent_end, the run being over (pi is idle while agent_end's
//   handlers run, as in pi); follow-up messages queued meanwhile run in the same run;
//   at end of input: session_shutdown (reason quit), exit 0.
// `--record FILE` appends every prompt taken as {"line", "source"} JSON lines (source
// "interactive": typed; "extension": sent by an extension; "steer"/"followUp" too), and
// writes FILE.flags with the extension flags given.

const fs = require("node:fs");
const readline = require("node:readline");

const argv = process.argv.slice(2);
const extensions = [];
const given = new Map();
let record = null;
for (let i = 0; i < argv.length; i++) {
	const arg = argv[i];
	if (arg === "-e" || arg === "--extension") extensions.push(argv[++i]);
	else if (arg === "--record") record = argv[++i];
	else if (arg.startsWith("--") && arg.includes("=")) {
		const at = arg.indexOf("=");
		given.set(arg.slice(2, at), arg.slice(at + 1));
	}
}

const handlers = new Map();
const flags = new Map();
const registered = new Map();
const steering = [];
const followUps = [];
let streaming = false;
let chain = Promise.resolve();

const note = (line, source) => {
	if (record) fs.appendFileSync(record, `${JSON.stringify({ line, source })}\n`);
};
const sleep = (s) => new Promise((resolve) => setTimeout(resolve, s * 1000));
const ctx = { isIdle: () => !streaming, hasUI: true, cwd: process.cwd() };

const pi = {
	registerFlag(name, options) {
		registered.set(name, options);
		if (options.default !== undefined) flags.set(name, options.default);
	},
	getFlag: (name) => flags.get(name),
	on(event, handler) {
		if (!handlers.has(event)) handlers.set(event, []);
		handlers.get(event).push(handler);
	},
	sendUserMessage(text, options) {
		const how = options?.deliverAs;
		if (streaming) {
			if (how === "steer") steering.push(text);
			else if (how === "followUp") followUps.push(text);
			else throw new Error("Agent is already processing. Specify deliverAs.");
			return;
		}
		note(text, "extension");
		start(text);
	},
};

async function emit(event, payload) {
	for (const handler of handlers.get(event) ?? []) {
		try {
			await handler({ type: event, ...payload }, ctx);
		} catch (err) {
			console.log(`extension error in ${event}: ${err}`);
		}
	}
}

async function end(messages) {
	streaming = false; // pi is idle before its agent_end listeners have settled
	await emit("agent_end", { messages });
}

async function run(line) {
	streaming = true;
	await emit("before_agent_start", { prompt: line });
	await emit("agent_start", {});
	const [word, ...rest] = line.split(" ");
	if (word === "limit") {
		const failed = { role: "assistant", stopReason: "error", errorMessage: `429 ${rest.join(" ")}` };
		await emit("message_end", { message: failed });
		await end([failed]);
		for (let retry = 0; retry < 2; retry++) {
			await sleep(0.2);
			streaming = true;
			await emit("agent_start", {});
			await emit("message_end", { message: failed });
			await end([failed]);
		}
		console.log(`Error: ${failed.errorMessage}`);
		console.log("0.0%/128k (auto)");
		return;
	}
	if (word === "fail") {
		const failed = { role: "assistant", stopReason: "error", errorMessage: "500 server error" };
		await end([failed]);
		console.log("0.0%/128k (auto)");
		return;
	}
	if (word === "work") {
		await sleep(Number(rest[0] || 1));
		await emit("tool_result", { toolName: "bash", input: {}, content: [], isError: false });
		while (steering.length) {
			const text = steering.shift();
			note(text, "steer");
			console.log(`ok: ${text}`);
		}
	} else {
		console.log(`ok: ${line}`);
	}
	while (followUps.length) {
		const text = followUps.shift();
		note(text, "followUp");
		console.log(`ok: ${text}`);
	}
	const done = { role: "assistant", stopReason: "stop" };
	await emit("message_end", { message: done });
	await end([done]);
	console.log("0.0%/128k (auto)");
}

function start(line) {
	chain = chain.then(() => run(line));
	return chain;
}

async function main() {
	for (const path of extensions) {
		const factory = require(path);
		await (factory.default ?? factory)(pi);
	}
	for (const [name, value] of given) {
		const options = registered.get(name);
		if (!options) {
			console.log(`Unknown option: --${name}`);
			process.exit(1);
		}
		flags.set(name, options.type === "boolean" ? true : value);
	}
	if (record) fs.writeFileSync(`${record}.flags`, JSON.stringify(Object.fromEntries(flags)));
	await emit("session_start", { reason: "startup" });
	console.log("0.0%/128k (auto)");
	const lines = readline.createInterface({ input: process.stdin, terminal: false });
	for await (const raw of lines) {
		const line = raw.replaceAll("\x1b[200~", "").replaceAll("\x1b[201~", "").trim();
		if (!line) continue;
		note(line, "interactive");
		start(line);
	}
	await chain;
	await emit("session_shutdown", { reason: "quit" });
	process.exit(0);
}

main();
