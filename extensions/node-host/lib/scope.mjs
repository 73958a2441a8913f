// Owns the lifetime of one tau request (event, execute_tool, run_command, prepare_arguments): the
// AbortSignal its handler, tool or ctx sees, and the dialogs it opened, so that a `cancel` from
// tau (a deadline or an `abort`) releases everything the request is waiting on.

export class RequestScope {
	constructor(id, kind) {
		this.id = id;
		this.kind = kind;
		this.controller = new AbortController();
		this.dialogClosers = new Set();
	}

	get signal() {
		return this.controller.signal;
	}

	get cancelled() {
		return this.controller.signal.aborted;
	}

	cancel() {
		if (!this.controller.signal.aborted) this.controller.abort(new Error("Cancelled by tau"));
		for (const close of [...this.dialogClosers]) close();
	}
}

const scopes = new Map();

export function openScope(id, kind) {
	const scope = new RequestScope(id, kind);
	if (id !== undefined) scopes.set(id, scope);
	return scope;
}

export function closeScope(scope) {
	if (scopes.get(scope.id) === scope) scopes.delete(scope.id);
}

export function cancelScope(id) {
	scopes.get(id)?.cancel();
}

export function cancelAllScopes() {
	for (const scope of scopes.values()) scope.cancel();
}
