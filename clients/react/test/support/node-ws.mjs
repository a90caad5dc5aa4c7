// Evaluated before jsdom is installed as the global window: Node's own WebSocket.
export const NodeWebSocket = globalThis.WebSocket;
