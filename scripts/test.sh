#!/usr/bin/env bash
# Builds mplan and runs the whole test suite (ctest). This is the README's test
# command and exactly what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"${jobs}"
ctest --test-dir build --output-on-failure -j"${jobs}" --timeout 900
