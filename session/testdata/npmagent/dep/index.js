// greeting is what the agent's answers start with: a module the agent
// finds only through node's node_modules lookup.
export const greeting = "hello from a hoisted dependency";
