#!/usr/bin/env bash
# Gets a Debian-like machine from "no Docker engine" to "engine running, gVisor registered".
# Idempotent: does nothing that is already done. Needs root for the parts it has to install; a
# non-root user whose engine works goes without the optional parts (gVisor's runsc, debootstrap),
# told what each is for and how to get it. Exits 0 when the engine is up for this user, 3 when
# something stands in the way (it says what: root needed, no engine, or an engine this user may
# not use).
set -euo pipefail

log() { printf 'setup-host: %s\n' "$*" >&2; }

engine_up() { docker info >/dev/null 2>&1; }
# The engine answers, but not to this user: its socket refused the connection (EACCES).
# (Its words captured, not piped: under pipefail, grep -q's early exit could fail the pipe.)
engine_denied() {
  local said
  said=$(docker info 2>&1 >/dev/null) && return 1
  case $said in *"permission denied"* | *"Permission denied"*) return 0 ;; *) return 1 ;; esac
}

# First: a user outside the docker group, with the engine running, was told to start it as root
# (review, session 37). Neither starting it nor root for the rest helps them; what does is what
# `sandbox-run doctor` says for EACCES (src/engine/docker-connection.ts).
if [ "$(id -u)" -ne 0 ] && engine_denied; then
  log "the Docker engine at ${DOCKER_HOST:-unix:///var/run/docker.sock} runs, but this user ($(id -un)) may not use it (permission denied)"
  log "add the user to the docker group (sudo usermod -aG docker $(id -un), then log in again), or point DOCKER_HOST at an engine it may use (rootless Docker: unix:///run/user/$(id -u)/docker.sock); then run $0 again"
  exit 3
fi

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    log "$1 needs root. Run: sudo $0"
    log "(or install and start Docker yourself: https://docs.docker.com/engine/install/, then run this again)"
    exit 3
  fi
}

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
# Optional: gVisor's runsc (`--runtime runsc`) and debootstrap (the offline base of `sandbox-run
# image build` where no registry is reachable). Installed with the rest as root; a non-root user
# whose engine works is not sent to sudo for them only: said below what is skipped, and carried on.
optional=()
command -v runsc >/dev/null 2>&1 || optional+=(runsc)
command -v debootstrap >/dev/null 2>&1 || optional+=(debootstrap)
if [ ${#optional[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] || [ ${#missing[@]} -gt 0 ] || ! engine_up; then
    missing+=("${optional[@]}")
  else
    for package in "${optional[@]}"; do
      case $package in
        runsc) log "skipping gVisor's runsc (not installed; needs root): runs use runc, and --runtime runsc is not available; to install it: sudo $0" ;;
        debootstrap) log "skipping debootstrap (not installed; needs root): sandbox-run image build needs a reachable registry for its base image (node:24-bookworm-slim); to install it: sudo $0" ;;
      esac
    done
  fi
fi
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
  if [ "$(id -u)" -ne 0 ] && engine_up; then
    # Optional too: a non-root user whose engine works goes on without it (review, session 37).
    log "skipping the registration of gVisor's runsc in /etc/docker/daemon.json (needs root): --runtime runsc is not available until it is registered; to register it: sudo $0"
  else
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
