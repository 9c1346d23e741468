# Watching cases: --monitor (schedtrace, JSON, detail) against a running scx_gmp, --help-stats,
# and the live view driven in tmux.

t_monitor() {
  start_sched monitor || { fail monitor "did not load"; return; }
  stress-ng --temp-path /tmp -q -c $((NCPU + 1)) -t 12 &
  local spid=$!
  timeout -s INT 6 "$SCX" --monitor 1 > "$LOGS/monitor-line.out" 2> "$LOGS/monitor-line.err"
  timeout -s INT 5 "$SCX" --monitor 1 --json > "$LOGS/monitor-json.out" 2>&1
  timeout -s INT 5 "$SCX" --monitor 1 --stats-detail > "$LOGS/monitor-detail.out" 2>&1
  wait "$spid"
  local alive=yes; kill -0 "$SCHED_PID" 2>/dev/null || alive=no
  stop_sched INT
  local lines json_ok detail_ok
  lines=$(grep -c '^SCHED [0-9]*ms: procs=' "$LOGS/monitor-line.out")
  json_ok=$(python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
need = ["ts_ms", "procs", "idle_procs", "shared_queued", "local_queued", "dispatch", "stolen_tasks",
        "enqueue", "preempt", "kicks", "numa", "latency_us"]
ok = rows and all(all(k in r for k in need) for r in rows) and all(len(r["local_queued"]) == r["procs"] for r in rows)
print("yes" if ok else "no")' "$LOGS/monitor-json.out")
  detail_ok=no
  grep -q '^  node0: cpus=' "$LOGS/monitor-detail.out" && grep -q '^  P0: node=0' "$LOGS/monitor-detail.out" && detail_ok=yes
  if [ "$alive" != yes ]; then fail monitor "the scheduler died while monitored"
  elif [ "$lines" -lt 3 ]; then fail monitor "only $lines schedtrace lines from --monitor 1 in 6 s: $(head -c 300 "$LOGS/monitor-line.err")"
  elif [ "$json_ok" != yes ]; then fail monitor "JSON lines lack fields: $(head -c 300 "$LOGS/monitor-json.out")"
  elif [ "$detail_ok" != yes ]; then fail monitor "--stats-detail lacks node/CPU lines: $(head -c 300 "$LOGS/monitor-detail.out")"
  elif [ "$SCHED_RC" -ne 0 ]; then fail monitor "scheduler exit $SCHED_RC"
  else pass monitor "$lines schedtrace lines, JSON with every field, detail lines; sample: $(grep -m2 '^SCHED' "$LOGS/monitor-line.out" | tail -1)"
  fi
}

# --help-stats is generated from the stats types: every key of the JSON lines a live scx_gmp
# printed (the monitor case's, or a short run's own) must be described there, at its path.
t_help_stats() {
  local out rc json=$LOGS/monitor-json.out missing
  out=$("$SCX" --help-stats); rc=$?
  printf '%s\n' "$out" > "$LOGS/help-stats.txt"
  if [ ! -s "$json" ]; then
    start_sched help_stats --stats 1 --json || { fail help_stats "did not load"; return; }
    sleep 3; stop_sched INT; json=$LOGS/help_stats.out
  fi
  missing=$(python3 - "$json" "$LOGS/help-stats.txt" <<'PY'
import json, sys
paths = set()
def walk(v, p, element=False):
    if isinstance(v, dict):
        for k, x in v.items():
            walk(x, f"{p}.{k}" if p else k)
        if p and not element:
            paths.add(p)
    elif isinstance(v, list):
        paths.add(p)
        for x in v:
            if isinstance(x, dict):
                walk(x, p + "[]", True)
    else:
        paths.add(p)
for line in open(sys.argv[1]):
    if line.startswith("{"):
        walk(json.loads(line), "")
described = {l.split()[0] for l in open(sys.argv[2]) if l.startswith("  ") and l.split()}
print(" ".join(sorted(paths - described)), "|", len(paths))
PY
)
  if [ "$rc" -ne 0 ]; then fail help_stats "exit $rc"
  elif [ -n "${missing%% |*}" ]; then fail help_stats "JSON keys not in --help-stats: ${missing%% |*}"
  else pass help_stats "every one of the ${missing##*| } keys of the live JSON is described; $(grep -c . <<< "$out") lines"
  fi
}

t_top() {
  command -v tmux > /dev/null || { fail top "tmux is not installed"; return; }
  start_sched top || { fail top "did not load"; return; }
  stress-ng --temp-path /tmp -q -c $((NCPU + 2)) -t 20 &
  local spid=$!
  tmux kill-server 2>/dev/null
  tmux new-session -d -s gmptop -x 150 -y 48 "$SCX top"
  sleep 6
  tmux capture-pane -p -t gmptop > "$LOGS/top-screen1.txt"
  tmux resize-window -t gmptop -x 110 -y 40 2>/dev/null
  sleep 3
  tmux capture-pane -p -t gmptop > "$LOGS/top-screen2.txt"
  tmux send-keys -t gmptop q
  sleep 2
  local still=no; tmux has-session -t gmptop 2>/dev/null && still=yes
  tmux kill-server 2>/dev/null
  # Not a terminal: plain lines.
  timeout -s INT 4 "$SCX" top > "$LOGS/top-pipe.out" 2>&1
  wait "$spid"
  stop_sched INT
  local miss=""
  for w in "scx_gmp top" "P0" "P$((NCPU - 1))" "node1" "dispatch mix" "wakeup-to-run latency" "SCHED "; do
    grep -qF "$w" "$LOGS/top-screen1.txt" || miss+=" '$w'"
  done
  # Width in characters (the frame is drawn with multi-byte box characters).
  local w2; w2=$(python3 -c 'import sys; print(max(len(l.rstrip("\n")) for l in open(sys.argv[1], encoding="utf-8")))' "$LOGS/top-screen2.txt")
  if [ -n "$miss" ]; then fail top "screen lacks$miss"
  elif [ "$still" = yes ]; then fail top "q did not quit"
  elif [ "$w2" -gt 110 ]; then fail top "did not follow the resize (width $w2)"
  elif ! grep -q '^SCHED ' "$LOGS/top-pipe.out"; then fail top "no plain-line fallback when stdout is not a terminal"
  elif [ "$SCHED_RC" -ne 0 ]; then fail top "scheduler exit $SCHED_RC"
  else pass top "live view showed CPUs, shared queues, dispatch mix, latency heat map; resized; q quit; plain lines on a pipe"
  fi
}
