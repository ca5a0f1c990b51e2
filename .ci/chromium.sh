#!/usr/bin/env bash
# Install Debian's chromium for the report's real-browser tests and benchmark
# (tests/test_report_browser.py, benchmarks/bench_report.py). Idempotent: skips when a
# chromium binary is already on PATH. Needs root and apt (Debian/Ubuntu).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    echo "chromium.sh: $(chromium --version 2>/dev/null || echo chromium) already installed, skipping"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium.sh: no apt-get on this machine; install chromium yourself (browser tests skip without it)" >&2
    exit 1
fi
echo "chromium.sh: installing Debian's chromium (headless browser for the report tests)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "chromium.sh: installed $(chromium --version 2>/dev/null)"
