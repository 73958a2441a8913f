// Ids the host makes up: dialog request ids and provisional entry ids. They need to be unique
// within this process and session, not unguessable (they travel only on tau's pipes), so they
// come from Math.random: loading node:crypto for randomUUID cost ~10 ms of every host start.

/** `digits` random lowercase hex digits. */
export function randomHex(digits) {
	let hex = "";
	while (hex.length < digits) hex += Math.floor(Math.random() * 0x100000000).toString(16).padStart(8, "0");
	return hex.slice(0, digits);
}

/** A version 4 UUID in the usual text form, as crypto.randomUUID writes one. */
export function randomUuid() {
	const h = randomHex(32);
	const variant = ((Number.parseInt(h[16], 16) & 0x3) | 0x8).toString(16);
	return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20)}`;
}
