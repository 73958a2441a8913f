// Owns the JSON-lines conversation with tau: reading frames from stdin, writing frames to the
// saved stdout, and matching tau's `response` frames to the requests the host itself sent
// (actions that expect a reply).

import { appendFileSync } from "node:fs";
import { parseFrame } from "./deferred-json.mjs";
import { writeLine } from "./stdout-guard.mjs";

// `TAU_HOST_FRAME_LOG=<file>`: every frame read and written, one JSON line each
// (`{"dir":"in"|"out","line":…}`), so tests can check tau's frames against its schema. Read at
// the first frame, not as the module loads: the start-up snapshot loads it at install.
let frameLog;
function logFrame(dir, line) {
	frameLog ??= process.env.TAU_HOST_FRAME_LOG ?? "";
	if (frameLog) appendFileSync(frameLog, `${JSON.stringify({ dir, line })}\n`);
}

let nextRequestId = 1;
const pending = new Map();

/** Sends one frame. A value that JSON cannot represent (a cycle, a BigInt) fails here, in the
 * caller, rather than corrupting the stream. */
export function send(frame) {
	const line = JSON.stringify(frame);
	logFrame("out", line);
	writeLine(line);
}

/** Sends `frame` with a fresh id and resolves with tau's `result`, or rejects with its `error`. */
export function request(frame) {
	const id = `h${nextRequestId++}`;
	return new Promise((resolve, reject) => {
		pending.set(id, { resolve, reject });
		try {
			send({ ...frame, id });
		} catch (err) {
			pending.delete(id);
			reject(err);
		}
	});
}

/** Routes a `response` frame from tau; returns false when it answers nothing we asked. */
export function settleResponse(frame) {
	const waiter = pending.get(frame.id);
	if (!waiter) return false;
	pending.delete(frame.id);
	if (frame.error !== undefined && frame.error !== null) {
		waiter.reject(new Error(typeof frame.error === "string" ? frame.error : JSON.stringify(frame.error)));
	} else {
		waiter.resolve(frame.result ?? null);
	}
	return true;
}

/** Fails every outstanding host request, e.g. when tau goes away. */
export function rejectAllPending(message) {
	for (const [id, waiter] of pending) {
		pending.delete(id);
		waiter.reject(new Error(message));
	}
}

/** Answers a tau request. A result that cannot be serialised becomes an error answer so that
 * tau is never left waiting. */
export function respond(id, result) {
	try {
		send({ type: "response", id, result: result === undefined ? null : result });
	} catch (err) {
		send({ type: "response", id, error: `Result is not JSON-serialisable: ${errorMessage(err)}` });
	}
}

export function respondError(id, err) {
	send({ type: "response", id, error: errorMessage(err) });
}

export function errorMessage(err) {
	return err instanceof Error ? err.message : String(err);
}

/** Calls `onFrame` for each JSON line on stdin and `onEnd` once stdin closes. */
export function readFrames(onFrame, onEnd) {
	let buffer = "";
	process.stdin.setEncoding("utf8");
	process.stdin.on("data", (chunk) => {
		buffer += chunk;
		let newline = buffer.indexOf("\n");
		while (newline !== -1) {
			const line = buffer.slice(0, newline).trim();
			buffer = buffer.slice(newline + 1);
			if (line) parseAndDeliver(line, onFrame);
			newline = buffer.indexOf("\n");
		}
	});
	process.stdin.on("end", () => {
		const rest = buffer.trim();
		buffer = "";
		if (rest) parseAndDeliver(rest, onFrame);
		onEnd();
	});
}

function parseAndDeliver(line, onFrame) {
	logFrame("in", line);
	let frame;
	try {
		frame = parseFrame(line);
	} catch {
		process.stderr.write(`node-host: ignoring a line that is not JSON: ${line.slice(0, 200)}\n`);
		return;
	}
	if (frame === null || typeof frame !== "object" || typeof frame.type !== "string") {
		process.stderr.write(`node-host: ignoring a frame without a type: ${line.slice(0, 200)}\n`);
		return;
	}
	onFrame(frame);
}
