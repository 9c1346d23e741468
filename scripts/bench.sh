#!/usr/bin/env bash
# Benchmarks: boots one VM and runs every workload under the kernel's default scheduler
# (EEVDF, nothing loaded), under scx_gmp, under the published peer schedulers (scx_bpfland,
# scx_p2dq, scx_lavd, scx_cosmos, built once from crates.io into /opt/scx_gmp/peers) and under
# any other sched_ext scheduler named with --sched, in interleaved rounds whose order rotates.
# Writes a Markdown table, a CSV and a PNG chart of the ratios to EEVDF, and puts the table and
# chart in the README, one block per layout (the default shape's, then each named layout's).
#
#   scripts/bench.sh [--rounds N] [--duration S] [--layout NAME | --cpus N --nodes M]
#                    [--kernel VER] [--sched NAME=/path/to/scheduler] [--gmp-flags "FLAGS"]
#                    [--hpet] [--no-peers | --peers "scx_bpfland scx_lavd"] [--no-readme]
#                    [--workloads "hackbench pipe"]
#   scripts/bench.sh --scale [scripts/scale.sh's arguments]
#
# --layout takes a shape of scripts/vm.sh (2n, smt, llc, one, wide, offline); the default is
# 2n, 4 CPUs in 2 nodes, whose table is the README's first. Another named layout's goes to its
# own block and files (docs/bench-smt.md ...); a shape given by --cpus/--nodes alone leaves the
# README alone. --scale runs the scale benchmark instead (scripts/scale.sh).
# Under emulation the guest keeps the TSC clocksource (vm.sh --tsc); --hpet leaves it on the
# HPET the guest kernel falls back to, where every clock read is an emulated MMIO access.
# A peer that does not build or load is left out with one line in the report, not an error.
# --workloads runs a subset of tests/bench/guest.sh's workloads (for a quick look at one
# shape; the README's table wants them all, so a subset implies --no-readme). --workloads
# trace adds what only runs by name: the misses' rows under a scheduler-event trace.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

ROUNDS=3; DUR=15; CPUS=4; NODES=2; KVER=${GMP_KERNEL:-6.18.15+deb13-amd64}
EXTRA=(); GMP_FLAGS=""; README=1; CLOCK=(--tsc); LAYOUT=""; WORKLOADS=""
[ "${1:-}" = --scale ] && { shift; exec "$(pwd)/scripts/scale.sh" "$@"; }
# The peers and their pinned versions: the newest on crates.io that build with this Rust and
# clang-19. Each runs as a plain binary with its default flags, as its users start it.
declare -A PEER_VERSION=([scx_bpfland]=1.1.4 [scx_p2dq]=1.1.4 [scx_lavd]=1.1.4 [scx_cosmos]=1.1.7)
PEERS=(scx_bpfland scx_p2dq scx_lavd scx_cosmos)
PEER_CACHE=/opt/scx_gmp/peers
ALL_WORKLOADS=$(sed -n 's/^\(OPTIONAL_\)\{0,1\}WORKLOADS=(\(.*\))$/\2/p' tests/bench/guest.sh | xargs)
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DUR=$2; shift 2 ;;
    --layout) LAYOUT=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --kernel) KVER=$2; shift 2 ;;
    --sched) EXTRA+=("$2"); shift 2 ;;
    --gmp-flags) GMP_FLAGS=$2; shift 2 ;;
    --hpet) CLOCK=(); shift ;;
    --no-readme) README=0; shift ;;
    --no-peers) PEERS=(); shift ;;
    --peers) read -ra PEERS <<< "$2"; shift 2 ;;
    --workloads) WORKLOADS=$2; README=0; shift 2 ;;
    -h|--help) sed -n 2,22p "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
case "$LAYOUT" in ""|2n|smt|llc|one|wide|offline) ;;
  *) echo "bench.sh: unknown layout '$LAYOUT' (2n, smt, llc, one, wide, offline)" >&2; exit 2 ;; esac
# Where the README and docs/ keep this shape's table: "bench" for the default, bench-LAYOUT for
# another named layout. A shape of --cpus/--nodes alone has no block: a 2-CPU run must not
# replace the 4-CPU table the README's text describes.
BLOCK=bench
if [ -n "$LAYOUT" ] && [ "$LAYOUT" != 2n ]; then BLOCK=bench-$LAYOUT
elif [ -z "$LAYOUT" ] && { [ "$CPUS" != 4 ] || [ "$NODES" != 2 ]; } && [ "$README" = 1 ]; then
  echo "bench.sh: --cpus/--nodes other than 4 and 2 name no layout; leaving the README alone" >&2
  README=0
fi
[ "$ROUNDS" -ge 3 ] || echo "bench.sh: fewer than 3 rounds: medians will be rough" >&2
for s in "${EXTRA[@]}"; do
  bin=${s#*=}; bin=${bin%% *}
  [[ $s == *=* ]] && [ -x "$bin" ] || { echo "bench.sh: --sched wants NAME=/path/to/executable, got '$s'" >&2; exit 2; }
done

for w in $WORKLOADS; do
  case " $ALL_WORKLOADS " in *" $w "*) ;;
    *) echo "bench.sh: unknown workload '$w' (known: $ALL_WORKLOADS)" >&2; exit 2 ;; esac
done
for p in "${PEERS[@]}"; do
  [ -n "${PEER_VERSION[$p]:-}" ] || { echo "bench.sh: unknown peer '$p' (known: ${!PEER_VERSION[*]})" >&2; exit 2; }
done

scripts/setup.sh --kernel "$KVER"
for p in gnuplot-nox bpftool; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || \
    { echo "[bench] installing $p"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p"; }
done
# shellcheck disable=SC1091
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
nice -n 19 cargo build --release

stamp=$(date -u +%Y-%m-%dT%H%MZ)
OUT=$REPO/target/bench-results/$stamp
mkdir -p "$OUT"
# One line per scheduler left out (here: peers that did not build; the guest adds those that
# did not load), which report.py prints under the table.
: > "$OUT/status"

# A peer is built once per version into its own root and reused; the builds share one target
# directory, so the second and later peers compile only their own crate and scx_utils' BPF.
# Nice: a build takes minutes on a small machine that may be running timing-sensitive tests.
build_peer() { # NAME: prints the binary, or returns 1 with a status line
  local name=$1 ver=${PEER_VERSION[$1]} root="$PEER_CACHE/$1-${PEER_VERSION[$1]}" t0
  if [ ! -x "$root/bin/$name" ]; then
    echo "[bench] building peer $name $ver (once, into $root)" >&2
    mkdir -p "$PEER_CACHE"; t0=$SECONDS
    if ! BPF_CLANG=clang-19 LIBCLANG_PATH=/usr/lib/llvm-19/lib CARGO_TARGET_DIR="$PEER_CACHE/target" \
        nice -n 19 cargo install --locked --root "$root" "$name" --version "$ver" > "$root.build.log" 2>&1; then
      echo "$name $ver: did not build ($(grep -m1 -E '^error' "$root.build.log" | cut -c1-160)); left out, see $root.build.log" \
        | tee -a "$OUT/status" >&2
      return 1
    fi
    echo "[bench] built $name $ver in $((SECONDS - t0)) s" >&2
  fi
  echo "$root/bin/$name"
}
PEER_SPECS=(); RAN_PEERS=()
for p in "${PEERS[@]}"; do
  bin=$(build_peer "$p") || continue
  PEER_SPECS+=("$p=$bin"); RAN_PEERS+=("$p")
done
# The frame-time workload's periodic task, for the guest (which shares this root).
gcc -O2 -Wall -o "$OUT/frames" tests/bench/frames.c

accel=$(grep -q -E '^(kvm_intel|kvm_amd) ' /proc/modules && echo KVM || echo 'qemu software emulation')
# The guest's shape: a named layout of vm.sh, or --cpus/--nodes; the report names it.
if [ -n "$LAYOUT" ]; then SHAPE=(--layout "$LAYOUT"); SHAPE_NAME="layout $LAYOUT"
else SHAPE=(--cpus "$CPUS" --nodes "$NODES"); SHAPE_NAME="$CPUS CPUs in $NODES NUMA node(s)"; fi
SCHEDS=(eevdf "scx_gmp=$REPO/target/release/scx_gmp $GMP_FLAGS" "${PEER_SPECS[@]}" "${EXTRA[@]}")
echo "[bench] $SHAPE_NAME, kernel $KVER, $accel, $ROUNDS rounds, $stamp"

# qemu, vng and vm.sh all carry $OUT on their command lines; pgrep/pkill take a regex.
OUT_RE=$(printf '%s' "$OUT" | sed 's/[][\.*^$+?(){}|]/\\&/g')

# The VM's qemu CPU time every 0.2 s with how many marks the guest has written (host.samp:
# "epoch cpu_seconds marks"): report.py divides stress-ng's throughput by the host CPU the VM
# got between a run's marks, which drifts with the outer host's load. It shares the host with
# qemu, so each sample forks only awk (the clock and the mark count come from bash itself).
sample_host() {
  local tck pid="" LC_ALL=C
  tck=$(getconf CLK_TCK)
  while :; do
    [ -n "$pid" ] && [ -e "/proc/$pid" ] || pid=$(pgrep -n -f "qemu-system.*$OUT_RE" || true)
    if [ -n "$pid" ]; then
      mapfile -t MARKS 2>/dev/null < "$OUT/marks" || MARKS=()
      awk -v t="$tck" -v now="$EPOCHREALTIME" -v n="${#MARKS[@]}" '{print now, ($14 + $15) / t, n}' \
        "/proc/$pid/stat" >> "$OUT/host.samp" 2>/dev/null || true
    fi
    sleep 0.2
  done
}
sample_host & SAMPLER=$!
trap 'kill "$SAMPLER" 2>/dev/null || true' EXIT
# A guest that hangs while booting (seen under emulation, as in the tests: RCU stalls, a vCPU
# timer that does not fire) never writes bench.log; stop it after 5 minutes and boot once more.
run_guest() {
  rm -f "$OUT/bench.log"
  BENCH_DUR=$DUR timeout 7200 scripts/vm.sh "${CLOCK[@]}" --kernel "$KVER" "${SHAPE[@]}" \
    --memory 3072 --results "$OUT" -- env BENCH_DUR="$DUR" BENCH_WORKLOADS="$WORKLOADS" "$REPO/tests/bench/guest.sh" "$OUT" "$ROUNDS" \
    "${SCHEDS[@]}" &
  local vm=$! waited=0
  while kill -0 "$vm" 2>/dev/null; do
    sleep 5; waited=$((waited + 5))
    if [ ! -f "$OUT/bench.log" ] && [ "$waited" -ge 300 ]; then
      pkill -f -- "$OUT_RE" || true
      wait "$vm" 2>/dev/null; return 1
    fi
  done
  wait "$vm" 2>/dev/null || true
}
# One VM at a time on this machine (scripts/test.sh takes the same lock): wait for a test run
# to end rather than share the host's cores with it, which would skew both.
exec 9> /run/lock/scx_gmp-test.lock
flock -n 9 || { echo "[bench] waiting for another VM run to release /run/lock/scx_gmp-test.lock"; flock 9; }
run_guest || { echo "[bench] the guest hung while booting; booting again"; run_guest || true; }
exec 9>&-
kill "$SAMPLER" 2>/dev/null || true
[ -f "$OUT/complete" ] || { echo "bench.sh: the guest did not finish; see $OUT/bench.log" >&2; exit 1; }
# The clocksource the guest actually ran on, as its log recorded it (not the flag passed).
clock=$(sed -n 's/.*, clocksource \([^,]*\), rounds .*/\1/p' "$OUT/bench.log" | head -1)
nodes=$(sed -n 's/.*bench: \([0-9]*\) CPUs, nodes \([^,]*\),.*/\1 CPUs, nodes \2/p' "$OUT/bench.log" | head -1)
layout="$SHAPE_NAME (${nodes:-shape unknown}), kernel $KVER, $accel, clocksource ${clock:-unknown}, $ROUNDS rounds, $stamp"

python3 tests/bench/report.py "$OUT/raw.csv" "$OUT" "$layout" "${RAN_PEERS[*]}" \
  "$(cat "$OUT/nodes" 2>/dev/null || echo 0)"
gnuplot "$OUT/ratios.gp"
echo "[bench] results: $OUT/bench.md, $OUT/bench.csv, $OUT/bench.png"

if [ "$README" = 1 ]; then
  mkdir -p docs
  for ext in md csv png; do cp "$OUT/bench.$ext" "docs/$BLOCK.$ext"; done
  python3 - "$OUT/bench.md" "$BLOCK" <<'PY'
import re, sys
table, name = open(sys.argv[1]).read().strip(), sys.argv[2]
readme = open("README.md").read()
start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
block = f"{start}\n{table}\n\n![ratios to EEVDF](docs/{name}.png)\n{end}"
span = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
if span.search(readme):
    readme = span.sub(lambda m: block, readme)
else:
    # A layout's first run: its block goes after the last table.
    last = list(re.finditer(r"<!-- bench[-a-z0-9]*:end -->", readme))
    if not last:
        sys.exit("bench.sh: the README has no <!-- bench:start --> block")
    at = last[-1].end()
    readme = readme[:at] + "\n\n" + block + readme[at:]
open("README.md", "w").write(readme)
PY
  echo "[bench] README.md and docs/$BLOCK.* updated"
fi
