#!/usr/bin/env bash
# Runs docs/gpu-validation.md's figures on a GPU node, from the repository's
# root, with pack.sh's folder in $PACK (default .gpu). Results go to $OUT
# (default ./gpu-results): log.txt, ctest.txt and results.tgz (profiles, plans,
# the programs' output).
#
#   bench/gpu/node_validate.sh [STAGE ...]
#
# Stages (default: all, in this order; LIMIT=seconds bounds the whole run;
# KPROF=path runs another kernel profiler, e.g. the CPU build, to try the
# script's steps on a machine without a GPU):
#   build    the GPU tests, the runtime and the kernel profiler (build-node/)
#   tests    ctest -L gpu: every op of the CUDA backend against the CPU's kernels
#   compare  pack.sh's programs on the GPU, 3 steps from the CPU's initial
#            weights, against the CPU's weights; and 2 steps under --debug-poison
#   torch    PyTorch eager's step (bench/gpu/torch_step.py), VGG-16 and ResNet-50
#            (TORCH="resnet50 128" picks the model and batch pairs)
#   profiles profile only, no plans: each model of $PROFILES (default: every
#            example model of ImageNet or CIFAR size) at sub-batches B/4, B/2, B
#            with 2 repeats, starting none after PROFILE_UNTIL seconds (default
#            LIMIT); the merged profiles go to results.tgz as
#            res/<model>-profile.json
#   tf32     ResNet-50 with `math: tf32` (TF32 tensor cores, as PyTorch's
#            allow_tf32): profiled in tf32, planned at 70 GiB and 6 GiB, run;
#            PyTorch's step with TF32 on beside it
#   vit      ViT-B/16 (examples/models/vit_b_16.yaml): profiled, planned at
#            70 GiB and 4 GiB, run; PyTorch's step beside it
#   bf16     ResNet-50 at batch 256 and ViT-B/16 at 64 with `precision: bf16`:
#            profiled in bf16 (the 16-bit kernels' jobs, docs/profile-format.md,
#            "16-bit models"), planned unlimited and at about half of the
#            unlimited peak, run; PyTorch autocast bf16's step beside them
#   probe    bench/gpu/copy_probe.cu: copy bandwidth as the profiler and as a
#            program see it, and whether the compute stream's small copies
#            queue behind the d2h stream's
#   programs every program folder under $PACK/extra (mplan compile --target cuda
#            made on the workstation, e.g. from the profiles of a previous
#            run): built, run with --timeline, set beside its plan.json
#   coldcache each model of $COLD_MODELS (default googlenet resnet50) profiled
#            at its batch twice, warm and with --cold-cache 512, each profile
#            planned at ${COLD_BUDGET:-70GiB} and run: which profile's
#            simulation the program meets (docs/gpu-validation.md, fourth
#            GoogLeNet ran 6-11% over a warm profile's plan)
#   resnet50 / vgg16 / alexnet / cifar_small
#            profile the model on this GPU (mplan profile --jobs, the kernel
#            profiler, --merge), plan it at the budgets below with that profile,
#            build and run each program; records simulated vs measured
#            (POISON=0 skips the --debug-poison run of the offload plan)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-results}; mkdir -p "$OUT" build-node/res build-node/w
T0=$SECONDS; LIMIT=${LIMIT:-100000}
left() { local l=$((LIMIT - (SECONDS - T0))); [ $l -lt 5 ] && l=5; [ $l -gt "$1" ] && l=$1; echo $l; }
exec > >(tee -a "$OUT/log.txt") 2>&1
source bench/gpu/node_env.sh
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(build tests compare torch resnet50 vgg16)
save() { tar czf "$OUT/results.tgz" -C build-node res; }
P=build-node/kernel_profiler/mplan_kernel_profiler_cuda
RTLIB=$R/build-node/runtime/cuda/libmplan_runtime_cuda.a
GPU_TESTS=""
# pack.sh's prebuilt binaries (built on the workstation for sm_90 with the same
# CUDA and cuDNN): used where every library they link is found here.
prebuilt_ok() {
  local f
  for f in "$PACK/bin/mplan_kernel_profiler_cuda" "$PACK/bin/gpu_tests"; do
    [ -x "$f" ] && ! ldd "$f" | grep -q "not found" || return 1
  done
  [ -f "$PACK/lib/libmplan_runtime_cuda.a" ]
}

stage_build() {
  if prebuilt_ok; then
    P=${KPROF:-$PACK/bin/mplan_kernel_profiler_cuda}; RTLIB=$R/$PACK/lib/libmplan_runtime_cuda.a; GPU_TESTS=$PACK/bin/gpu_tests
    echo "prebuilt binaries of $PACK/bin used"; return 0
  fi
  echo "prebuilt binaries missing or not loadable here: building"
  cmake -S tests/gpu -B build-node $CMAKE_COMMON -DGTEST_ROOT="$R/$PACK/deps" -DOPENBLAS_INCLUDE_DIR="$R/$PACK/deps/include" \
    -DOPENBLAS_LIBRARY="$R/$PACK/deps/lib/libopenblas.a" > build-node/cmake.txt 2>&1 || { tail -40 build-node/cmake.txt; return 1; }
  cmake --build build-node -j"$(nproc)" > build-node/build.txt 2>&1 || { grep -E "error" -A3 build-node/build.txt | head -60; return 1; }
  echo "built; warnings: $(grep -c warning build-node/build.txt)"
}
stage_tests() {
  if [ -n "$GPU_TESTS" ]; then
    timeout "$(left 300)" "$GPU_TESTS" > "$OUT/ctest.txt" 2>&1
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|cuDNN refused|note" "$OUT/ctest.txt" | head -40
    return
  fi
  timeout "$(left 600)" ctest --test-dir build-node -L gpu -j8 --timeout 300 --output-on-failure > "$OUT/ctest.txt" 2>&1
  grep -E "tests passed|Failed|Not Run" "$OUT/ctest.txt"
}
build_program() {  # folder
  cmake -S "$1" -B "$1/build" $CMAKE_COMMON -DMPLAN_RUNTIME_DIR="$R/runtime" -DMPLAN_RUNTIME_LIBRARY="$RTLIB" > "$1.cmake.txt" 2>&1 &&
    cmake --build "$1/build" > "$1.build.txt" 2>&1 || { echo "FAILED to build $1"; tail -20 "$1".*.txt; }
}
stage_compare() {
  local pids=()
  for d in "$PACK"/prog/*; do [ -x "$d/build/train" ] || { build_program "$d" & pids+=($!); }; done
  [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
  for d in "$PACK"/prog/*; do
    local n; n=$(basename "$d")
    echo "-- $n: $(sed -n 5,6p "$d/train.cpp" | tr '\n' ' ')"
    timeout "$(left 120)" "$d/build/train" --steps 3 --load "$PACK/ref/$n/init" --save "build-node/w/$n-cuda3" 2>&1 | tail -4
    python3 bench/gpu/compare_weights.py "$PACK/ref/$n/cpu3/latest" "build-node/w/$n-cuda3/latest"
    timeout "$(left 120)" "$d/build/train" --steps 2 --debug-poison 2>&1 | tail -2; echo "   --debug-poison exit ${PIPESTATUS[0]}"
  done
}
stage_torch() {
  local pairs=${TORCH:-"vgg16 256 resnet50 128"}
  set -- $pairs
  while [ $# -ge 2 ]; do
    local model=$1 batch=$2; shift 2
    timeout "$(left 300)" python3 bench/gpu/torch_step.py --model "$model" --batch "$batch" --steps 10 --warmup 3 \
      --math "${TORCH_MATH:-fp32}"
  done
}
stage_profiles() {
  local m b
  for m in ${PROFILES:-resnet50 vgg16 resnet152 densenet121 resnet18 resnet34 resnet101 vgg19 googlenet alexnet \
      cifar_small cifar_resnet cifar_vgg cifar_mobilenet cifar_inception cifar_densenet every_vision_op}; do
    [ "$(left 100000)" -gt 20 ] && [ $((SECONDS - T0)) -lt "${PROFILE_UNTIL:-$LIMIT}" ] ||
      { echo "-- $m: no time left"; continue; }
    b=$(sed -n 's/^batch: *\([0-9]*\).*/\1/p' "$PACK/models/$m.yaml")
    local sbs=$b; [ "$b" -ge 4 ] && sbs="$((b / 4)),$((b / 2)),$b"
    echo "-- profile $m at sub-batches $sbs $(date +%T)"
    $MPLAN profile "$PACK/models/$m.yaml" --backend cuda --jobs "build-node/$m-jobs.json" --sub-batches "$sbs" --repeats 2 > /dev/null || continue
    timeout "$(left 300)" $P "build-node/$m-jobs.json" -o "build-node/res/$m-times.json" --quiet || { echo "   profiler exit $?"; continue; }
    $MPLAN profile "$PACK/models/$m.yaml" --merge "build-node/res/$m-times.json" --sub-batches "$sbs" -o "build-node/res/$m-profile.json"
  done
  save
}
run_program() {  # folder name
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 50 > "build-node/res/$2-mem.csv" &
  local smi=$!
  # The last step's copies and waits measured (runtime/timeline.h), set beside the plan.
  timeout "$(left 300)" "$1/build/train" --steps 8 --timeline "build-node/res/$2-timeline.csv" \
    > "build-node/res/$2-train.txt" 2>&1
  kill $smi; wait $smi 2>/dev/null
  grep -vE "^step [2-7]:" "build-node/res/$2-train.txt" | grep -v "^mplan runtime:"
  echo "   algorithm substitutions at run time: $(grep -c '^mplan runtime:' "build-node/res/$2-train.txt")"
  [ -f "$1/plan.json" ] && [ -f "build-node/res/$2-timeline.csv" ] &&
    python3 bench/gpu/compare_timeline.py "$1/plan.json" "build-node/res/$2-timeline.csv" --top 4 \
      > "build-node/res/$2-timeline.txt" 2>&1 && head -12 "build-node/res/$2-timeline.txt" ||
    echo "   compare_timeline failed: see build-node/res/$2-timeline.txt"
  echo "   nvidia-smi, process memory at most: $(awk -F, '{print $2}' "build-node/res/$2-mem.csv" | sort -n | tail -1) MiB"
}
stage_programs() {
  local d pids=()
  for d in "$PACK"/extra/*/; do [ -d "$d" ] || continue; build_program "${d%/}" & pids+=($!); done
  [ ${#pids[@]} -gt 0 ] || { echo "no program folders under $PACK/extra"; return; }
  wait "${pids[@]}"
  for d in "$PACK"/extra/*/; do
    [ -d "$d" ] || continue
    d=${d%/}; echo "-- $(basename "$d"): $(sed -n 4,6p "$d/train.cpp" | tr '\n' ' ')"
    run_program "$d" "$(basename "$d")"
  done
  save
}
# Plans model $1 with profile $2 into build-node/p/$3 (more compile flags
# after) and starts its build in the background: the caller's names and pids
# arrays get the plan's name and the build's pid.
plan_and_build() {
  local m=$1 profile=$2 n=$3
  shift 3
  $MPLAN compile "$PACK/models/$m.yaml" --profile "$profile" "$@" --target cuda -o "build-node/p/$n" \
    > "build-node/res/$n-compile.txt" 2>&1 || { tail -3 "build-node/res/$n-compile.txt"; return 1; }
  cp "build-node/p/$n/plan.json" "build-node/res/$n-plan.json"
  build_program "build-node/p/$n" & pids+=($!)
  names+=("$n")
}
stage_coldcache() {
  local m b flavour
  for m in ${COLD_MODELS:-googlenet resnet50}; do
    b=$(sed -n 's/^batch: *\([0-9]*\).*/\1/p' "$PACK/models/$m.yaml")
    $MPLAN profile "$PACK/models/$m.yaml" --backend cuda --jobs "build-node/$m-cold-jobs.json" --sub-batches "$b" \
      --repeats 5 > /dev/null || continue
    local names=() pids=()
    for flavour in warm cold; do
      local flags=() n=$m-$flavour
      [ $flavour = cold ] && flags=(--cold-cache 512)
      echo "-- profile $m at $b, $flavour $(date +%T)"
      timeout "$(left 300)" $P "build-node/$m-cold-jobs.json" -o "build-node/res/$n-times.json" --quiet "${flags[@]}" ||
        { echo "   profiler exit $?"; continue; }
      $MPLAN profile "$PACK/models/$m.yaml" --merge "build-node/res/$n-times.json" --sub-batches "$b" \
        -o "build-node/res/$n-profile.json" > /dev/null || continue
      plan_and_build "$m" "build-node/res/$n-profile.json" "$n" --budget "${COLD_BUDGET:-70GiB}"
    done
    [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
    for n in "${names[@]}"; do
      echo "-- $n: $(sed -n 6p "build-node/p/$n/train.cpp")"
      run_program "build-node/p/$n" "$n"
    done
  done
  save
}
profile_and_plan() {  # model sub-batches repeats budget[:sub-batch]...
  local m=$1 sbs=$2 reps=$3; shift 3
  echo "-- profile $m at sub-batches $sbs ($reps repeats) $(date +%T)"
  $MPLAN profile "$PACK/models/$m.yaml" --backend cuda --jobs "build-node/$m-jobs.json" --sub-batches "$sbs" --repeats "$reps" > /dev/null || return
  timeout "$(left 1200)" $P "build-node/$m-jobs.json" -o "build-node/res/$m-times.json" --quiet || { echo "profiler exit $?"; save; return; }
  $MPLAN profile "$PACK/models/$m.yaml" --merge "build-node/res/$m-times.json" --sub-batches "$sbs" -o "build-node/res/$m-profile.json" || { save; return; }
  save
  local names=() pids=()
  for spec in "$@"; do
    local budget=${spec%%:*} extra=() n=$m-${spec//:/-sb}
    [ "$budget" != "$spec" ] && extra=(--sub-batch "${spec#*:}")
    plan_and_build "$m" "build-node/res/$m-profile.json" "$n" --budget "$budget" "${extra[@]}"
  done
  [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
  for n in "${names[@]}"; do
    echo "-- $n: $(sed -n 4,6p "build-node/p/$n/train.cpp" | tr '\n' ' ')"
    run_program "build-node/p/$n" "$n"
    if [ "${n%-sb*}" != "$n" ] && [ "${POISON:-1}" = 1 ]; then  # the offload plan at the full batch: every freed or dropped block poisoned
      timeout "$(left 120)" "build-node/p/$n/build/train" --steps 3 --debug-poison > "build-node/res/$n-poison.txt" 2>&1
      echo "   --debug-poison, 3 steps: exit $? ($(grep -E '^step 3' "build-node/res/$n-poison.txt"))"
    fi
  done
  save
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for stage in "${stages[@]}"; do
  echo "== $stage $(date +%T)"
  case $stage in
    build) stage_build || exit 1 ;;
    tests) stage_tests ;;
    compare) stage_compare ;;
    torch) stage_torch ;;
    profiles) stage_profiles ;;
    programs) stage_programs ;;
    coldcache) stage_coldcache ;;
    probe) timeout "$(left 120)" "$PACK/bin/copy_probe" ;;
    # TF32 on: NVIDIA_TF32_OVERRIDE=0 (node_env.sh) would turn it off under the libraries.
    tf32) (unset NVIDIA_TF32_OVERRIDE; profile_and_plan resnet50_tf32 128 3 70GiB 6GiB;
           TORCH="resnet50 128" TORCH_MATH=tf32 stage_torch) ;;
    vit) profile_and_plan vit_b_16 16,32,64 2 70GiB 4GiB; TORCH="vit_b_16 64" stage_torch ;;
    bf16) profile_and_plan resnet50_bf16 64,128,256 2 70GiB 6GiB; profile_and_plan vit_b_16_bf16 16,32,64 2 70GiB 3GiB
          TORCH="resnet50 256 vit_b_16 64" TORCH_MATH=bf16 stage_torch ;;
    # Budgets: unlimited, one that needs offloading at the full batch, two that need sub-batches.
    resnet50) profile_and_plan resnet50 32,64,128 3 70GiB 7GiB:128 6GiB 2GiB ;;
    vgg16) profile_and_plan vgg16 64,128,256 2 70GiB 12GiB:256 10GiB 5GiB ;;
    alexnet) profile_and_plan alexnet pow2 3 40GiB 1GiB ;;
    cifar_small) profile_and_plan cifar_small pow2 5 1GiB 6MiB ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
echo "elapsed $((SECONDS - T0)) s"
