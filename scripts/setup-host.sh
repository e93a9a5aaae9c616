#!/usr/bin/env bash
# Gets a Debian-like machine from "no Docker engine" to "engine running, gVisor registered".
# Idempotent: does nothing that is already done. Needs root for the parts it has to install.
set -euo pipefail

log() { printf 'setup-host: %s\n' "$*" >&2; }

engine_up() { docker info >/dev/null 2>&1; }

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    log "$1 needs root. Run: sudo $0"
    log "(or install and start Docker yourself: https://docs.docker.com/engine/install/, then run this again)"
    exit 3
  fi
}

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v runsc >/dev/null 2>&1 || missing+=(runsc)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
# What `npm test` needs besides the engine, so that the README's second command runs every part
# after this one: Podman's Docker-compatible service (with catatonit for --init and uidmap for
# rootless), sshd for the ssh:// engine tests, and Chromium for the page tests of `sandbox-run
# show` (Debian's package, driven by playwright-core: no browser is downloaded from anywhere
# else). Only as root on Debian; elsewhere npm test says which parts it could not run.
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  [ -x /usr/libexec/podman/catatonit ] || missing+=(catatonit)
  command -v newuidmap >/dev/null 2>&1 || missing+=(uidmap)
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  [ -x /usr/bin/chromium ] || missing+=(chromium)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    engine_up && { log "engine is up; skipping installs (${missing[*]}) on a non-Debian host"; exit 0; }
    log "no apt-get here: install a Docker engine (and optionally gVisor's runsc) with your package manager"
    exit 3
  fi
  need_root "installing ${missing[*]}"
  log "installing ${missing[*]} ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Register gVisor with the options sandbox-run relies on (no network inside gVisor's own stack;
# host unix sockets may be opened so the model gateway is reachable; Docker's seccomp profile applied
# inside the sandbox, which runsc ignores without --oci-seccomp). An older registration is updated.
if command -v runsc >/dev/null 2>&1 && ! grep -q -- '--oci-seccomp' /etc/docker/daemon.json 2>/dev/null; then
  need_root "registering runsc in /etc/docker/daemon.json"
  mkdir -p /etc/docker
  node -e '
    const fs = require("fs"); const f = "/etc/docker/daemon.json";
    const cfg = fs.existsSync(f) ? JSON.parse(fs.readFileSync(f, "utf8") || "{}") : {};
    cfg.runtimes = { ...(cfg.runtimes || {}), runsc: { path: require("child_process").execSync("command -v runsc", { shell: "/bin/sh" }).toString().trim(), runtimeArgs: ["--network=none", "--host-uds=open", "--oci-seccomp"] } };
    fs.writeFileSync(f, JSON.stringify(cfg, null, 2));'
  log "registered runsc"
  if engine_up; then
    need_root "restarting dockerd"
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker 2>/dev/null; then systemctl restart docker
    else pkill -HUP dockerd || true; sleep 2; fi
  fi
fi

# Per-user kernel limits a sandbox shares with every process of its uid (a non-root caller's
# bind-mode sandbox runs as the caller): raised far above what any container's memory limit can
# buy (each epoll watch and inotify instance is charged to its memory cgroup), so no sandbox can use
# up what the controller and the caller's own programs need (src/util/per-user-limits.ts keeps
# the same numbers; a run on a host without them goes to copy mode and says why).
SYSCTLS="fs.epoll.max_user_watches = 1099511627776
fs.inotify.max_user_instances = 2147483647
fs.inotify.max_user_watches = 2147483647"
if [ "$(cat /etc/sysctl.d/90-sandbox-run.conf 2>/dev/null)" != "$SYSCTLS" ] ||
  [ "$(cat /proc/sys/fs/epoll/max_user_watches 2>/dev/null)" != "1099511627776" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    mkdir -p /etc/sysctl.d
    printf '%s\n' "$SYSCTLS" >/etc/sysctl.d/90-sandbox-run.conf
    if sysctl -q -p /etc/sysctl.d/90-sandbox-run.conf >/dev/null; then
      log "raised the per-user epoll and inotify limits (/etc/sysctl.d/90-sandbox-run.conf)"
    else
      log "could not raise the per-user epoll and inotify limits here: bind-mode runs of non-root callers go to copy mode"
    fi
  else
    log "the per-user epoll and inotify limits are this kernel's defaults: bind-mode runs go to copy mode (as root: $0 raises them)"
  fi
fi

if ! engine_up; then
  need_root "starting dockerd"
  if command -v systemctl >/dev/null 2>&1 && systemctl start docker 2>/dev/null; then :
  else
    log "starting dockerd in the background (log: /var/log/dockerd.log) ..."
    nohup dockerd >/var/log/dockerd.log 2>&1 &
  fi
  for _ in $(seq 1 60); do engine_up && break; sleep 1; done
fi
engine_up || { log "dockerd did not come up; see /var/log/dockerd.log"; exit 3; }

# The other Linux platform (linux/arm64 on x86-64) under qemu-user-static, registered with
# binfmt_misc with the F flag: `--platform` runs and the integration-arm64 tests. Optional; its
# own script (it says what it did, or what is missing, and never stops the set-up).
"$(dirname "$0")/setup-emulation.sh" || log "emulation is not set up; runs of the other platform will be refused (docs/platforms.md)"
log "Docker engine $(docker version --format '{{.Server.Version}}') is up; runtimes: $(docker info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}')"
