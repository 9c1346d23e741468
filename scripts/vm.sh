#!/usr/bin/env bash
# Boot a sched_ext kernel in a VM (virtme-ng) and run a command inside it. The host's root
# filesystem is shared into the guest read-only, so host binaries run there as they are;
# RESULTS (a host folder) is writable in the guest and is how results come back.
#
#   scripts/vm.sh [--kernel VER] [--layout NAME | --cpus N --nodes M [--threads T] [--llcs L]]
#                 [--offline CPUS] [--memory MB] [--results DIR] [--tsc] [--verbose] -- CMD...
#
# Defaults: 4 CPUs in 2 NUMA nodes (one socket per node, which keeps the guest's topology
# sane), 2048 MB. --threads gives each core T SMT threads; --llcs gives each node L sockets,
# each with its own L3, so L LLCs per node (qemu's dies do not split the L3 under emulation
# here: the AMD model ignores them, the Intel one trips an assertion); --offline takes those CPUs
# (a list such as 3 or 2-3) offline before CMD starts. --layout names a shape the suite
# and the benchmark run (layout_shape below lists them). Uses KVM when the host's KVM can boot a stock kernel (kvm_intel/kvm_amd),
# qemu's software emulation otherwise.
#
# --tsc (or GMP_TSC=1): under emulation the guest kernel finds the vCPUs' TSCs unsynchronized
# and falls back to the HPET, so every clock read (ktime_get, bpf_ktime_get_ns) becomes an
# emulated MMIO access that serializes the vCPUs in qemu. tsc=reliable keeps the TSC
# clocksource, as on hardware (in such a guest, 16 million cross-CPU ordered reads of
# CLOCK_MONOTONIC never went back). The benchmarks use it.
set -euo pipefail

CACHE=${GMP_CACHE:-/opt/scx_gmp}
KVER=${GMP_KERNEL:-6.18.15+deb13-amd64}
CPUS=4; NODES=2; THREADS=1; LLCS=1; OFFLINE=""; MEM=2048; RESULTS=""; VERBOSE=(); TSC=${GMP_TSC:-0}

# layout_shape NAME: "CPUS NODES THREADS LLCS OFFLINE" of a named layout, or nothing.
layout_shape() {
  case "$1" in
    2n)      echo "4 2 1 1 -" ;;   # the default: 4 CPUs in 2 nodes
    smt)     echo "8 1 2 1 -" ;;   # a desktop: 4 cores with 2 SMT threads each, one node
    llc)     echo "8 2 1 2 -" ;;   # 2 nodes of 2 LLCs of 2 cores
    one)     echo "1 1 1 1 -" ;;   # a single CPU
    wide)    echo "16 4 1 1 -" ;;  # 16 CPUs in 4 nodes
    offline) echo "4 2 1 1 3" ;;   # the default with CPU 3 offline when scx_gmp starts
  esac
}

while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) KVER=$2; shift 2 ;;
    --layout)
      shape=$(layout_shape "$2")
      [ -n "$shape" ] || { echo "vm.sh: unknown layout '$2' (2n, smt, llc, one, wide, offline)" >&2; exit 2; }
      read -r CPUS NODES THREADS LLCS OFFLINE <<< "$shape"; [ "$OFFLINE" = - ] && OFFLINE=""
      shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --llcs) LLCS=$2; shift 2 ;;
    --offline) OFFLINE=$2; shift 2 ;;
    --memory) MEM=$2; shift 2 ;;
    --results) RESULTS=$2; shift 2 ;;
    --tsc) TSC=1; shift ;;
    --verbose) VERBOSE=(-v); shift ;;
    --) shift; break ;;
    *) echo "vm.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "vm.sh: no command given (put it after --)" >&2; exit 2; }
VMLINUZ=$CACHE/kernels/$KVER/vmlinuz
[ -f "$VMLINUZ" ] || { echo "vm.sh: no kernel at $VMLINUZ; run scripts/setup.sh --kernel $KVER" >&2; exit 1; }
VNG=$CACHE/venv/bin/vng
export PATH="$CACHE/venv/bin:$PATH"
[ -x "$VNG" ] || { echo "vm.sh: virtme-ng missing; run scripts/setup.sh" >&2; exit 1; }
if [ "$NODES" -lt 1 ] || [ $((CPUS % (NODES * LLCS * THREADS))) -ne 0 ]; then
  echo "vm.sh: --cpus ($CPUS) must be a multiple of nodes x LLCs x threads ($NODES x $LLCS x $THREADS)" >&2; exit 2
fi

# KVM only where a stock kernel can boot under it (the PVM flavour here cannot).
ACCEL=(--disable-kvm); EMULATED=1
if [ -w /dev/kvm ] && grep -qE '^(kvm_intel|kvm_amd) ' /proc/modules 2>/dev/null; then
  ACCEL=(); EMULATED=0
fi

per=$((CPUS / NODES)); mem_per=$((MEM / NODES))
NUMA=()
if [ "$NODES" -gt 1 ]; then
  for ((n = 0; n < NODES; n++)); do
    NUMA+=(--numa "${mem_per}M,cpus=$((n * per))-$((n * per + per - 1))")
  done
fi
# Sockets are numbered first, so node n's CPUs (n*per ..) are its LLCS whole sockets.
QOPTS="-smp $CPUS,sockets=$((NODES * LLCS)),cores=$((per / LLCS / THREADS)),threads=$THREADS"

APPEND=()
[ "$TSC" = 1 ] && [ "$EMULATED" = 1 ] && APPEND=(--append tsc=reliable)

RW=()
[ -n "$RESULTS" ] && { mkdir -p "$RESULTS"; RW=(--rwdir "$RESULTS"); }

# libbpf resolves the scheduler's kconfig externs from /boot/config-$(uname -r); the guest
# shares the host's root, which lacks that file, so lay it over a guest-only tmpfs /boot.
CONFIG=$CACHE/kernels/$KVER/config
prelude="export GMP_EMULATED=$EMULATED; mount -t tmpfs -o size=16m tmpfs /boot && cp $(printf '%q' "$CONFIG") /boot/config-\$(uname -r);"
if [ -n "$OFFLINE" ]; then
  # Expand a CPU list (3, 2-3, 1,3) in the guest and take each of those CPUs offline.
  prelude+=" for r in \$(echo $OFFLINE | tr , ' '); do for c in \$(seq \${r%-*} \${r#*-}); do echo 0 > /sys/devices/system/cpu/cpu\$c/online; done; done;"
fi
# The command runs through bash -c inside the guest; quote it once here.
cmd="$prelude $(printf '%q ' "$@")"
exec "$VNG" -r "$VMLINUZ" "${ACCEL[@]}" --cpus "$CPUS" --memory "${MEM}M" \
  --qemu-opts "$QOPTS" "${NUMA[@]}" "${RW[@]}" "${APPEND[@]}" "${VERBOSE[@]}" --exec "$cmd"
