#!/bin/sh
# bench-memory.sh BERTH PORT PROMPT [wait]
#
# Starts `BERTH serve` on a temporary home, runs one demo-agent turn with
# PROMPT (e.g. "flood 1 52428800": one 50 MB line), and prints the daemon's
# peak RSS (VmHWM) idle, after the turn and after GET …/transcript, and how
# long the transcript took. With "wait" the prompt is sent with ?wait=true
# (the answer carries the turn's text) instead of polling for its end.
set -eu
BIN=$1 PORT=$2 PROMPT=$3 WAIT=${4:-}
HOME_DIR=$(mktemp -d)
BERTH_HOME=$HOME_DIR "$BIN" serve --addr 127.0.0.1:"$PORT" --home "$HOME_DIR" >"$HOME_DIR/daemon.log" 2>&1 &
PID=$!
trap 'kill $PID; wait $PID 2>/dev/null; rm -rf "$HOME_DIR"' EXIT
mkdir -p "$HOME_DIR/ws"
U=http://127.0.0.1:$PORT
for _ in $(seq 100); do curl -sf "$U/v1/health" >/dev/null && break; sleep 0.1; done
SID=$(curl -sf -XPOST "$U/v1/sessions" -H 'content-type: application/json' \
	-d "{\"agent\":\"demo\",\"sandbox\":\"host\",\"workspace\":\"$HOME_DIR/ws\"}" | sed 's/.*"id":"\([^"]*\)".*/\1/')
hwm() { echo "$1: $(awk '/VmHWM/ {print $2, $3}' /proc/$PID/status)"; }
hwm idle
if [ "$WAIT" = wait ]; then
	curl -sf -XPOST "$U/v1/sessions/$SID/prompts?wait=true" -H 'content-type: application/json' \
		-d "{\"text\":\"$PROMPT\"}" -o /dev/null
else
	curl -sf -XPOST "$U/v1/sessions/$SID/prompts" -H 'content-type: application/json' \
		-d "{\"text\":\"$PROMPT\"}" -o /dev/null
	until curl -sf "$U/v1/sessions/$SID/events?type=turn_ended" | grep -q stop_reason; do sleep 0.2; done
fi
hwm "after the turn"
start=$(date +%s.%N)
curl -sf "$U/v1/sessions/$SID/transcript" -o /dev/null
echo "transcript: $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
hwm "after the transcript"
