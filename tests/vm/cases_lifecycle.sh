# Lifecycle cases: load/unload, bad input, a second instance, kill -9, the scx CI stress load.

t_load() {
  dmesg_mark
  local seq0 ops faults
  seq0=$(enable_seq)
  start_sched load --stats 1 || { fail load "not enabled within 90 s: $(head -c 300 "$LOGS/load.err")"; return; }
  ops=$(cat "$SYS/root/ops")
  sleep 3
  stop_sched INT
  faults=$(kernel_faults)
  if [[ $ops != scx_gmp* ]]; then fail load "root/ops is '$ops'"
  elif [ "$SCHED_RC" -ne 0 ]; then fail load "exit status $SCHED_RC after SIGINT"
  elif [ "$(state)" != disabled ]; then fail load "state '$(state)' after exit"
  elif [ $(($(enable_seq) - seq0)) -ne 1 ]; then fail load "enable_seq moved by $(($(enable_seq) - seq0))"
  elif ! grep -q '^SCHED [0-9]*ms: procs=' "$LOGS/load.out"; then fail load "no schedtrace line in --stats output"
  elif ! dmesg_new | grep -q 'disabled (unregistered from user space)'; then fail load "kernel did not log a clean unregister"
  elif [ -n "$faults" ]; then fail load "kernel log: $faults"
  else pass load "root/ops=$ops, SIGINT -> exit 0, state disabled, enable_seq +1"
  fi
}

# bad_input_case NAME EXPECTED_RC PATTERN CMD...: one stderr line matching PATTERN, exit code,
# nothing loaded.
bad_input_case() {
  local name=$1 want=$2 pat=$3; shift 3
  local seq0 rc lines
  seq0=$(enable_seq)
  "$@" > "$LOGS/bad-$name.out" 2> "$LOGS/bad-$name.err"; rc=$?
  lines=$(grep -c . "$LOGS/bad-$name.err")
  if [ "$rc" -ne "$want" ]; then echo "$name: exit $rc, want $want"
  elif [ "$lines" -ne 1 ]; then echo "$name: $lines stderr lines, want 1"
  elif ! grep -qE -e "$pat" "$LOGS/bad-$name.err"; then echo "$name: stderr '$(cat "$LOGS/bad-$name.err")' lacks /$pat/"
  elif [ "$(state)" != disabled ] || [ "$(enable_seq)" != "$seq0" ]; then echo "$name: something was loaded"
  fi
}

t_bad_input() {
  local errs="" e
  cp "$SCX" /tmp/scx_gmp_unpriv && chmod 755 /tmp/scx_gmp_unpriv
  e=$(bad_input_case flag 2 'unexpected argument .--bogus' "$SCX" --bogus); errs+="$e"
  e=$(bad_input_case slice0 2 '--slice-us' "$SCX" --slice-us 0); errs+="$e"
  e=$(bad_input_case stats 2 '--stats' "$SCX" --stats abc); errs+="$e"
  e=$(bad_input_case cap0 2 '--local-cap' "$SCX" --local-cap 0); errs+="$e"
  e=$(bad_input_case kconfig 1 '^scx_gmp: error: --kconfig /nonexistent: cannot read it' "$SCX" --kconfig /nonexistent); errs+="$e"
  e=$(bad_input_case pinroot 1 '^scx_gmp: error: --pin-root-path /proc/self/status: not a directory' "$SCX" --pin-root-path /proc/self/status); errs+="$e"
  e=$(bad_input_case notroot 1 'must run as root' \
      setpriv --reuid=65534 --regid=65534 --clear-groups /tmp/scx_gmp_unpriv); errs+="$e"
  if [ -n "$errs" ]; then fail bad_input "$errs"
  else pass bad_input "--bogus, --slice-us 0, --stats abc, --local-cap 0 -> exit 2; unreadable --kconfig, a file as --pin-root-path, not root -> exit 1; one line each, nothing loaded"
  fi
}

# libbpf's options, flattened into the flags: a load with a Kconfig file given explicitly (the
# kernel's own) and relaxed map parsing still loads and unloads cleanly.
t_libbpf_opts() {
  local kcfg=/boot/config-$(uname -r)
  [ -r "$kcfg" ] || { skip libbpf_opts "no $kcfg to pass as --kconfig"; return; }
  start_sched libbpf_opts --kconfig "$kcfg" --relaxed-maps true --bpf-token-path "" ||
    { fail libbpf_opts "not enabled: $(head -c 300 "$LOGS/libbpf_opts.err")"; stop_sched INT; return; }
  sleep 2
  stop_sched INT
  if [ "$SCHED_RC" -ne 0 ]; then fail libbpf_opts "exit $SCHED_RC after SIGINT"
  else pass libbpf_opts "--kconfig $kcfg --relaxed-maps true --bpf-token-path '': loaded, exit 0"
  fi
}

t_second_instance() {
  local seq0 rc2
  start_sched second-a || { fail second_instance "first instance did not load"; return; }
  seq0=$(enable_seq)
  "$SCX" > "$LOGS/second-b.out" 2> "$LOGS/second-b.err"; rc2=$?
  local msg; msg=$(cat "$LOGS/second-b.err")
  local alive=yes; kill -0 "$SCHED_PID" 2>/dev/null || alive=no
  local st; st=$(state)
  stop_sched INT
  if [ "$rc2" -eq 0 ]; then fail second_instance "second instance exited 0"
  elif ! grep -q 'already loaded: scx_gmp' <<< "$msg"; then fail second_instance "message does not name scx_gmp: $msg"
  elif [ "$(grep -c . <<< "$msg")" -ne 1 ]; then fail second_instance "more than one line: $msg"
  elif [ "$alive" != yes ] || [ "$st" != enabled ] || [ "$(enable_seq)" != "$seq0" ]; then
    fail second_instance "first instance disturbed (alive=$alive state=$st)"
  elif [ "$SCHED_RC" -ne 0 ]; then fail second_instance "first instance exit $SCHED_RC"
  else pass second_instance "refused (exit $rc2): $msg"
  fi
}

t_kill9() {
  dmesg_mark
  start_sched kill9 || { fail kill9 "did not load"; return; }
  stress-ng --temp-path /tmp -c $((2 * NCPU)) -t 25 > "$LOGS/kill9-stress.log" 2>&1 &
  local spid=$! ms srunning src
  sleep 4
  # Both builtins, so the mark is logged right before the signal; the kernel's timestamps then
  # time the fall back itself, not this shell's polling under 2N hogs.
  echo "scx_gmp test: kill -9 the loader" > /dev/kmsg
  kill -9 "$SCHED_PID"
  wait_state disabled 10
  ms=$(kmsg_ms 'scx_gmp test: kill -9 the loader' 'disabled (unregistered from user space)')
  wait "$SCHED_PID" 2>/dev/null
  srunning=no; kill -0 "$spid" 2>/dev/null && srunning=yes
  wait "$spid"; src=$?
  if [ "$(state)" != disabled ]; then fail kill9 "state '$(state)' after kill -9"
  elif [ "$ms" -lt 0 ]; then fail kill9 "no kill/unregister pair in the kernel log"
  elif [ "$ms" -gt 1000 ]; then fail kill9 "fell back to disabled $ms ms after the signal (limit 1000)"
  elif [ "$srunning" != yes ] || [ "$src" -ne 0 ]; then fail kill9 "workload disturbed (running=$srunning exit=$src)"
  else pass kill9 "kernel back to disabled $ms ms after kill -9; workload finished (exit 0)"
  fi
}

t_ci_stress() {
  dmesg_mark
  local seq0 rc src faults
  seq0=$(enable_seq)
  timeout --preserve-status -s TERM 45 "$SCX" --stats 5 --json > "$LOGS/ci.out" 2> "$LOGS/ci.err" &
  SCHED_PID=$!
  wait_state enabled 90 || { fail ci_stress "did not load"; kill -INT "$SCHED_PID"; wait "$SCHED_PID"; return; }
  stress-ng --temp-path /tmp -t 31 --aggressive -M -c "$NCPU" -f "$NCPU" \
    --affinity 1 --affinity-delay 1 --affinity-pin > "$LOGS/ci-stress.log" 2>&1; src=$?
  wait "$SCHED_PID"; rc=$?
  wait_state disabled 10
  faults=$(kernel_faults)
  if [ "$rc" -ne 0 ]; then fail ci_stress "exit status $rc after SIGTERM; $(tail -3 "$LOGS/ci.err")"
  elif [ "$(state)" != disabled ]; then fail ci_stress "state '$(state)'"
  elif ! dmesg_new | grep -q 'disabled (unregistered from user space)'; then
    fail ci_stress "not a clean unregister: $(dmesg_new | grep sched_ext | tail -2)"
  elif [ -n "$faults" ]; then fail ci_stress "kernel log: $faults"
  elif [ "$src" -ne 0 ]; then fail ci_stress "stress-ng exit $src"
  else pass ci_stress "31 s scx CI stress load, SIGTERM at 45 s -> exit 0, clean unregister, no kernel faults"
  fi
}
