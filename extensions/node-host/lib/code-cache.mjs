// The code-cache loader (lib/code-cache.cjs) for the host's ES modules: the one instance host.cjs
// loads, so every file it runs, runs once in the process.

import { createRequire } from "node:module";

export const { codeCachePath, requireWithCodeCache, codeCacheUse, writeCodeCaches } = createRequire(import.meta.url)("./code-cache.cjs");
