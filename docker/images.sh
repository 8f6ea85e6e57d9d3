#!/usr/bin/env bash
# Build every meshward image that this tree can build (`make images`):
#   meshward/nats, meshward/<service> for each service present, and with --gpu meshward/<classifier>-gpu.
# Uses the official python:3.11-slim-bookworm base when a registry answers, otherwise the offline base
# (docker/offline-base.sh). Classifier images carry the model built by `meshward train` (MESHWARD_MODELS_DIR): an artifact, no training code.
# Env: MESHWARD_IMAGE_TAG (default: local), BASE_IMAGE / GPU_BASE_IMAGE to force a base.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${MESHWARD_IMAGE_TAG:-local}
gpu=0; [[ ${1:-} == --gpu ]] && gpu=1
PY=${PY:-.venv/bin/python}
docker info >/dev/null 2>&1 || { echo "no Docker engine answers (start dockerd, or set DOCKER_HOST)" >&2; exit 1; }

if [[ -z ${BASE_IMAGE:-} ]]; then
    if docker image inspect python:3.11-slim-bookworm >/dev/null 2>&1 || timeout 60 docker pull -q python:3.11-slim-bookworm >/dev/null 2>&1; then
        BASE_IMAGE=python:3.11-slim-bookworm
    else
        echo "no registry answers: using the offline Debian base"
        bash docker/offline-base.sh meshward/base:bookworm
        BASE_IMAGE=meshward/base:bookworm
    fi
fi
GPU_BASE_IMAGE=${GPU_BASE_IMAGE:-$BASE_IMAGE}  # set it to a CUDA runtime + cuDNN image with Python 3.11 for real GPU nodes

bash docker/wheelhouse.sh $([[ $gpu == 1 ]] && echo --gpu)

# Stage each built classifier: CPU images get the int8 graph, GPU images the fp16 one (int8 kept as CPU fallback).
for name in security intent; do
    [[ -d services/$name ]] || continue
    # The build the service itself would load (by MESHWARD_<NAME>_MODEL_DIR/_VERSION, else the newest; its
    # preprocessing version checked): `make images` runs `make models` first, so that is the current one.
    dir=$($PY -c "from meshward.$name.classifier import model_dir; from meshward.intent.scope import load_scope
print(model_dir(load_scope()) if '$name' == 'intent' else model_dir())") || exit 1
    rm -rf "build/models/$name"; mkdir -p "build/models/$name/cpu" "build/models/$name/gpu"
    cp "$dir"/{model.int8.onnx,tokenizer.json,card.json,README.md} "build/models/$name/cpu/"
    cp "$dir"/{model.int8.onnx,model.fp16.onnx,tokenizer.json,card.json,README.md} "build/models/$name/gpu/"
    if [[ $name == security ]]; then  # the n-gram model for text in other scripts (CPU in both variants: a lookup)
        grams=$($PY -c "from meshward.security.chargram import model_dir; print(model_dir())") || exit 1
        for variant in cpu gpu; do
            mkdir -p "build/models/$name/$variant/chargram"
            cp "$grams"/{weights.npz,card.json,README.md} "build/models/$name/$variant/chargram/"
        done
    fi
done

build() {  # image target service [variant]
    local variant=${4:-cpu} base=$BASE_IMAGE
    [[ $variant == gpu ]] && base=$GPU_BASE_IMAGE
    echo "== $1:$tag"
    docker build --quiet -f docker/Dockerfile --build-arg BASE_IMAGE="$base" --build-arg VARIANT="$variant" \
        --build-arg SERVICE="$3" --target "$2" -t "$1:$tag" . >/dev/null
}

bash docker/nats/build.sh "meshward/nats:$tag"
# Compose's PostgreSQL: the official image when it is here or can be pulled, else Debian's on the offline base.
if ! docker image inspect postgres:16-bookworm >/dev/null 2>&1 && ! timeout 60 docker pull -q postgres:16-bookworm >/dev/null 2>&1; then
    echo "== meshward/postgres:$tag (no registry: Debian's PostgreSQL; Compose: MESHWARD_POSTGRES_IMAGE=meshward/postgres:$tag)"
    docker build --quiet --build-arg BASE_IMAGE="$BASE_IMAGE" -t "meshward/postgres:$tag" docker/postgres >/dev/null
fi
for d in services/*/; do
    svc=$(basename "$d")
    case $svc in
        security|intent) build "meshward/$svc" classifier "$svc" ;;
        *) build "meshward/$svc" service "$svc" ;;
    esac
    if [[ $gpu == 1 ]]; then
        case $svc in
            security|intent) build "meshward/$svc-gpu" classifier "$svc" gpu ;;
            llm)
                if compgen -G "build/wheelhouse/cuda/xllamacpp-*.whl" >/dev/null; then
                    build "meshward/$svc-gpu" service "$svc" gpu
                else
                    echo "skipping meshward/llm-gpu: no CUDA build of xllamacpp in the wheelhouse (set XLLAMACPP_CUDA_INDEX" \
                         "to xllamacpp's CUDA wheel index; PyPI has the CPU build only). Without it, run an OpenAI-compatible" \
                         "server such as vLLM on the GPU node and name it in MESHWARD_LLM_PROVIDERS: llm itself then needs no GPU."
                fi ;;
        esac
    fi
done
docker image ls --format '{{.Repository}}:{{.Tag}}\t{{.Size}}' | grep "^meshward/.*:$tag" | sort
