#!/usr/bin/env bash
# Makes sure a headless browser is there for the `render: true` tests: Chromium on PATH or at
# SARVCRAWL_CHROMIUM, else Debian's `chromium` package is installed (as root, or with sudo).
set -euo pipefail
if [ -n "${SARVCRAWL_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1; then
  exit 0
fi
command -v apt-get >/dev/null || { echo "Chromium is missing and apt-get is not here: install Chromium or set SARVCRAWL_CHROMIUM" >&2; exit 1; }
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "--- installing Debian's chromium package"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
# The downloaded packages are not needed once installed.
$sudo apt-get clean
