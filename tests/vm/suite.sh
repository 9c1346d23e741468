#!/bin/bash
# The VM test suite: runs inside the guest (scripts/test.sh boots it), every case against the
# real scx_gmp in the real kernel. Usage: suite.sh REPO RESULTS_DIR fast|full [CASE...]
set -u
REPO=$1; RES=$2; TIER=$3; shift 3
export REPO RES TIER
. "$REPO/tests/vm/lib.sh"
. "$REPO/tests/vm/cases_lifecycle.sh"
. "$REPO/tests/vm/cases_deploy.sh"
. "$REPO/tests/vm/cases_gmp.sh"
. "$REPO/tests/vm/cases_faults.sh"
. "$REPO/tests/vm/cases_watch.sh"
. "$REPO/tests/vm/cases_procs.sh"
. "$REPO/tests/vm/cases_weights.sh"

if [ "$TIER" = full ]; then
  # Full durations and counts of the fault catalogue (docs/testing.md).
  export FULL=1 DUR=60 HOTPLUG_ROUNDS=5 F3B_ROUNDS=20 LOAD_CYCLES=50 CGROUP_CHURN=1000
else
  # One hotplug round still restarts the scheduler twice (offline, online); the counts are
  # what the fast tier's time budget affords.
  export FULL=0 DUR=20 HOTPLUG_ROUNDS=1 F3B_ROUNDS=4 LOAD_CYCLES=3 CGROUP_CHURN=100
fi
DUR=${DUR}

# Watchdog lanes for the overload and affinity faults: the strict 5 s lane, and (full tier) a
# relaxed 30 s lane, so that a stall seen only under the strict lane is reported as such.
t_f1_overload_lane30() { SCX_TIMEOUT_MS=30000 t_f1_overload_lane; }
t_f4_affinity_lane30() { SCX_TIMEOUT_MS=30000 t_f4_affinity_lane; }
t_f1_overload_lane() { export SCX_TIMEOUT_MS; SURVIVE_NOTE="stress-ng -c $((4 * NCPU)) for $DUR s" \
  survive "f1_overload_${SCX_TIMEOUT_MS}ms" "stress-ng --temp-path /tmp -q -c $((4 * NCPU)) -t $DUR"; unset SCX_TIMEOUT_MS; }
t_f4_affinity_lane() { export SCX_TIMEOUT_MS; SURVIVE_NOTE="race-sched, affinity-rand for $DUR s" \
  survive "f4_affinity_${SCX_TIMEOUT_MS}ms" "stress-ng --temp-path /tmp -q --race-sched 8 -t $DUR && stress-ng --temp-path /tmp -q --affinity 4 --affinity-rand -t $DUR"; unset SCX_TIMEOUT_MS; }

NCPU=$(nproc)
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
ulimit -n 65536 2>/dev/null || true
log "guest: kernel $(uname -r), $NCPU CPUs, nodes $(cat /sys/devices/system/node/online), state $(state)"

ALL_CASES=(load bad_input libbpf_opts second_instance kill9 ci_stress unit_stock unit_own unit_no_realtime
           runnext pinned_pipe sysmon_fair numa_fair numa_level jump_budget sleeper_preempt sleeper_grid hog_after_sleeps steal overflow fair_tick race_affinity
           monitor help_stats top
           procs_bad_input procs_fixed procs_auto procs_hold cpuset_outside cpuset_shrink rescue_stranded numa_home_grow fork_spread numa_locality partial
           nice cgroup_weight cgroup_weight_sleepers cgroup_deep cgroup_long_queue cgroup_folds no_cgroup_weights starve_warn
           f1_overload f2_watchdog f3_hotplug f4_affinity f5_pinned f6_rt_hog
           f7_fork f8_cgroups f9_policy flag_extremes f10_load_loop f12_sysrq_s f13_sysrq_d f15_memory f17_sigterm)
# Last: under emulation it can take the guest down (see t_f3b_hotplug_restart).
[ "$TIER" = full ] && ALL_CASES+=(f1_overload_lane30 f4_affinity_lane30)
ALL_CASES+=(f3b_hotplug_restart)
CASES=("$@")
[ ${#CASES[@]} -gt 0 ] || CASES=("${ALL_CASES[@]}")

# The run's time budget (scripts/test.sh writes it before each boot): the guest's uptime, in
# seconds, by which every case must have ended. A case starts only if its usual cost fits in
# what is left; the rest are reported as skipped, so a slow host ends with a verdict for every
# case instead of a run cut off mid-case. Costs are seconds measured on a host where the 2n
# boot took 70 minutes (2026-12-06); SPEED scales them by how this boot's cases compare.
declare -A CASE_COST=(
  [runnext]=90 [race_affinity]=100 [cpuset_outside]=80 [cpuset_shrink]=75 [numa_home_grow]=180
  [numa_locality]=120 [partial]=80 [cgroup_long_queue]=100 [cgroup_folds]=80 [starve_warn]=105
  [f1_overload]=150 [f3_hotplug]=220 [f4_affinity]=90 [f8_cgroups]=120 [flag_extremes]=400
  [f10_load_loop]=100 [help_stats]=10 [bad_input]=20 [procs_bad_input]=25 [f3b_hotplug_restart]=120)
CASE_COST_DEFAULT=70
BUDGET_END=$(cat "$RES/budget" 2>/dev/null)
# SPEED (percent): this boot's time over the table's for the cases run so far.
cost_spent=0; cost_expected=0; SPEED=100
uptime_s() { cut -d. -f1 /proc/uptime; }
case_cost() { echo "${CASE_COST[$1]:-$CASE_COST_DEFAULT}"; }
# What CASE should take in this boot: its table cost scaled by SPEED.
case_need() { echo $(($(case_cost "$1") * SPEED / 100)); }
# fits CASE: whether CASE's expected time fits in what is left of the budget.
fits() {
  [ -n "$BUDGET_END" ] || return 0
  [ $(($(uptime_s) + $(case_need "$1"))) -le "$BUDGET_END" ]
}

# Resumable: a case that finished in an earlier boot of this run (see scripts/test.sh, which
# boots again after a guest crash) is not run twice. "started" gets a line per case begun (its
# name and how many result lines existed then), so the host can tell which case took the guest
# down. Files here are only appended to: an overwrite was seen not to reach the host before a
# guest panic.
echo "${GMP_EMULATED:-0}" > "$RES/emulated"
touch "$RES/finished" "$RES/results.txt"
for c in "${CASES[@]}"; do
  if grep -qx "$c" "$RES/finished"; then log "--- $c: done in an earlier boot"; continue; fi
  echo "$c $(wc -l < "$RES/results.txt")" >> "$RES/started"; sync
  log "--- $c"
  if [ "$(state)" != disabled ]; then
    log "sched_ext is '$(state)' before $c; waiting"
    wait_state disabled 20 || { fail "$c" "sched_ext stuck in state $(state) before the case"; continue; }
  fi
  if ! fits "$c"; then
    skip "$c" "not started: $((BUDGET_END - $(uptime_s))) s of the run's time budget left, the case takes about $(case_need "$c") s here"
    echo "$c" >> "$RES/finished"; sync; continue
  fi
  t0=$(uptime_s)
  "t_$c"
  cost_spent=$((cost_spent + $(uptime_s) - t0)); cost_expected=$((cost_expected + $(case_cost "$c")))
  # Never below half, so that a fast start does not let a long case begin too late.
  SPEED=$((cost_spent * 100 / cost_expected)); [ "$SPEED" -ge 50 ] || SPEED=50
  echo "$c" >> "$RES/finished"; sync
done
echo complete > "$RES/complete"
