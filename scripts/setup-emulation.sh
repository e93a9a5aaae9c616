#!/usr/bin/env bash
# Lets this machine's Docker engine run containers of the other Linux platform (linux/arm64 on an
# x86-64 host, linux/amd64 on an arm64 one) under qemu-user-static, for `--platform` runs and the
# arm64 test project. Called by scripts/setup-host.sh; runs alone too. Idempotent.
#
# The emulator is registered with binfmt_misc with the F (fix-binary) flag: the kernel opens the
# interpreter once, at registration, so a container runs foreign binaries without a copy of qemu
# inside it (its root filesystem never has one). binfmt_misc may need mounting first (a minimal
# VM or a container does not mount it). Only as root on Debian-like hosts; elsewhere it says what
# is missing and exits 0 (emulation is optional: runs on the engine's own platform need none).
set -euo pipefail

log() { printf 'setup-emulation: %s\n' "$*" >&2; }

BINFMT=/proc/sys/fs/binfmt_misc
case "$(uname -m)" in
  x86_64) target=aarch64 platform=linux/arm64 ;;
  aarch64 | arm64) target=x86_64 platform=linux/amd64 ;;
  *) log "no emulator set-up for $(uname -m) hosts"; exit 0 ;;
esac
entry="$BINFMT/qemu-$target"

registered() { [ -f "$entry" ] && grep -qx enabled "$entry" && grep -q '^flags: .*F' "$entry"; }

if registered; then
  log "qemu-$target is registered with binfmt_misc (flags: $(sed -n 's/^flags: //p' "$entry")); $platform containers run here"
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  log "$platform containers need qemu-user-static registered with binfmt_misc (flag F); as root on Debian/Ubuntu: $0"
  exit 0
fi

if [ ! -f "$BINFMT/register" ]; then
  log "mounting binfmt_misc at $BINFMT"
  mount -t binfmt_misc binfmt_misc "$BINFMT"
fi
missing=()
dpkg -s qemu-user-static >/dev/null 2>&1 || missing+=(qemu-user-static)
dpkg -s binfmt-support >/dev/null 2>&1 || missing+=(binfmt-support)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Debian's package describes the emulator to binfmt-support with fix_binary (F); importing
# registers it. An entry left without F (or disabled) is replaced.
if [ -f "$entry" ] && ! registered; then echo -1 >"$entry"; fi
if ! registered && command -v update-binfmts >/dev/null 2>&1; then
  update-binfmts --import "qemu-$target" >/dev/null 2>&1 || true
  update-binfmts --enable "qemu-$target" >/dev/null 2>&1 || true
fi
if ! registered; then
  # No binfmt-support description (another distribution's package): register by hand from the
  # systemd-binfmt file qemu-user-static ships, with F added.
  conf=$(ls /usr/lib/binfmt.d/qemu-"$target".conf 2>/dev/null || true)
  if [ -n "$conf" ]; then
    line=$(grep -v '^#' "$conf" | head -n1)
    flags=${line##*:}
    case "$flags" in *F*) ;; *) line="${line}F" ;; esac
    printf '%s' "$line" >"$BINFMT/register"
  fi
fi
if registered; then
  log "registered qemu-$target with binfmt_misc (flags: $(sed -n 's/^flags: //p' "$entry")); $platform containers run here"
else
  log "could not register qemu-$target with binfmt_misc; $platform runs will be refused (see docs/platforms.md)"
  exit 3
fi
