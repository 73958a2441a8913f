// Owns the random ids the host makes (dialog requests, entry ids). node:crypto costs ~8 ms of
// CPU to load, a tenth of the host's start, and most extensions never open a dialog: it is
// loaded the first time an id is needed.

import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
let crypto;

/** A random version 4 UUID, as `crypto.randomUUID()` makes it. */
export function randomUUID() {
	crypto ??= require("node:crypto");
	return crypto.randomUUID();
}
