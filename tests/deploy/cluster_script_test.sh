#!/usr/bin/env bash
# deploy/local/cluster never signals a process that is not its own (label integration): a pid file
# whose pid now belongs to another process (same pid, another start time) counts as dead for
# `status` and is left alone by `stop`; a pid file of a live process of its own is stopped.
# Usage: cluster_script_test.sh PATH/TO/deploy/local/cluster
set -euo pipefail
cluster="$1"
dir="$(mktemp -d)"
victim=""
cleanup() { [[ -n "$victim" ]] && kill -KILL "$victim" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

start_time() { local s; s="$(cat "/proc/$1/stat")"; s="${s##*) }"; awk '{print $20}' <<<"$s"; }

# A process that is not the cluster's, under a pid file with another start time (a reused pid).
sleep 300 &
victim=$!
echo "$victim 1" >"$dir/worker-1.pid"
status="$("$cluster" status --dir "$dir")"  # captured: under pipefail, cmd | grep -q can fail on SIGPIPE
[[ "$status" == *"worker-1 dead"* ]] || fail "a reused pid reads as running: $status"
"$cluster" stop --dir "$dir" --timeout 2
kill -0 "$victim" 2>/dev/null || fail "stop signalled a process that is not the cluster's"
[[ ! -e "$dir/worker-1.pid" ]] || fail "stop left the stale pid file"

# The same process under a pid file that records it: running, and stopped by SIGTERM.
echo "$victim $(start_time "$victim")" >"$dir/worker-1.pid"
status="$("$cluster" status --dir "$dir")"
[[ "$status" == *"worker-1 running pid $victim"* ]] || fail "own pid reads as dead: $status"
"$cluster" stop --dir "$dir" --timeout 5
wait "$victim" 2>/dev/null || true
kill -0 "$victim" 2>/dev/null && fail "stop left its own process running"
victim=""

# An old-format pid file (the pid alone) is never trusted.
sleep 300 &
victim=$!
echo "$victim" >"$dir/scheduler.pid"
"$cluster" stop --dir "$dir" --timeout 2
kill -0 "$victim" 2>/dev/null || fail "stop signalled the pid of an old-format file"
echo "cluster_script_test: ok"
