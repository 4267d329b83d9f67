#!/usr/bin/env bash
# A queue of device steps that outlives one call (a call may run 10 minutes, a session's device time is 30): `start`
# runs the steps of a file one after the other in a process of its own session, on a copy of the working tree, and
# each `collect` call packs what finished into $OUT. Call `collect` again within the machine's warm time (30 s) or the
# machine, and the queue with it, goes back.
#   device:  OUT=... bash scripts/device_queue.sh start STEPS_FILE [SECONDS]     then collect for up to SECONDS
#   device:  OUT=... bash scripts/device_queue.sh collect SECONDS [final]        final: unfinished steps packed too
# STEPS_FILE: one step a line, `NAME SECONDS COMMAND...` (NAME in letters, digits, '-', '_'); COMMAND runs under bash
# in the copy's root with OUT=<the step's own folder> and a limit of SECONDS. A line `bg NAME SECONDS COMMAND...`
# starts the step and goes on to the next; a line `wait` waits for the steps started so. Blank and # lines are skipped.
# Per step: <NAME>.log (its output), its folder, its exit status and seconds in status.txt. Each collect writes
# <NAME>.tar.gz per step that ended since the last collect (its folder and log; at most 7 a call, the rest the next
# call) and status.txt, and prints the status and the tail of the running steps' logs.
# scripts/device_queue.steps holds the open device work of the issues, in the order to run it.
set -u -o pipefail
Q=${DEVICE_QUEUE_DIR:-/tmp/device_queue}  # (tests: another folder)
MODE=${1:?usage: device_queue.sh start STEPS_FILE [SECONDS] | collect SECONDS [final]}

run_queue() {  # the queue itself (its own session): $1 the steps file, run from $Q/root
  cd "$Q/root" || exit 2
  local pids="" line name limit cmd start rc
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in ''|'#'*) continue ;; esac
    if [ "$line" = wait ]; then wait $pids; pids=""; continue; fi
    local bg=0; [ "${line%% *}" = bg ] && { bg=1; line=${line#bg }; }
    name=${line%% *}; line=${line#* }; limit=${line%% *}; cmd=${line#* }
    mkdir -p "$Q/out/$name"
    (
      start=$(date +%s); echo "$name running since $(date -u +%T)" > "$Q/state/$name"
      OUT="$Q/out/$name" timeout --kill-after=20 "$limit" bash -c "$cmd" > "$Q/out/$name.log" 2>&1
      rc=$?
      echo "$name rc=$rc seconds=$(( $(date +%s) - start ))$([ $rc = 124 ] && echo " (its limit, $limit s)")" \
        | tee "$Q/state/$name" >> "$Q/status.txt"
      touch "$Q/ended/$name"
    ) &
    if [ $bg = 1 ]; then pids="$pids $!"; else wait $!; fi
  done < "$1"
  wait $pids
  echo "queue done $(date -u +%T)" >> "$Q/status.txt"
  touch "$Q/done"
}

collect() {  # $1 seconds to wait for the queue, $2 "final": pack unfinished steps too
  : "${OUT:?OUT must name the results folder}"
  local deadline=$(( $(date +%s) + $1 )) packed=0 name
  while :; do  # each step packed as soon as it ends: a call cut off at its limit still returns those
    for f in "$Q"/ended/*; do
      [ -e "$f" ] || continue
      name=$(basename "$f")
      [ -e "$Q/packed/$name" ] && continue
      [ $packed -ge 7 ] && break
      tar -czf "$OUT/$name.tar.gz" -C "$Q/out" "$name" "$name.log" && touch "$Q/packed/$name" && packed=$((packed + 1))
      cp "$Q/status.txt" "$OUT/status.txt"
    done
    [ -e "$Q/done" ] || [ "$(date +%s)" -ge "$deadline" ] && break
    sleep 5
  done
  if [ "${2:-}" = final ]; then
    for d in "$Q"/out/*/; do
      name=$(basename "$d")
      [ -e "$Q/packed/$name" ] || [ $packed -ge 7 ] && continue
      tar -czf "$OUT/$name.partial.tar.gz" -C "$Q/out" "$name" "$name.log" 2>/dev/null && packed=$((packed + 1))
    done
  fi
  { cat "$Q/status.txt" 2>/dev/null; for s in "$Q"/state/*; do grep -q running "$s" && cat "$s"; done; } \
    | tee "$OUT/status.txt"
  for s in "$Q"/state/*; do
    grep -q running "$s" 2>/dev/null || continue
    name=$(basename "$s"); echo "== $name (running), log tail:"; tail -5 "$Q/out/$name.log"
  done
  [ -e "$Q/done" ] && echo "== queue done" || echo "== queue still running"
}

case "$MODE" in
  start)
    STEPS=${2:?usage: device_queue.sh start STEPS_FILE [SECONDS]}
    [ -e "$Q" ] && { echo "a queue ran here already ($Q): collect it"; exit 2; }
    mkdir -p "$Q/out" "$Q/state" "$Q/ended" "$Q/packed"
    cp -a . "$Q/root" && cp "$STEPS" "$Q/steps" || exit 2
    echo "queue started $(date -u +%T), commit ${COMMIT:-?}, steps: $(grep -cv '^\s*\(#\|$\)' "$Q/steps")" > "$Q/status.txt"
    setsid nohup bash "$Q/root/scripts/device_queue.sh" _run "$Q/steps" > "$Q/queue.log" 2>&1 < /dev/null &
    collect "${3:-560}" ;;
  _run) run_queue "$2" ;;
  collect) collect "${2:?seconds}" "${3:-}" ;;
  *) echo "usage: device_queue.sh start STEPS_FILE [SECONDS] | collect SECONDS [final]"; exit 2 ;;
esac
