#!/usr/bin/env bash
# Install Debian's chromium for the report's browser test (tests/pipeline/test_report_browser.py)
# when it is missing. Needs root or passwordless sudo and a reachable apt mirror; where that is
# impossible it says so and exits 0, and the browser test skips with the reason (it fails under
# CI, where the set-up must work).
set -u
for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then
        echo "chromium: $(command -v "$name")"
        exit 0
    fi
done
if [ "$(id -u)" -eq 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
else
    echo "chromium missing and neither root nor passwordless sudo: the browser test skips" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends chromium >/dev/null 2>&1; then
    $sudo apt-get update -qq >/dev/null 2>&1 || true
    if ! $sudo apt-get install -y --no-install-recommends chromium >/dev/null; then
        echo "apt-get install chromium failed: the browser test skips" >&2
        exit 0
    fi
fi
echo "chromium: $(command -v chromium)"
