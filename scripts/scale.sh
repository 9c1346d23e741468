#!/usr/bin/env bash
# Scale benchmark (also scripts/bench.sh --scale): the same loads, 2 hogs per CPU, a
# hackbench and a fixed load (one hackbench group on CPUs 0 and 1), in VMs of 4, 8, 16 and 32
# CPUs (2, 2, 4 and 4 NUMA nodes), one boot per size, under EEVDF and under scx_gmp. Reports
# per size what scx_gmp's work per event is: sysmon passes per second, CPUs visited per
# pass and per CPU per second, ns per pass, queues looked at per steal attempt, turn-timer
# runs, each BPF program's ns per call, and the guest's kernel-time share against EEVDF's in
# the same boot.
#
#   scripts/scale.sh [--sizes "4 8 16 32"] [--duration S] [--kernel VER] [--no-docs]
#                    [--gmp /path/to/scx_gmp]
#
# --gmp measures another build (an older commit, for a before/after); it implies --no-docs.
# Under emulation time is inflated and skewed once busy vCPUs outnumber the host's cores;
# counts are not, so the counted work (visits, looks, calls) is what compares across sizes,
# and ns per call compares only under the fixed load, whose two busy vCPUs never do. Writes
# target/scale-results/STAMP/scale.md and, unless --no-docs, docs/scale.md.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

SIZES="4 8 16 32"; DUR=10; KVER=${GMP_KERNEL:-6.18.15+deb13-amd64}; DOCS=1; GMP=
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) SIZES=$2; shift 2 ;;
    --duration) DUR=$2; shift 2 ;;
    --kernel) KVER=$2; shift 2 ;;
    --no-docs) DOCS=0; shift ;;
    --gmp) GMP=$2; DOCS=0; shift 2 ;;
    -h|--help) sed -n 2,17p "$0"; exit 0 ;;
    *) echo "scale.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
for n in $SIZES; do
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ $((n % 2)) -eq 0 ] && [ "$n" -le 64 ] || \
    { echo "scale.sh: sizes are even CPU counts from 2 to 64, got '$n'" >&2; exit 2; }
done

scripts/setup.sh --kernel "$KVER"
dpkg-query -W -f='${Status}' bpftool 2>/dev/null | grep -q 'install ok installed' || \
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bpftool
# shellcheck disable=SC1091
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
LABEL="scx_gmp $GMP"
if [ -z "$GMP" ]; then
  nice -n 19 cargo build --release; GMP=$REPO/target/release/scx_gmp
  LABEL="scx_gmp at $(git rev-parse --short HEAD 2>/dev/null || echo 'an unknown commit')"
fi
[ -x "$GMP" ] || { echo "scale.sh: no scx_gmp at $GMP" >&2; exit 2; }

stamp=$(date -u +%Y-%m-%dT%H%MZ)
OUT=$REPO/target/scale-results/$stamp
mkdir -p "$OUT"
echo "cpus,sched,load,metric,value" > "$OUT/raw.csv"

# Nodes for a size: 2 up to 8 CPUs, 4 beyond (as many CPUs per node as the machine grows).
nodes_for() { if [ "$1" -le 8 ]; then echo 2; else echo 4; fi; }

# One VM at a time on this machine (scripts/test.sh and bench.sh take the same lock).
exec 9> /run/lock/scx_gmp-test.lock
flock -n 9 || { echo "[scale] waiting for another VM run to release the lock"; flock 9; }
for n in $SIZES; do
  nodes=$(nodes_for "$n")
  echo "[scale] $n CPUs in $nodes nodes"
  # Memory grows with the size: the guest's per-CPU areas and the hogs' stacks.
  SCALE_DUR=$DUR timeout 3600 scripts/vm.sh --tsc --kernel "$KVER" --cpus "$n" --nodes "$nodes" \
    --memory $((2048 + 64 * n)) --results "$OUT" -- \
    env SCALE_DUR="$DUR" "$REPO/tests/bench/scale_guest.sh" "$OUT" "$GMP" \
    > "$OUT/vm-$n.log" 2>&1 || true
  [ -f "$OUT/complete-$n" ] || echo "[scale] the $n-CPU guest did not finish; see $OUT/vm-$n.log"
done
exec 9>&-

accel=$(grep -q -E '^(kvm_intel|kvm_amd) ' /proc/modules && echo KVM || echo 'qemu software emulation')
python3 tests/bench/scale_report.py "$OUT/raw.csv" "$LABEL, kernel $KVER, $accel, $DUR s of hogs, $stamp" \
  > "$OUT/scale.md"
cat "$OUT/scale.md"
if [ "$DOCS" = 1 ]; then
  cp "$OUT/scale.md" docs/scale.md
  echo "[scale] docs/scale.md updated"
fi
