#!/usr/bin/env bash
# The test command: installs what it needs, builds, runs the unit tests, then boots one VM with
# a sched_ext kernel and runs the VM suite (tests/vm/) against the real scheduler there.
# Ends with "N passed, N failed"; exits non-zero on any failure.
#
#   scripts/test.sh [--kernel VER] [--cpus N] [--nodes M] [--cases "load steal ..."] [--no-setup]
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

KVER=${GMP_KERNEL:-6.18.15+deb13-amd64}
CPUS=4; NODES=2; CASES=""; SETUP=1
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) KVER=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --cases) CASES=$2; shift 2 ;;
    --no-setup) SETUP=0; shift ;;
    -h|--help) sed -n 2,7p "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done

PASSED=0; FAILED=0; SUMMARY=()
record() { # record PASS|FAIL name detail
  if [ "$1" = PASS ]; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi
  SUMMARY+=("$1 $2: $3")
}
t_start=$(date +%s)

if [ "$SETUP" = 1 ]; then
  scripts/setup.sh --kernel "$KVER" || { echo "test.sh: setup failed" >&2; echo "0 passed, 1 failed"; exit 1; }
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

# On a host without sched_ext, the loader must refuse with one line naming the config option.
if [ ! -e /sys/kernel/sched_ext ]; then
  out=$(target/release/scx_gmp 2>&1); rc=$?
  if [ "$rc" -eq 1 ] && [ "$(grep -c . <<< "$out")" -eq 1 ] && grep -q CONFIG_SCHED_CLASS_EXT <<< "$out"; then
    record PASS host_no_sched_ext "exit 1: $out"
  else
    record FAIL host_no_sched_ext "exit $rc: $out"
  fi
fi

echo "== VM suite (kernel $KVER, $CPUS CPUs in $NODES nodes)"
RES=$REPO/target/vm-results
rm -rf "$RES"; mkdir -p "$RES"
# shellcheck disable=SC2086
timeout 1800 scripts/vm.sh --kernel "$KVER" --cpus "$CPUS" --nodes "$NODES" --memory 3072 \
  --results "$RES" -- "$REPO/tests/vm/suite.sh" "$REPO" "$RES" $CASES
vm_rc=$?
if [ -f "$RES/results.txt" ]; then
  while read -r verdict rest; do
    name=${rest%%:*}; detail=${rest#*: }
    record "$verdict" "$name" "$detail"
  done < "$RES/results.txt"
fi
if [ ! -f "$RES/complete" ]; then
  record FAIL vm_suite "the guest did not finish the suite (vm.sh exit $vm_rc); see $RES/suite.log"
fi

echo
echo "== summary ($(($(date +%s) - t_start)) s)"
for s in "${SUMMARY[@]}"; do echo "$s"; done
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
