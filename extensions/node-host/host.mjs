// The host's entry as an ES module, for a `TAU_NODE_HOST` set before host.cjs existed: it runs
// host.cjs, which tau starts itself (it says why it is CommonJS).
import "./host.cjs";
