// Owns the process's real stdout. tau reads protocol frames from it, so this module keeps a
// private handle to it and points every other writer (process.stdout.write, console.log & co.)
// at stderr, which tau copies to its own stderr with the extension's name in front.
// guardStdout() must be the first thing the host's main() does: anything that runs before it
// could still reach the real stdout. It is a function, not the module's own top level, because
// the start-up snapshot (scripts/build-snapshot.mjs) evaluates every module at install, when
// the process's streams are not the ones the host will run with.

import nodeConsole from "node:console";

// Taken as the module loads: in a process started from a snapshot, Node 20's console no longer
// has its Console class (lib/snapshot.mjs puts it back, but only as the host starts).
const { Console } = nodeConsole;

let rawWrite;
// tau closing our stdout means nobody is listening any more; a write error must not turn into an
// uncaught exception that the crash handler would try to report on the very same stream.
let closed = false;

export function guardStdout() {
	if (rawWrite) return;
	rawWrite = process.stdout.write.bind(process.stdout);
	process.stdout.write = function writeToStderr(chunk, encodingOrCallback, callback) {
		return process.stderr.write(chunk, encodingOrCallback, callback);
	};
	// The global console captured process.stdout when it was created; swapping the write method
	// above already covers it, but replacing the methods as well survives code that grabbed the
	// stream's original write before us (some logging libraries do).
	const stderrConsole = new Console({ stdout: process.stderr, stderr: process.stderr });
	for (const method of ["log", "info", "debug", "dir", "dirxml", "table"]) {
		console[method] = stderrConsole[method].bind(stderrConsole);
	}
	process.stdout.on("error", () => {
		closed = true;
		process.exit(0);
	});
}

/** Writes one protocol line to the real stdout. Pipe and file writes are synchronous on POSIX,
 * so frames reach tau in the order they were sent. */
export function writeLine(line) {
	if (closed) return;
	guardStdout();
	rawWrite(line.endsWith("\n") ? line : `${line}\n`);
}
