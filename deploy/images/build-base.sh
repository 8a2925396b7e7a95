#!/usr/bin/env bash
# Build system1/base:bookworm, a Debian bookworm root filesystem with Python 3.11 and venv,
# imported into Docker: the base of every image where no registry image can be pulled.
# Re-runs reuse the image if it exists.
set -euo pipefail
IMAGE="${1:-system1/base:bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "$IMAGE exists"
  exit 0
fi
if ! command -v mmdebstrap >/dev/null; then
  apt-get update -qq && apt-get install -y -qq mmdebstrap >/dev/null
fi
echo "building $IMAGE with mmdebstrap"
mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/hostname"' \
  bookworm - \
  "deb $MIRROR bookworm main" \
  "deb $MIRROR bookworm-updates main" \
  "deb $SECURITY bookworm-security main" \
| docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    - "$IMAGE"
