// Owns where the host keeps its on-disk caches: under the user's agent directory, never in the
// shared temp directory, where another local user could plant a transpiled "cache hit" (jiti
// trusts any file whose name and trailer match) or a compiled-code entry and have it run as
// this user.

import { chmodSync, lstatSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";

/**
 * `<agentDir>/cache/<name>`, created owner-only, or `undefined` when it cannot be created or
 * fails the checks (then the caller runs without that cache). Every level tau creates is
 * checked, since whoever can write `cache` can swap the folder below it.
 */
export function privateCacheDir(agentDir, name) {
	if (typeof agentDir !== "string" || agentDir === "") return undefined;
	const cache = join(agentDir, "cache");
	const dir = join(cache, name);
	try {
		mkdirSync(dir, { recursive: true, mode: 0o700 });
	} catch {
		return undefined;
	}
	return isPrivate(cache) && isPrivate(dir) ? dir : undefined;
}

/** Ours, a real folder (not a symlink to elsewhere), and nobody else can write to it. */
function isPrivate(dir) {
	try {
		const stat = lstatSync(dir);
		const owner = typeof process.getuid === "function" ? process.getuid() : stat.uid;
		return stat.isDirectory() && stat.uid === owner && (stat.mode & 0o022) === 0;
	} catch {
		return false;
	}
}

/**
 * jiti writes its cache files with the default mode (world-readable under the usual umask)
 * and has no option to change that; the folder already keeps others out, this keeps the files
 * private should the folder's mode ever be loosened. A umask would do it too, but would also
 * change the mode of every file the extensions and their child processes write.
 */
export function restrictFiles(dir) {
	if (!dir) return;
	let names;
	try {
		names = readdirSync(dir);
	} catch {
		return;
	}
	for (const name of names) {
		const path = join(dir, name);
		try {
			const stat = lstatSync(path);
			if (stat.isFile() && (stat.mode & 0o077) !== 0) chmodSync(path, 0o600);
		} catch {
			// Removed meanwhile, or not ours: nothing to protect.
		}
	}
}
