#!/usr/bin/env bash
# The engines the integration tests use besides the local Docker engine, started once for a whole
# CI run: a second dockerd in its own network and mount namespace reached only over mutual TLS
# (tests/support/second-engine.ts), and Podman's Docker-compatible service, rootful and rootless
# (tests/support/podman-service.ts). Installs what they need from Debian when it is missing
# (podman, catatonit for its --init, uidmap for rootless, openssh-server for the ssh:// tests).
#   scripts/test-engines.sh start | stop
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf 'test-engines: %s\n' "$*" >&2; }

case "${1:-}" in
  start)
    missing=()
    command -v podman >/dev/null 2>&1 || missing+=(podman)
    [ -x /usr/libexec/podman/catatonit ] || missing+=(catatonit)
    command -v newuidmap >/dev/null 2>&1 || missing+=(uidmap)
    [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
    if [ ${#missing[@]} -gt 0 ]; then
      log "installing ${missing[*]} ..."
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    node --import tsx tests/support/second-engine.ts start
    node --import tsx tests/support/podman-service.ts start
    ;;
  stop)
    node --import tsx tests/support/podman-service.ts stop || log "podman services: already stopped"
    node --import tsx tests/support/second-engine.ts stop || log "second engine: already stopped"
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
