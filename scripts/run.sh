#!/usr/bin/env bash
# The run command: builds scx_gmp and runs it with live stats. On a kernel with sched_ext it
# runs on this machine (as root) until Ctrl-C. On a kernel without it, it installs what it
# needs, boots a VM with a sched_ext kernel (4 CPUs in 2 NUMA nodes by default), loads
# scx_gmp there, runs a demo workload and shows the stats as they come.
#
#   scripts/run.sh [--vm] [--duration SECS] [--kernel VER] [--cpus N] [--nodes M] [-- SCX_GMP_FLAGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

FORCE_VM=0; DURATION=60; KVER=${GMP_KERNEL:-6.18.15+deb13-amd64}; CPUS=4; NODES=2
while [ $# -gt 0 ]; do
  case "$1" in
    --vm) FORCE_VM=1; shift ;;
    --duration) DURATION=$2; shift 2 ;;
    --kernel) KVER=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n 2,8p "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument: $1 (scx_gmp flags go after --)" >&2; exit 2 ;;
  esac
done
FLAGS=("$@")
[ ${#FLAGS[@]} -gt 0 ] || FLAGS=(--stats 1)

if [ -e /sys/kernel/sched_ext ] && [ "$FORCE_VM" = 0 ]; then
  scripts/setup.sh --host-only
  # shellcheck disable=SC1091
  [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
  cargo build --release
  exec target/release/scx_gmp "${FLAGS[@]}"
fi

scripts/setup.sh --kernel "$KVER"
# shellcheck disable=SC1091
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release
echo "[run] no sched_ext on this kernel: booting $KVER in a VM ($CPUS CPUs, $NODES NUMA nodes) for ${DURATION} s"
# --tsc: the clock the benchmark VM uses; without it an emulated guest falls back to the HPET
# and the loader rightly warns about it, a warning that would be about our VM, not the user's.
exec scripts/vm.sh --tsc --kernel "$KVER" --cpus "$CPUS" --nodes "$NODES" -- \
  "$REPO/scripts/demo.sh" "$REPO/target/release/scx_gmp" "$DURATION" "${FLAGS[@]}"
