#!/usr/bin/env bash
# Make Docker usable on a fresh Debian 12 host: engine, Compose v1, and a local base image.
# Run as root (CI runs it with CI=true). Idempotent: a second run only checks and takes about a second.
#
# Why a local base image: no registry is reachable from our machines, so every FROM must name an image that
# already exists locally. mmdebstrap builds a minimal Debian from apt, which is reachable.
set -euo pipefail

BASE_IMAGE=${ROSETTA_BASE_IMAGE:-rosetta/debian:bookworm}
SUITE=${ROSETTA_BASE_SUITE:-bookworm}
log() { echo "docker-setup: $*"; }

# 1. Packages. Compose v2 is not packaged by Debian; docker-compose 1.29 (v1) reads the same compose.yaml.
missing=()
for pkg in docker.io docker-compose mmdebstrap; do
  [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" == *'ok installed'* ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. The CLI. A docker on PATH may be a newer static CLI without the buildx plugin, which falls back to the legacy
# builder (no RUN --mount); Debian's own CLI has BuildKit built in, so prefer it. No reader in a pipe may stop early
# under pipefail (grep -m1, grep -q, head): the writer would die of SIGPIPE at random, and the script with it.
mapfile -t clis < <(dpkg -L docker.io)
DOCKER=
for path in "${clis[@]}"; do [[ -z $DOCKER && $path == */bin/docker ]] && DOCKER=$path; done
[[ -n $DOCKER ]] || { log "the docker.io package holds no bin/docker"; exit 1; }
log "docker CLI: $DOCKER ($("$DOCKER" --version))"

# 3. The engine. Containers and CI machines have no systemd, so start dockerd by hand if nothing answers.
if ! "$DOCKER" info >/dev/null 2>&1; then
  log "starting dockerd (log: /tmp/dockerd.log)"
  nohup dockerd >/tmp/dockerd.log 2>&1 &
  for _ in $(seq 60); do
    "$DOCKER" info >/dev/null 2>&1 && break
    sleep 1
  done
  "$DOCKER" info >/dev/null 2>&1 || { log "dockerd did not answer within 60 s; see /tmp/dockerd.log"; exit 1; }
fi
log "engine $("$DOCKER" info --format '{{.ServerVersion}} ({{.Driver}})')"

# 4. The base image, built once.
if "$DOCKER" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  log "base image $BASE_IMAGE exists"
else
  log "building $BASE_IMAGE with mmdebstrap (about a minute)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mmdebstrap --quiet --variant=minbase "$SUITE" "$tmp/rootfs.tar"
  "$DOCKER" import --change 'CMD ["bash"]' "$tmp/rootfs.tar" "$BASE_IMAGE" >/dev/null
  log "built $BASE_IMAGE ($("$DOCKER" image inspect -f '{{.Size}}' "$BASE_IMAGE") bytes)"
fi

# The Dockerfiles use RUN --mount, so builds need BuildKit: this CLI, or Compose v1 told to call it.
log "build with: DOCKER_BUILDKIT=1 $DOCKER build …  (Compose v1: PATH=${DOCKER%/*}:\$PATH COMPOSE_DOCKER_CLI_BUILD=1 DOCKER_BUILDKIT=1 docker-compose build)"
