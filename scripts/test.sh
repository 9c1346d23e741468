#!/usr/bin/env bash
# The test command: installs what it needs, builds, runs the unit tests, then boots one VM with
# a sched_ext kernel and runs the VM suite (tests/vm/) against the real scheduler there.
# Ends with "N passed, N failed"; exits non-zero on any failure.
#
#   scripts/test.sh [--full] [--kernel VER]... [--layout NAME]... [--cpus N --nodes M]
#                   [--cases "load steal ..."] [--budget SECONDS] [--no-setup]
#
# The fast tier (default) runs within a time budget (--budget, 80 minutes from the start,
# setup and build included): a case whose usual cost no longer fits is skipped and reported,
# so a slow host still ends with a verdict for every case. --full runs every fault at full
# duration and count, without a budget unless one is given. --kernel may be given several
# times (full tier: default 6.18, 6.16, 6.17 and 7.3).
# Layouts (scripts/vm.sh): the whole suite runs on 2n (4 CPUs in 2 nodes); the fast tier then
# runs the core cases once more on smt, the full tier on smt, llc, one, wide and offline.
# --layout (repeatable) runs the given cases, or all, on just those layouts.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

KERNELS=(); TIER=fast; LAYOUTS=()
CPUS=""; NODES=""; CASES=""; SETUP=1; BUDGET=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) KERNELS+=("$2"); shift 2 ;;
    --full) TIER=full; shift ;;
    --layout) LAYOUTS+=("$2"); shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --cases) CASES=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --no-setup) SETUP=0; shift ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done

if [ ${#KERNELS[@]} -eq 0 ]; then
  KERNELS=("${GMP_KERNEL:-6.18.15+deb13-amd64}")
  [ "$TIER" = full ] && KERNELS+=(6.16.12+deb13-amd64 6.17.13+deb13-amd64 7.3.4+deb13-amd64)
fi
KVER=${KERNELS[0]}

# The cases that depend on the machine's shape (placement, stealing, the procs, NUMA, weights,
# hotplug, the wait bound), run again on every other layout.
CORE_CASES="load ci_stress steal procs_auto procs_hold cpuset_outside cpuset_shrink numa_home_grow fork_spread numa_locality numa_level nice cgroup_weight cgroup_long_queue flag_extremes f3_hotplug"
# flag_extremes, five loads of 12 s each, took 630 s on smt: the full tier runs it there.
FAST_CORE_CASES="load steal procs_auto procs_hold cpuset_outside nice cgroup_long_queue"
# RUNS: "KERNEL LAYOUT CASES" per VM boot; CASES is a comma-joined list, or "all".
RUNS=()
if [ -n "$CPUS$NODES" ]; then
  LAYOUTS=("custom:${CPUS:-4}:${NODES:-2}")
fi
cases_arg=${CASES:-all}; cases_arg=${cases_arg// /,}
if [ ${#LAYOUTS[@]} -gt 0 ]; then
  for k in "${KERNELS[@]}"; do for l in "${LAYOUTS[@]}"; do RUNS+=("$k $l $cases_arg"); done; done
else
  for k in "${KERNELS[@]}"; do RUNS+=("$k 2n $cases_arg"); done
  if [ -z "$CASES" ]; then
    if [ "$TIER" = full ]; then
      for l in smt llc one wide offline; do RUNS+=("$KVER $l ${CORE_CASES// /,}"); done
    else
      RUNS+=("$KVER smt ${FAST_CORE_CASES// /,}")
    fi
  fi
fi
# CI gives the whole run 90 minutes; 80 leave room for a VM that must be stopped and for
# the summary.
[ -n "$BUDGET" ] || { [ "$TIER" = fast ] && BUDGET=4800 || BUDGET=0; }
[[ $BUDGET =~ ^[0-9]+$ ]] || { echo "test.sh: --budget wants whole seconds, got '$BUDGET'" >&2; exit 2; }
# What a boot needs beyond its cases (booting, the console, shutting down), and what each
# later layout keeps of the budget so that one slow layout does not take all of it.
BOOT_OVERHEAD_S=120; LATER_RUN_S=600
# Room for at least one short case besides the boot: with less left, a layout is not booted.
MIN_CASE_S=120
# A case that runs this long has hung (the slowest fast-tier case, f3_hotplug, took 420 s on a
# slow host), and so has a boot (1-3 min under emulation): the guest is stopped and booted
# again.
CASE_HANG_S=900; [ "$TIER" = full ] && CASE_HANG_S=2400
PASSED=0; FAILED=0; SKIPPED=0; SUMMARY=(); KSUMMARY=()
record() { # record PASS|FAIL|SKIP name detail
  case "$1" in
    PASS) PASSED=$((PASSED + 1)) ;;
    SKIP) SKIPPED=$((SKIPPED + 1)) ;;
    *) FAILED=$((FAILED + 1)) ;;
  esac
  SUMMARY+=("$1 $2: $3")
}
t_start=$(date +%s)

# One test run at a time on a machine: two runs share nothing sensible (the VMs compete for the
# same cores, and a stray run's hang watcher can stop the other's guest), so refuse a second.
exec 9> /run/lock/scx_gmp-test.lock
if ! flock -n 9; then
  echo "test.sh: another scx_gmp test run holds /run/lock/scx_gmp-test.lock; wait for it or stop it" >&2
  echo "0 passed, 1 failed"; exit 1
fi

if [ "$SETUP" = 1 ]; then
  for k in "${KERNELS[@]}"; do
    scripts/setup.sh --kernel "$k" || { echo "test.sh: setup failed" >&2; echo "0 passed, 1 failed"; exit 1; }
  done
fi
# shellcheck disable=SC1091
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

echo "== build"
if ! cargo build --release 2>&1 | tail -3; then :; fi
if [ ! -x target/release/scx_gmp ] || [ -n "$(find src bpf build.rs Cargo.toml -newer target/release/scx_gmp 2>/dev/null | head -1)" ]; then
  echo "test.sh: build failed" >&2; echo "0 passed, 1 failed"; exit 1
fi

echo "== unit tests"
unit_log=$(mktemp)
cargo test --release 2>&1 | tee "$unit_log" | grep -E '^test |test result' || true
u_pass=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($(i) ~ /^passed/) s += $(i - 1) } END { print s + 0 }' "$unit_log")
u_fail=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($(i) ~ /^failed/) s += $(i - 1) } END { print s + 0 }' "$unit_log")
if ! grep -q '^test result:' "$unit_log"; then u_fail=$((u_fail + 1)); fi
PASSED=$((PASSED + u_pass)); FAILED=$((FAILED + u_fail))
SUMMARY+=("unit: $u_pass passed, $u_fail failed")

# The benchmark's trace summary (tests/bench/trace_stats.py) on hand-made traces, its
# report's best peer, per-host-CPU rows and NUMA note (report.py), and which of the scale
# report's targets it judges on which load (scale_report.py).
for t in trace_stats report scale_report; do
  if out=$(python3 "tests/bench/test_$t.py" 2>&1); then
    record PASS "bench_$t" "$(grep -m1 '^Ran ' <<< "$out")"
  else
    record FAIL "bench_$t" "$(grep -m1 -E '^(FAIL|ERROR):' <<< "$out")"
  fi
done

# On a host without sched_ext, the loader must refuse with one line naming the config option.
if [ ! -e /sys/kernel/sched_ext ]; then
  out=$(target/release/scx_gmp 2>&1); rc=$?
  if [ "$rc" -eq 1 ] && [ "$(grep -c . <<< "$out")" -eq 1 ] && grep -q CONFIG_SCHED_CLASS_EXT <<< "$out"; then
    record PASS host_no_sched_ext "exit 1: $out"
  else
    record FAIL host_no_sched_ext "exit $rc: $out"
  fi
fi

# Seconds of the budget left for the run at index $1 of RUNS: what remains, less what each
# later run keeps. Empty without a budget.
run_budget() {
  [ "$BUDGET" -gt 0 ] || return 0
  echo $((t_start + BUDGET - $(date +%s) - (${#RUNS[@]} - 1 - $1) * LATER_RUN_S))
}

# Whether budget left $1 (from run_budget; empty: no budget) is too little to boot for.
too_little() { [ -n "$1" ] && [ "$1" -lt $((BOOT_OVERHEAD_S + MIN_CASE_S)) ]; }

# Stop the VM of results dir $1: qemu, vng and vm.sh all carry it on their command lines;
# pkill takes a regex, and kernel names hold '+' and '.'.
stop_vm() { pkill -f -- "$(printf '%s' "$1" | sed 's/[][\.*^$+?(){}|]/\\&/g')"; }

# Wait for the VM job $1 of results dir $2; stop it on a hung task report, or once the boot
# or one case has run past CASE_HANG_S (the reason goes to $2/stopped). A boot counts as a
# case until the guest starts its first: a guest that hangs while booting (RCU stalls, a timer
# that never fires on a vCPU) reports nothing, and would otherwise hold CI to vm.sh's timeout.
watch_vm() {
  local pid=$1 res=$2 case_now="" case_since now cur what
  rm -f "$res/stopped"
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    # A guest whose tasks hang (the kernel's hung-task report, 120 s) does not finish.
    if grep -q 'blocked for more than' "$res/console.log"; then
      sleep 60; stop_vm "$res"; break
    fi
    now=$(date +%s); cur=$(tail -n 1 "$res/started" 2>/dev/null); cur=${cur:-(booting)}
    if [ "$cur" != "$case_now" ]; then
      case_now=$cur; case_since=$now
    elif [ $((now - case_since)) -gt "$CASE_HANG_S" ]; then
      what="case ${case_now%% *}"; [ "$case_now" = "(booting)" ] && what="the boot"
      echo "$what ran past $CASE_HANG_S s" > "$res/stopped"; stop_vm "$res"; break
    fi
  done
  wait "$pid"
}

for i in "${!RUNS[@]}"; do
  read -r KVER LAYOUT RCASES <<< "${RUNS[$i]}"
  if [[ $LAYOUT == custom:* ]]; then
    IFS=: read -r _ c n <<< "$LAYOUT"; SHAPE=(--cpus "$c" --nodes "$n"); LAYOUT="${c}cpu-${n}n"
  else
    SHAPE=(--layout "$LAYOUT")
  fi
  RCASES=${RCASES//,/ }; [ "$RCASES" = all ] && RCASES=""
  # Verdicts name the layout unless it is the default one.
  TAG=$KVER; [ "$LAYOUT" = 2n ] || TAG="$KVER/$LAYOUT"
  echo "== VM suite, $TIER tier (kernel $KVER, layout $LAYOUT: ${SHAPE[*]})"
  RES=$REPO/target/vm-results/$KVER; [ "$LAYOUT" = 2n ] || RES=$REPO/target/vm-results/$KVER-$LAYOUT
  rm -rf "$RES"; mkdir -p "$RES"
  k_pass=0; k_fail=0; k_skip=0; k_failed_names=""; k_skipped_names=""
  # The guest's console (kernel log included) goes to a file, to diagnose a hang or oops.
  left=$(run_budget "$i")
  if too_little "$left"; then
    record SKIP "[$TAG] vm_suite" "not booted: ${left} s of the run's $BUDGET s budget left"
    KSUMMARY+=("$(printf '%-28s %6s %6s %6s %7s  %s' "$TAG" 0 0 0 all "not booted: the time budget was spent")")
    continue
  fi
  # A guest that crashes or hangs mid-suite is booted again and the suite resumes after the case
  # that took it down (tests/vm/suite.sh skips finished cases), so one crash does not hide the
  # rest. That case counts as failed, except one known emulator fault (below), retried once.
  boot=1; retried=""; boot_retried=""; spent=""
  while :; do
    # The boot's share of the budget, as the guest's uptime by which its cases must end
    # (tests/vm/suite.sh); the boot itself is stopped a case's hang time past it.
    left=$(run_budget "$i")
    if [ "$boot" -gt 1 ] && too_little "$left"; then spent=1; break; fi
    if [ -n "$left" ]; then
      echo $((left - BOOT_OVERHEAD_S)) > "$RES/budget"; limit=$((left + CASE_HANG_S))
    else
      rm -f "$RES/budget"; limit=86400
    fi
    # shellcheck disable=SC2086
    timeout "$limit" scripts/vm.sh --verbose --kernel "$KVER" "${SHAPE[@]}" --memory 3072 \
      --results "$RES" -- "$REPO/tests/vm/suite.sh" "$REPO" "$RES" "$TIER" $RCASES > "$RES/console.log" 2>&1 &
    watch_vm $! "$RES"; vm_rc=$?
    [ -f "$RES/complete" ] && break
    crashed=""; nlines=0
    [ -f "$RES/started" ] && read -r crashed nlines < <(tail -n 1 "$RES/started")
    # A guest that hung while booting (seen once under emulation: RCU stalls, a timer that did
    # not fire on a vCPU, before any case started) never ran the scheduler: boot again, once.
    if [ ! -f "$RES/started" ] && [ -z "$boot_retried" ]; then
      boot_retried=1
      cp "$RES/console.log" "$RES/console-boot$boot.log"
      stall=$(grep -m1 -E 'rcu: .*(stall|starved|didn.t happen)|blocked for more than|Kernel panic' "$RES/console.log" | sed 's/^\[[^]]*\] *//' | cut -c1-100)
      SUMMARY+=("RETRY [$TAG] boot: the guest never reached the suite (vm.sh exit $vm_rc: ${stall:-no stall logged}; console-boot$boot.log); booted again")
      boot=$((boot + 1))
      continue
    fi
    # Never reached the suite, or went down between cases: nothing to resume after.
    [ -n "$crashed" ] && ! grep -qx "$crashed" "$RES/finished" || break
    cp "$RES/console.log" "$RES/console-crash$boot.log"
    # Drop what the interrupted case had recorded; its verdict is decided here.
    head -n "$nlines" "$RES/results.txt" > "$RES/results.tmp"; mv "$RES/results.tmp" "$RES/results.txt"
    oops=$(grep -m1 -E 'Oops:|BUG:|Kernel panic|soft lockup|INFO: task .* blocked' "$RES/console.log" | sed 's/^\[[^]]*\] *//' | cut -c1-120)
    echo "--- guest went down in $crashed (vm.sh exit $vm_rc): ${oops:-no oops in the console}; last lines:"
    tail -n 12 "$RES/console.log"
    # Under qemu's software emulation (no KVM here), a vCPU can execute an int3 that the kernel's
    # text poking (static keys flipped by scx_enable/scx_disable) already removed: "Oops: int3"
    # at a static-branch site of core kernel text (seen in sched_tick, __schedule, scx_tick,
    # update_rq_clock), on enable, disable and hotplug restarts. Not a scheduler fault. An int3
    # inside a BPF program (the JIT pads with int3) would be ours: that is not retried.
    rip=$(grep -A4 -m1 'Oops: int3' "$RES/console.log" | grep -m1 'RIP: 0010:' | sed 's/.*RIP: 0010://')
    if [ "$(cat "$RES/emulated" 2>/dev/null)" = 1 ] && [ -n "$rip" ] && [[ $rip != bpf_prog* ]] &&
       [[ " $retried " != *" $crashed "* ]]; then
      retried+=" $crashed"
      SUMMARY+=("RETRY [$TAG] $crashed: guest oopsed on the emulator's int3/text-poke fault at $rip (console-crash$boot.log); run again in a fresh boot")
    else
      why=${oops:-no oops logged, vm.sh exit $vm_rc}
      [ "$vm_rc" = 124 ] && [ -z "$oops" ] && why="the boot reached its time limit ($limit s)"
      [ -f "$RES/stopped" ] && [ -z "$oops" ] && why="stopped: $(cat "$RES/stopped")"
      echo "FAIL $crashed: the guest went down during the case: $why (console-crash$boot.log)" >> "$RES/results.txt"
      echo "$crashed" >> "$RES/finished"
    fi
    boot=$((boot + 1))
    [ "$boot" -le 4 ] || break
    echo "== VM suite resumes after $crashed (boot $boot)"
  done
  grep -E '\] (PASS|FAIL|SKIP) ' "$RES/suite.log" 2>/dev/null | cut -c1-200
  if [ -f "$RES/results.txt" ]; then
    while read -r verdict rest; do
      name=${rest%%:*}; detail=${rest#*: }
      record "$verdict" "[$TAG] $name" "$detail"
      case "$verdict" in
        PASS) k_pass=$((k_pass + 1)) ;;
        SKIP) k_skip=$((k_skip + 1)); k_skipped_names+=" $name" ;;
        *) k_fail=$((k_fail + 1)); k_failed_names+=" $name" ;;
      esac
    done < "$RES/results.txt"
  fi
  if [ ! -f "$RES/complete" ] && [ -n "$spent" ]; then
    record SKIP "[$TAG] vm_suite" "the cases after $crashed were not run: the time budget was spent before the guest could boot again"
    k_skip=$((k_skip + 1)); k_skipped_names+=" (rest)"
  elif [ ! -f "$RES/complete" ]; then
    stopped=""; [ -f "$RES/stopped" ] && stopped="; stopped: $(cat "$RES/stopped")"
    record FAIL "[$TAG] vm_suite" "the guest did not finish the suite (vm.sh exit $vm_rc$stopped); see $RES/suite.log and $RES/console.log"
    echo "--- last lines of the guest console:"; tail -n 25 "$RES/console.log"
    k_fail=$((k_fail + 1)); k_failed_names+=" vm_suite"
  fi
  KSUMMARY+=("$(printf '%-28s %6s %6s %6s %7s  %s' "$TAG" $((k_pass + k_fail)) "$k_pass" "$k_fail" "$k_skip" "failed:${k_failed_names:- none} skipped:${k_skipped_names:- none}${retried:+ retried after an emulator fault:$retried}")")
done

echo
echo "== summary ($(($(date +%s) - t_start)) s)"
for s in "${SUMMARY[@]}"; do echo "$s"; done
echo
printf '%-28s %6s %6s %6s %7s  %s\n' kernel/layout tried passed failed skipped cases
for s in "${KSUMMARY[@]}"; do echo "$s"; done
# The failures again, last: a CI log cut to its head and tail still shows why each failed.
if [ "$FAILED" -gt 0 ]; then
  echo; echo "== failures"
  for s in "${SUMMARY[@]}"; do [[ $s == FAIL* ]] && echo "$s"; done
fi
if [ "$SKIPPED" -gt 0 ]; then echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"; else echo "$PASSED passed, $FAILED failed"; fi
[ "$FAILED" -eq 0 ]
