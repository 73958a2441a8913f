// Frames from tau as the host parses them (wire.mjs reads the lines), with the model catalog
// kept as text until something reads it, since most extensions never look at it.

export class DeferredJson {
	constructor(text) {
		this.text = text;
	}

	/** Parses the text; throws when it is not JSON. */
	parse() {
		return JSON.parse(this.text);
	}
}

// tau writes the model catalog (`state.allModels`, 800-odd models, ~300 KB) as the last key of
// the last field of the first frame that carries state to a process (docs/extensions.md §5).
// Parsing it and building its objects cost ~12 ms on the way to the first event's answer, and
// most extensions never read it; so the text is cut off here and parsed when first read.
const CATALOG_KEY = ',"allModels":[';
const LARGE_LINE = 64 * 1024;

/** Splits the catalog off a large frame; `undefined` when the line is not shaped that way. */
function withDeferredCatalog(line) {
	if (line.length < LARGE_LINE || !line.endsWith("]}}")) return undefined;
	const at = line.lastIndexOf(CATALOG_KEY);
	if (at === -1) return undefined;
	try {
		const frame = JSON.parse(`${line.slice(0, at)}}}`);
		// The cut must have closed `state`, the frame's last field (JSON.parse keeps key order).
		if (!frame?.state || typeof frame.state !== "object" || Object.keys(frame).at(-1) !== "state" || Object.hasOwn(frame.state, "allModels")) return undefined;
		frame.state.allModels = new DeferredJson(line.slice(at + CATALOG_KEY.length - 1, -2));
		return frame;
	} catch {
		// Not the shape tau writes (the key was inside a value): the whole line is parsed.
		return undefined;
	}
}

/** One line from tau as a frame (the catalog left as text when it ends the line); throws when
 * the line is not JSON. */
export function parseFrame(line) {
	return withDeferredCatalog(line) ?? JSON.parse(line);
}
