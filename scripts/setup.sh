#!/usr/bin/env bash
# Install everything the run, test and bench commands need on a Debian 12 machine.
# Idempotent: each step checks whether it is already done. Run as root.
#
#   scripts/setup.sh [--kernel VERSION] [--host-only]   (default kernel 6.18.15+deb13-amd64;
#   --host-only: just what building and running on a sched_ext host needs, no VM pieces)
#
# What it installs:
#   - Debian packages: clang-19/llvm-19 (BPF C), libelf-dev, zlib1g-dev, pkg-config (libbpf-sys),
#     kmod, udev, busybox-static (virtme-ng), stress-ng, rt-tests, linux-perf, numactl, tmux,
#     util-linux (the workloads and tests), and qemu-system-x86 10.x from bookworm-backports
#     (Debian 12's qemu 7.2 crashes guests right after a sched_ext scheduler unloads).
#   - virtme-ng (PyPI), which boots a kernel with the host's root filesystem shared in.
#   - A Debian kernel built with CONFIG_SCHED_CLASS_EXT, unpacked into $GMP_CACHE (not installed
#     into the host's boot path), with its modules where virtme-ng looks for them.
set -euo pipefail

KVER=${GMP_KERNEL:-6.18.15+deb13-amd64}
HOST_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) KVER=$2; shift 2 ;;
    --host-only) HOST_ONLY=1; shift ;;
    *) echo "setup.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done

CACHE=${GMP_CACHE:-/opt/scx_gmp}
say() { printf '[setup] %s\n' "$*"; }

[ "$(id -u)" = 0 ] || { echo "setup.sh: must run as root" >&2; exit 1; }
mkdir -p "$CACHE"

# The archive URI the machine already uses, so no new host is named anywhere.
ARCHIVE=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$ARCHIVE" ] || ARCHIVE=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$ARCHIVE" ] || { echo "setup.sh: cannot find the Debian archive URI in the apt sources" >&2; exit 1; }

# --- Debian packages ---------------------------------------------------------------------
BPO=/etc/apt/sources.list.d/scx-gmp-bookworm-backports.list
if [ ! -f "$BPO" ]; then
  say "adding bookworm-backports (used only for qemu-system-x86; backports are never picked by default)"
  echo "deb $ARCHIVE bookworm-backports main" > "$BPO"
  rm -f "$CACHE/.apt-updated"
fi
if [ ! -f "$CACHE/.apt-updated" ]; then
  say "apt-get update"
  apt-get update -qq
  touch "$CACHE/.apt-updated"
fi

PKGS=(clang-19 llvm-19 libelf-dev zlib1g-dev pkg-config kmod udev busybox-static
      stress-ng rt-tests linux-perf numactl tmux util-linux procps python3-venv
      iproute2 file cpio)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Rust: the scx crates need cargo >= 1.91 (rustup's stable toolchain; Debian 12's is too old).
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
if ! command -v cargo >/dev/null; then
  echo "setup.sh: cargo is not installed; install Rust >= 1.91 with rustup" >&2; exit 1
fi
cv=$(cargo --version | awk '{print $2}')
if [ "$(printf '%s\n1.91.0\n' "$cv" | sort -V | head -1)" != 1.91.0 ]; then
  echo "setup.sh: cargo $cv is older than 1.91 (the scx crates need it); update Rust with rustup" >&2; exit 1
fi

if [ "$HOST_ONLY" = 1 ]; then
  say "ready (host build only)"
  exit 0
fi

qemu_ok() {
  command -v qemu-system-x86_64 >/dev/null || return 1
  local v; v=$(qemu-system-x86_64 --version | awk 'NR==1 {print $4}')
  [ "${v%%.*}" -ge 8 ]
}
if ! qemu_ok; then
  say "installing qemu-system-x86 from bookworm-backports"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -t bookworm-backports qemu-system-x86 qemu-system-data
fi
qemu_ok || { echo "setup.sh: qemu-system-x86_64 >= 8 is not available" >&2; exit 1; }

# --- virtme-ng -------------------------------------------------------------------------
VENV=$CACHE/venv
if [ ! -x "$VENV/bin/vng" ]; then
  say "installing virtme-ng from PyPI into $VENV"
  PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q 'virtme-ng==1.42' || "$VENV/bin/pip" install -q virtme-ng
fi

# --- a sched_ext kernel ---------------------------------------------------------------
KDIR=$CACHE/kernels/$KVER
if [ ! -f "$KDIR/vmlinuz" ]; then
  say "fetching linux-image-$KVER (trixie-backports) into $KDIR"
  APTD=$CACHE/apt-trixie
  mkdir -p "$APTD/lists/partial" "$APTD/archives/partial" "$KDIR"
  echo "deb $ARCHIVE trixie-backports main" > "$APTD/sources.list"
  echo "deb $ARCHIVE trixie main" >> "$APTD/sources.list"
  APTOPTS=(-o Dir::Etc::SourceList="$APTD/sources.list" -o Dir::Etc::SourceParts=/dev/null
           -o Dir::State::Lists="$APTD/lists" -o Dir::Cache::Archives="$APTD/archives"
           -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Get::List-Cleanup=0)
  apt-get "${APTOPTS[@]}" update -qq
  tmp=$(mktemp -d)
  # 7.x kernels come split: linux-image-* is a metapackage over linux-binary-* (the image)
  # and linux-modules-*; fetch whichever of them can be downloaded. A name that is only
  # mentioned (6.18's linux-base-KVER is a virtual name in a Breaks line) has no candidate.
  pkgs=()
  for p in "linux-image-$KVER" "linux-binary-$KVER" "linux-modules-$KVER" "linux-base-$KVER"; do
    cand=$(apt-cache "${APTOPTS[@]}" policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')
    [ -n "$cand" ] && [ "$cand" != "(none)" ] && pkgs+=("$p")
  done
  [ ${#pkgs[@]} -gt 0 ] || { echo "setup.sh: no package for kernel $KVER in trixie(-backports)" >&2; exit 1; }
  ( cd "$tmp" && apt-get "${APTOPTS[@]}" download "${pkgs[@]}" )
  mkdir -p "$tmp/root"
  for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
  # /boot/vmlinuz-KVER in one-package kernels, /usr/lib/modules/KVER/vmlinuz in split ones.
  img=$(find "$tmp/root" -path "*/boot/vmlinuz-$KVER" -o -path "*/modules/$KVER/vmlinuz" | head -1)
  cfg=$(find "$tmp/root" -path "*/boot/config-$KVER" -o -path "*/modules/$KVER/config" | head -1)
  [ -n "$img" ] || { echo "setup.sh: no vmlinuz-$KVER in ${pkgs[*]}" >&2; exit 1; }
  cp "$img" "$KDIR/vmlinuz"
  [ -n "$cfg" ] && cp "$cfg" "$KDIR/config"
  rm -rf "/lib/modules/$KVER"
  mkdir -p /lib/modules
  for m in "$tmp/root/lib/modules/$KVER" "$tmp/root/usr/lib/modules/$KVER"; do
    [ -d "$m" ] && { cp -a "$m" "/lib/modules/$KVER"; break; }
  done
  depmod "$KVER"
  rm -rf "$tmp"
fi
if [ -f "$KDIR/config" ] && ! grep -q '^CONFIG_SCHED_CLASS_EXT=y' "$KDIR/config"; then
  echo "setup.sh: kernel $KVER lacks CONFIG_SCHED_CLASS_EXT" >&2; exit 1
fi
[ -d "/lib/modules/$KVER" ] || { echo "setup.sh: /lib/modules/$KVER missing; remove $KDIR and rerun" >&2; exit 1; }
say "ready: kernel $KDIR/vmlinuz, vng $VENV/bin/vng, $(qemu-system-x86_64 --version | head -1)"
