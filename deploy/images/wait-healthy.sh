#!/usr/bin/env bash
# Wait (at most WAIT_S seconds, default 180) until every named container reports healthy.
set -euo pipefail
deadline=$(( $(date +%s) + ${WAIT_S:-180} ))
for container in "$@"; do
  until [ "$(docker inspect -f '{{.State.Health.Status}}' "$container" 2>/dev/null)" = healthy ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "$container is not healthy after ${WAIT_S:-180} s:" >&2
      docker logs --tail 50 "$container" >&2 || true
      exit 1
    fi
    sleep 1
  done
done
