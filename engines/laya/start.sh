#!/bin/sh
# Start laya-serve for the stack: all interfaces of the internal network, typed-decisions
# preloaded, CUDA when the container has a GPU, weights only from the models volume.
export LAYA_HOST="${LAYA_HOST:-0.0.0.0}"
export LAYA_PORT="${LAYA_PORT:-8765}"
export LAYA_MODELS="${LAYA_MODELS:-typed-decisions}"
export LAYA_DEFAULT_MODEL="${LAYA_DEFAULT_MODEL:-typed-decisions}"
export LAYA_PRELOAD=1
export HF_HUB_OFFLINE=1
exec laya-serve
