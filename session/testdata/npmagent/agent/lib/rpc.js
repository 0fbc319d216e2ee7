// A few lines of ACP over newline-delimited JSON-RPC on stdio.
import { createInterface } from "node:readline";

export function serve(handlers) {
  const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");
  createInterface({ input: process.stdin }).on("line", async (line) => {
    const msg = JSON.parse(line);
    if (msg.method === undefined || msg.id === undefined) return;
    const handler = handlers[msg.method];
    if (!handler) {
      send({ id: msg.id, error: { code: -32601, message: "method not found" } });
      return;
    }
    try {
      send({ id: msg.id, result: await handler(msg.params, send) });
    } catch (e) {
      send({ id: msg.id, error: { code: -32603, message: String(e) } });
    }
  });
}
