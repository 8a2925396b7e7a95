#!/usr/bin/env bash
# Prometheus and promtool from Debian's prometheus package (no registry, no download beyond the
# Debian mirror), unpacked into build/prometheus/: the metrics image copies the server, the unit
# tier runs promtool on the alert rules and the dashboard's queries.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/prometheus
if [ -x "$out/prometheus" ] && [ -x "$out/promtool" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus; }; })
dpkg -x "$tmp"/prometheus_*.deb "$tmp/root"
mkdir -p "$out"
cp "$tmp/root/usr/bin/prometheus" "$tmp/root/usr/bin/promtool" "$out/"
