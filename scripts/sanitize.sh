#!/usr/bin/env bash
# Builds mplan with AddressSanitizer and UndefinedBehaviorSanitizer (GCC) in
# build-asan/ and runs the whole test suite there. Any report fails
# the run: UBSan does not recover, ASan aborts on the first error. The
# programs the end-to-end and install tests generate and build are
# instrumented too (CXXFLAGS/LDFLAGS reach their cmake). docs/robustness.md
# gives how long it takes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
start=$(date +%s)
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMPLAN_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS="$sanitize" -DCMAKE_C_FLAGS="$sanitize" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build build-asan -j"${jobs}"
built=$(date +%s)
# Leak checking does not work under ptrace (the kill tests run mplan under
# strace); they turn it off for their own runs, everything else checks leaks.
# allocator_may_return_null: an impossible allocation returns null, as the C
# library's does (tests check that mplan then says so), instead of ASan's abort.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export CXXFLAGS="$sanitize" CFLAGS="$sanitize" LDFLAGS="-fsanitize=address,undefined"
ctest --test-dir build-asan --output-on-failure -j"${jobs}" --timeout 3600
done=$(date +%s)
echo "sanitize: build $((built - start)) s, tests $((done - built)) s"
