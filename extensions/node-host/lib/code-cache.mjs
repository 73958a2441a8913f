// The code-cache loader (lib/code-cache.cjs) for the host's ES modules: the one instance in the
// process (host.cjs's, the bundle's or the snapshot's, whichever ran first), so every file it
// runs, runs once in the process.

import { createRequire } from "node:module";

const instance = globalThis[Symbol.for("tau.node-host.code-cache")] ?? createRequire(import.meta.url)("./code-cache.cjs");
export const { codeCachePath, requireWithCodeCache, requireForSnapshot, requiredFiles, codeCacheUse, writeCodeCaches } = instance;
