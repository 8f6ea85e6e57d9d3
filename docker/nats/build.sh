#!/usr/bin/env bash
# Build the NATS image from the venv's nats-server binary. Usage: docker/nats/build.sh TAG
set -euo pipefail
cd "$(dirname "$0")/../.."
tag=${1:-meshward/nats:local}
ctx=build/nats
rm -rf "$ctx"; mkdir -p "$ctx/data/jetstream"
cp "$(${PY:-.venv/bin/python} -c 'from meshward.devstack.nats_server import find_binary; print(find_binary())')" "$ctx/nats-server"
cp docker/nats/nats.conf docker/nats/auth.conf "$ctx/"
echo "== $tag"
docker build --quiet -f docker/nats/Dockerfile -t "$tag" "$ctx" >/dev/null
