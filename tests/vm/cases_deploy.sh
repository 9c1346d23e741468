# Deployment cases: scx_gmp started the way the service managers start it. The guest has no
# systemd as PID 1, so tests/vm/unit_exec.py expands a unit's ExecStart= with its
# EnvironmentFile= as systemd does, and the case runs that command line with that
# environment, then stops it with the unit's KillSignal.

# The stock scx.service of the scx project, as distributions ship it: it runs
# $SCX_SCHEDULER with $SCX_FLAGS from /etc/default/scx through bash, on systemd's PATH,
# and stops it with systemd's default SIGTERM.
stock_scx_unit() {
  cat <<'EOF'
[Unit]
Description=Start scx_scheduler
ConditionPathIsDirectory=/sys/kernel/sched_ext

[Service]
Type=simple
EnvironmentFile=/etc/default/scx
ExecStart=/bin/bash -c 'exec $SCX_SCHEDULER $SCX_FLAGS '
Restart=on-failure
EOF
}

# unit_run NAME UNIT ENVFILE SIGNAL: run the unit's expanded command line (PATH: a folder
# holding scx_gmp, then systemd's default PATH) for 4 s under its environment, then stop it
# with SIGNAL. Sets SCHED_RC and UNIT_OPS (root/ops while it ran); output in $LOGS/NAME.*.
unit_run() {
  local name=$1 unit=$2 envfile=$3 sig=$4 bin=$RES/unit-bin expanded
  mkdir -p "$bin"; ln -sf "$SCX" "$bin/scx_gmp"
  expanded=$(python3 "$REPO/tests/vm/unit_exec.py" "$unit" "$envfile") || { UNIT_OPS="expansion failed"; SCHED_RC=99; return; }
  local -a envs=() argv=()
  local in_argv=0 line
  while IFS= read -r line; do
    if [ "$line" = "--" ]; then in_argv=1; continue; fi
    if [ "$in_argv" = 1 ]; then argv+=("$line"); else envs+=("$line"); fi
  done <<< "$expanded"
  # Our unit names the installed binary: run the one under test in its place.
  [ "${argv[0]}" = /usr/local/bin/scx_gmp ] && argv[0]=$bin/scx_gmp
  echo "${argv[*]}" > "$LOGS/$name.argv"
  env -i PATH="$bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin" "${envs[@]}" "${argv[@]}" \
    > "$LOGS/$name.out" 2> "$LOGS/$name.err" &
  SCHED_PID=$!
  UNIT_OPS="not enabled"
  if wait_state enabled 90; then sleep 4; UNIT_OPS=$(cat "$SYS/root/ops" 2>/dev/null); fi
  stop_sched "$sig"
}

# The stock scx.service route: /etc/default/scx names scx_gmp and its flags.
t_unit_stock() {
  local envf=$RES/default-scx unit=$RES/scx.service
  stock_scx_unit > "$unit"
  printf '%s\n' '# as a user writes it' 'SCX_SCHEDULER=scx_gmp' "SCX_FLAGS='--slice-us 5000 --stats 1'" > "$envf"
  unit_run unit_stock "$unit" "$envf" TERM
  if [[ $UNIT_OPS != scx_gmp* ]]; then fail unit_stock "root/ops '$UNIT_OPS' while running $(cat "$LOGS/unit_stock.argv"): $(head -c 300 "$LOGS/unit_stock.err")"
  elif [ "$SCHED_RC" -ne 0 ]; then fail unit_stock "exit $SCHED_RC after SIGTERM"
  elif ! grep -q 'slice 5000 us' "$LOGS/unit_stock.err"; then fail unit_stock "SCX_FLAGS not applied: $(head -c 300 "$LOGS/unit_stock.err")"
  elif ! grep -q '^SCHED [0-9]*ms: procs=' "$LOGS/unit_stock.out"; then fail unit_stock "no stats lines (--stats 1 from SCX_FLAGS)"
  elif grep -q 'attaching without SCHED_FIFO' "$LOGS/unit_stock.err"; then fail unit_stock "SCHED_FIFO refused as root: $(grep SCHED_FIFO "$LOGS/unit_stock.err")"
  else pass unit_stock "$(cat "$LOGS/unit_stock.argv") with SCX_FLAGS from the default file: loaded as $UNIT_OPS, slice 5000 us, SIGTERM -> exit 0"
  fi
}

# Our own unit with its default file, flags set the way its comment says.
t_unit_own() {
  local envf=$RES/default-scx_gmp
  sed 's/^SCX_GMP_FLAGS=.*/SCX_GMP_FLAGS="--fair-tick 31 --stats 1"/' "$REPO/deploy/scx_gmp.default" > "$envf"
  unit_run unit_own "$REPO/deploy/scx_gmp.service" "$envf" "$(awk -F= '/^KillSignal=/ {sub(/^SIG/, "", $2); print $2}' "$REPO/deploy/scx_gmp.service")"
  if [[ $UNIT_OPS != scx_gmp* ]]; then fail unit_own "root/ops '$UNIT_OPS' while running $(cat "$LOGS/unit_own.argv"): $(head -c 300 "$LOGS/unit_own.err")"
  elif [ "$SCHED_RC" -ne 0 ]; then fail unit_own "exit $SCHED_RC after the unit's KillSignal"
  elif ! grep -q 'fair tick 31' "$LOGS/unit_own.err"; then fail unit_own "SCX_GMP_FLAGS not applied: $(head -c 300 "$LOGS/unit_own.err")"
  else pass unit_own "$(cat "$LOGS/unit_own.argv"): loaded, fair tick 31, clean stop"
  fi
}

# A unit that forbids real-time scheduling (RestrictRealtime=, as scx_loader's sets): the
# kernel refuses SCHED_FIFO with EPERM, as it does for a root process without CAP_SYS_NICE.
# The attach must still work, with one line saying why it went without SCHED_FIFO.
t_unit_no_realtime() {
  local n
  setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice "$SCX" --stats 1 \
    > "$LOGS/unit_no_rt.out" 2> "$LOGS/unit_no_rt.err" &
  SCHED_PID=$!
  wait_state enabled 90 ||
    { fail unit_no_realtime "not enabled: $(head -c 300 "$LOGS/unit_no_rt.err")"; stop_sched INT; return; }
  sleep 3
  stop_sched INT
  n=$(grep -c 'attaching without SCHED_FIFO' "$LOGS/unit_no_rt.err")
  if [ "$SCHED_RC" -ne 0 ]; then fail unit_no_realtime "exit $SCHED_RC after SIGINT"
  elif [ "$n" -ne 1 ]; then fail unit_no_realtime "$n lines about SCHED_FIFO (want 1): $(head -c 300 "$LOGS/unit_no_rt.err")"
  elif ! grep -q 'RestrictRealtime=' "$LOGS/unit_no_rt.err"; then fail unit_no_realtime "the line does not say why: $(grep SCHED_FIFO "$LOGS/unit_no_rt.err")"
  else pass unit_no_realtime "without CAP_SYS_NICE: loaded, one line: $(grep -o 'attaching without SCHED_FIFO: [^(]*' "$LOGS/unit_no_rt.err")"
  fi
}
