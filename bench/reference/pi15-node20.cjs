#!/usr/bin/env node
// Runs pi 1.5.2 (@earendil-works/pi-coding-agent) on Node 20. bench/reference/install-pi15.sh
// installs this file as DIR/node_modules/.bin/pi; call it exactly as you would call pi.
//
// pi 1.5.2 requires Node >= 22.19. What its bundle (dist/bundle, undici 8 inlined) actually
// needs from Node 22 while it starts and serves RPC is small, and is added here before any of
// pi's code loads; pi's files are left as published.
//
//   Promise.withResolvers            Node 22.0   undici's fetch, which pi installs as the global
//                                                fetch; added with its standard behaviour.
//   worker_threads.markAsUncloneable Node 22.10  undici's WebIDL layer marks objects with it; no
//                                                message ports are involved here, so a no-op.
//   zlib.createZstdDecompress        Node 22.15  undici binds it once when it loads and calls it
//                                                only for a `content-encoding: zstd` response,
//                                                which it asks for only over https; throws here.
//   fs.globSync                      Node 22.0   pi expands wildcards in `packages` settings with
//                                                it. Its chunks import it by name from node:fs,
//                                                and Node 20 fixes the names an ESM import of a
//                                                builtin can see before user code runs, so
//                                                setting it on the fs object is not enough: a
//                                                loader hook gives pi's files a node:fs that
//                                                re-exports the real one plus the version below.
//   module.enableCompileCache        Node 22.1   imported only by dist/bundle/cli.js, which then
//                                                loads dist/bundle/cli-runtime.js; this launcher
//                                                loads cli-runtime.js itself and skips cli.js.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL, fileURLToPath } = require('node:url');

const piPackage = path.join(__dirname, '..', '@earendil-works', 'pi-coding-agent');

function addIfMissing(target, name, value) {
    if (typeof target[name] !== 'function') {
        Object.defineProperty(target, name, { value, writable: true, configurable: true, enumerable: false });
    }
}

addIfMissing(Promise, 'withResolvers', function withResolvers() {
    const deferred = {};
    deferred.promise = new this((resolve, reject) => {
        deferred.resolve = resolve;
        deferred.reject = reject;
    });
    return deferred;
});

const workerThreads = require('node:worker_threads');
if (typeof workerThreads.markAsUncloneable !== 'function') {
    workerThreads.markAsUncloneable = () => {};
}

const zlib = require('node:zlib');
if (typeof zlib.createZstdDecompress !== 'function') {
    zlib.createZstdDecompress = () => {
        throw new Error(`zstd-encoded responses cannot be decoded on Node ${process.versions.node}`);
    };
}

// --- fs.globSync -------------------------------------------------------------------------------
// Enough of Node 22's fs.globSync for pi's use: `*`, `?`, `[...]` (and `[!...]`), `**` for any
// depth, `{a,b}` alternatives, a string or an array of patterns, options `cwd` and `exclude` (a
// function). Wildcards do not match a leading dot unless the pattern segment starts with one;
// results are relative to cwd for a relative pattern, absolute for an absolute one.

function expandBraces(pattern) {
    const open = pattern.indexOf('{');
    if (open === -1) return [pattern];
    let depth = 0;
    const commas = [];
    for (let i = open; i < pattern.length; i++) {
        const c = pattern[i];
        if (c === '{') depth++;
        else if (c === '}' && --depth === 0) {
            if (commas.length === 0) break; // `{x}` is not an alternative; keep it literal
            const head = pattern.slice(0, open);
            const tail = pattern.slice(i + 1);
            const cuts = [open, ...commas, i];
            const out = [];
            for (let k = 0; k + 1 < cuts.length; k++) {
                out.push(...expandBraces(head + pattern.slice(cuts[k] + 1, cuts[k + 1]) + tail));
            }
            return out;
        } else if (c === ',' && depth === 1) commas.push(i);
    }
    const rest = expandBraces(pattern.slice(open + 1));
    return rest.map((r) => pattern.slice(0, open + 1) + r);
}

const hasWildcard = (segment) => /[*?[]/.test(segment);

function segmentMatcher(segment) {
    let source = segment.startsWith('.') ? '' : '(?!\\.)';
    for (let i = 0; i < segment.length; i++) {
        const c = segment[i];
        if (c === '*') source += '[^/]*';
        else if (c === '?') source += '[^/]';
        else if (c === '[' && segment.indexOf(']', i + 2) !== -1) {
            const close = segment.indexOf(']', i + 2);
            let body = segment.slice(i + 1, close);
            const negate = body[0] === '!' || body[0] === '^';
            if (negate) body = body.slice(1);
            source += (negate ? '[^' : '[') + body.replace(/[\\\]]/g, '\\$&') + ']';
            i = close;
        } else source += c.replace(/[.+^${}()|\\\]]/g, '\\$&');
    }
    return new RegExp(`^${source}$`);
}

function isDirectory(file) {
    try {
        return fs.statSync(file).isDirectory();
    } catch {
        return false;
    }
}

function listDirectory(dir) {
    try {
        return fs.readdirSync(dir, { withFileTypes: true });
    } catch {
        return [];
    }
}

function globOne(pattern, cwd, found) {
    const absolute = path.isAbsolute(pattern);
    const segments = pattern.split(/[\\/]+/).filter((s, i) => s !== '' || (i === 0 && !absolute));
    const start = absolute ? path.parse(path.resolve(pattern)).root : cwd;
    const shown = (rel) => (absolute ? path.join(start, rel) : rel);

    const walk = (dir, rel, index) => {
        if (index === segments.length) {
            if (rel !== '') found.add(shown(rel));
            return;
        }
        const segment = segments[index];
        const last = index === segments.length - 1;
        if (segment === '**') {
            walk(dir, rel, index + 1);
            for (const entry of listDirectory(dir)) {
                if (entry.name.startsWith('.')) continue;
                // Descends into real directories only: following links could loop.
                if (entry.isDirectory()) walk(path.join(dir, entry.name), path.join(rel, entry.name), index);
                else if (last) found.add(shown(path.join(rel, entry.name)));
            }
        } else if (!hasWildcard(segment)) {
            const next = path.join(dir, segment);
            if (last ? fs.existsSync(next) : isDirectory(next)) walk(next, path.join(rel, segment), index + 1);
        } else {
            const matcher = segmentMatcher(segment);
            for (const entry of listDirectory(dir)) {
                if (!matcher.test(entry.name)) continue;
                const next = path.join(dir, entry.name);
                if (last || isDirectory(next)) walk(next, path.join(rel, entry.name), index + 1);
            }
        }
    };
    walk(start, '', 0);
}

function globSync(pattern, options = {}) {
    const cwd = options.cwd instanceof URL ? fileURLToPath(options.cwd) : path.resolve(options.cwd || '.');
    const found = new Set();
    for (const each of Array.isArray(pattern) ? pattern : [pattern]) {
        for (const expanded of expandBraces(String(each))) globOne(expanded, cwd, found);
    }
    const results = [...found];
    return typeof options.exclude === 'function' ? results.filter((p) => !options.exclude(p)) : results;
}

function provideGlobSync() {
    if (typeof fs.globSync === 'function') return;
    fs.globSync = globSync;

    // Module evaluated in place of node:fs for pi's own files: every export of node:fs, plus
    // globSync taken from the fs object, which is the one patched just above.
    const fsWithGlob =
        'data:text/javascript,' +
        encodeURIComponent(
            "import fs from 'node:fs';\nexport * from 'node:fs';\nexport default fs;\nexport const globSync = fs.globSync;\n",
        );
    // Loader hooks (they run on Node's loader thread, so they get what they need through `data`).
    const hooks =
        'data:text/javascript,' +
        encodeURIComponent(`
let scope;
let replacement;
export function initialize(data) {
    scope = data.scope;
    replacement = data.replacement;
}
export function resolve(specifier, context, nextResolve) {
    const fromPi = typeof context.parentURL === 'string' && context.parentURL.startsWith(scope);
    if (fromPi && (specifier === 'node:fs' || specifier === 'fs')) {
        return { url: replacement, shortCircuit: true };
    }
    return nextResolve(specifier, context);
}
`);
    // The loader sees pi's files by their real path, so the scope is taken from the real path too.
    const scope = pathToFileURL(fs.realpathSync(piPackage)).href + '/';
    require('node:module').register(hooks, { data: { scope, replacement: fsWithGlob } });
}

// Exported so that globSync can be tried without starting pi: node -e 'require("./pi15-node20.cjs")'.
module.exports = { globSync, expandBraces };

if (require.main === module) {
    provideGlobSync();
    const runtime = path.join(piPackage, 'dist', 'bundle', 'cli-runtime.js');
    import(pathToFileURL(runtime).href).catch((error) => {
        console.error(error);
        process.exit(1);
    });
}
