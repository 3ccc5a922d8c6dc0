#!/usr/bin/env bash
# Builds mplan and runs the whole test suite (ctest). This is the README's test
# command and exactly what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"${jobs}"
# ctest lists the tests it skipped (those that need a GPU) after its summary;
# the summary line is repeated last so that it ends the output.
set +e
ctest --test-dir build --output-on-failure -j"${jobs}" --timeout 900 2>&1 | tee build/ctest.log
status=${PIPESTATUS[0]}
set -e
grep -E "^[0-9]+% tests passed" build/ctest.log | tail -n 1
exit "${status}"
