package helpentry

// Root is `berth --help`, as the command tree prints it. Written by
// TestTheEarlyHelpIsTheTreesHelp (go test ./cmd/berth -run
// TestTheEarlyHelpIsTheTreesHelp -update); do not edit.
const Root = `berth runs coding agents that speak the Agent Client Protocol as durable sessions,
owned by a daemon (berth serve) and driven over HTTP/SSE, a Unix socket and this CLI.

Exit codes: 0 ok, 1 failure, 2 usage error, 3 not found, 4 conflict.

Usage:
  berth [command]

Available Commands:
  agents       List the agents the daemon can run
  answer       Answer a pending elicitation: accept with field values, decline or cancel
  approve      Answer a pending permission request (allow once unless told otherwise)
  attach       Follow a session live and talk to it (Ctrl-D detaches; the session keeps running)
  authenticate Authenticate a session's agent with one of its auth methods (berth show lists them)
  bench        Measure session, prompt and ingest latency with the demo agent
  cancel       Cancel the turn in flight
  checkpoints  List the workspace checkpoints taken before each turn, with the turn's prompt
  children     List a session's children
  clear        Start a new agent conversation in the session's workspace (pending prompts are dropped)
  commands     List the slash commands a session's agent offers
  completion   Generate the autocompletion script for the specified shell
  create       Create a session (the agent is started and ready when it returns)
  credentials  Set, list and remove the model credentials agents use through the gateway
  doctor       Check bubblewrap, Docker, the store and each agent; exit 1 when a configured feature is broken
  elicitations List the agent's questions (elicitations) of a session
  exec         Run a command in a session's sandbox and workspace
  fork         Start a new session from a checkpoint: its workspace and the conversation before it
  help         Help about any command
  hooks        List the configured hooks and their latest deliveries
  logs         Print a session's event log (-f follows it live)
  ls           List sessions (stopped ones only with --all)
  nodes        List the daemons (nodes) sharing this daemon's store
  permissions  List a session's permission requests
  prompt       Send a prompt to a session ("-" reads it from standard input)
  queue        List a session's pending prompts, or drop one
  repair       Check a stopped session's log and close what was left open
  resume       Resume a stopped session in its workspace
  rewind       Restore an idle session's workspace to a checkpoint
  rm           Stop a session, then delete its log and managed workspace
  run          Create a session, run one prompt and stream it to the terminal
  serve        Run the berth daemon
  set          Change a session's name, labels, budgets, or its agent's mode, model and config options
  show         Show one session
  snapshot     Archive a session's workspace (berth create --from-snapshot SNAP starts a session from it)
  spawn        Spawn a child session of PARENT (never given more than PARENT has)
  stop         Stop a session (its workspace and log stay)
  ui           Sign in to the web UI with a one-time address
  usage        Show the model calls, tokens and cost of a session, or of every session

Flags:
      --addr string     daemon address, host:port or unix:PATH (env BERTH_ADDR; default: the socket in --home if present, else 127.0.0.1:7380)
  -h, --help            help for berth
      --home string     berth home directory (env BERTH_HOME; default ~/.berth)
  -o, --output string   output format: table or json (default "table")
      --token string    API bearer token (env BERTH_TOKEN)
  -v, --version         version for berth

Use "berth [command] --help" for more information about a command.
`
