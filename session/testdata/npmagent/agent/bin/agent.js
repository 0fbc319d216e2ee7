#!/usr/bin/env node
// berth-test-npm-agent: answers a prompt with its dependency's greeting
// and the token its home file ~/.tiny/auth.json held at session/new, when
// it writes its own state into ~/.tiny/ (a home_files directory) and
// rewrites the token, as real agents do.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { greeting } from "berth-test-npm-dep";
import { serve } from "../lib/rpc.js";

const dir = join(process.env.HOME, ".tiny");
let token = "";
serve({
  initialize: () => ({ protocolVersion: 1, agentCapabilities: {}, authMethods: [] }),
  "session/new": () => {
    token = readFileSync(join(dir, "auth.json"), "utf8");
    writeFileSync(join(dir, "state.json"), JSON.stringify({ started: true }));
    writeFileSync(join(dir, "auth.json"), "rewritten by the agent");
    return { sessionId: "tiny-1" };
  },
  "session/prompt": (params, send) => {
    const state = readFileSync(join(dir, "state.json"), "utf8");
    send({ method: "session/update", params: { sessionId: params.sessionId, update: {
      sessionUpdate: "agent_message_chunk",
      content: { type: "text", text: `${greeting}; token ${token}; state ${state}; node ${process.version}` } } } });
    return { stopReason: "end_turn" };
  },
});
