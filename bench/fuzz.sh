#!/usr/bin/env bash
# Fuzzes mplan's readers with libFuzzer: the model parser, the plan
# reader (with the verifier), the profile reader (with planning) and the .npy
# reader. Builds the targets with clang, ASan and UBSan in build-fuzz/, runs
# each for SECONDS (default 300) from the seeds in tests/fuzz/corpus/<target>
# and the regression inputs, with the format's words in tests/fuzz/dict, and
# prints per target: seconds, executions, crashes. A crash's input is left
# in build-fuzz/artifacts/<target>/; once fixed it belongs in
# tests/fuzz/regressions/<target>/, which ctest replays (label fuzz).
# Figures of a run are in docs/robustness.md.
#
#   bash bench/fuzz.sh [SECONDS] [TARGET...]     # targets: model plan profile npy
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then targets=(model plan profile npy); fi
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DMPLAN_BUILD_TESTS=OFF -DMPLAN_BUILD_BENCH=OFF -DMPLAN_BUILD_FUZZERS=ON \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-fuzz -j"${jobs}" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
declare -A max_len=([model]=32768 [plan]=131072 [profile]=65536 [npy]=4096)
summary="target   seconds  executions  crashes"
status=0
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t artifacts=build-fuzz/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  log=build-fuzz/fuzz_$t.log
  set +e
  ./build-fuzz/tests/fuzz/fuzz_"$t" "$corpus" tests/fuzz/regressions/"$t" -max_total_time="$seconds" \
    -max_len="${max_len[$t]}" -dict=tests/fuzz/dict/"$t".dict -rss_limit_mb=3072 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" >"$log" 2>&1
  code=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  crashes=$(find "$artifacts" -type f | wc -l)
  summary+=$'\n'"$(printf '%-8s %7s  %10s  %7s' "$t" "$seconds" "$runs" "$crashes")"
  if ((code != 0 || crashes > 0)); then
    status=1
    echo "fuzz: $t found a problem (exit $code); see $log and $artifacts/" >&2
  fi
done
echo "$summary"
exit $status
