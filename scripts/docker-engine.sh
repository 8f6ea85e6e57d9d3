#!/usr/bin/env bash
# A Docker engine that answers, for `make images` and the container suite (`make docker-engine`).
# As root, installs what is missing of Debian's docker.io, docker-compose and debootstrap (the offline base needs
# it), starts dockerd in the background when no engine answers (log: $TMPDIR/meshward-dockerd.log) and waits until
# it answers. Exits 3 with the reason where no engine can run here (not root, no apt-get, or dockerd does not come
# up); the caller decides whether that is an error (`make images`) or a skip (CI). Compose is optional: without
# it only the Compose tests skip.
set -uo pipefail
log="${TMPDIR:-/tmp}/meshward-dockerd.log"
root=0; [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1 && root=1
compose() { docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1; }
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
compose || missing+=(docker-compose)
if [[ ${#missing[@]} -gt 0 && $root == 1 ]]; then
    echo "installing Debian's ${missing[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } \
        || echo "apt-get could not install ${missing[*]}" >&2
fi
docker info >/dev/null 2>&1 && exit 0
if [[ $root == 0 ]]; then
    echo "no Docker engine answers and only root (with apt-get) can start one here; or set DOCKER_HOST" >&2; exit 3
fi
command -v dockerd >/dev/null 2>&1 || { echo "dockerd is not installed and apt-get could not install it" >&2; exit 3; }
echo "starting dockerd (log: $log)"
setsid dockerd >>"$log" 2>&1 < /dev/null &
for _ in $(seq 120); do  # readiness poll, up to 60 s
    docker info >/dev/null 2>&1 && { echo "dockerd answers"; exit 0; }
    kill -0 $! 2>/dev/null || { echo "dockerd exited; see $log" >&2; tail -5 "$log" >&2; exit 3; }
    sleep 0.5
done
echo "dockerd did not answer within 60 s; see $log" >&2
exit 3
