#!/usr/bin/env bash
# Prepares, on a workstation with mplan built, the folder a GPU node needs to run
# node_validate.sh when it has CUDA, cuDNN, CMake and PyTorch but none of
# mplan's planning dependencies (yaml-cpp, GLPK, Boost, fmt) and no
# GoogleTest or OpenBLAS (docs/gpu-validation.md, "Running it all on a node").
#
#   bench/gpu/pack.sh BUILD_DIR OUT_DIR
#
# OUT_DIR gets: mplan.tar.xz (the mplan binary and the shared libraries it
# links, for planning on the node), deps/ (GoogleTest's headers and static
# libraries, cblas.h and the part of the static OpenBLAS that cblas_sgemm
# needs, xz-compressed: the GPU tests' CPU reference), models/ (the example
# models, with `math: fp32`: TF32 off, as PyTorch's reference runs), and, where BUILD_DIR has the CUDA backend, prebuilt bin/
# (the kernel profiler, the GPU tests), lib/ (the CUDA runtime's static
# libraries) and the compare programs' build/train, so that the node builds
# only the programs planned from its own profiles (node_validate.sh uses them
# where every shared library they link is found there, and builds otherwise).
# Everything is x86-64 and needs glibc >= this machine's; the binaries also
# need the node's CUDA and cuDNN majors to be this machine's.
set -euo pipefail
build=${1:?usage: pack.sh BUILD_DIR OUT_DIR}; out=${2:?usage: pack.sh BUILD_DIR OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
mplan="$build/cli/mplan"
[ -x "$mplan" ] || { echo "pack.sh: no mplan at $mplan: build mplan first" >&2; exit 2; }
libdir=/usr/lib/x86_64-linux-gnu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Brought up to date first: a runtime library older than runtime/program.h
# (which the node's programs compile against) made every program segfault on
# the H200.
cmake --build "$build" > "$tmp/build.txt" 2>&1 || { tail -30 "$tmp/build.txt" >&2; echo "pack.sh: building $build failed" >&2; exit 2; }
mkdir -p "$out/deps/include" "$out/deps/lib" "$out/models" "$tmp/mp/lib"

strip --strip-debug -o "$tmp/mp/mplan" "$mplan"  # RelWithDebInfo: the debug information is most of it
ldd "$mplan" | awk '/=> \// {print $3}' | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$tmp/mp/lib/"; done
tar cJf "$out/mplan.tar.xz" -C "$tmp/mp" .

# Only the objects cblas_sgemm pulls from the static OpenBLAS (it holds every
# CPU's kernels: 58 MB whole, 1.4 MB compressed so).
ld -r -u cblas_sgemm "$libdir/libopenblas.a" -o "$tmp/blas.o"
strip --strip-debug "$tmp/blas.o"
rm -f "$out/deps/lib/libopenblas.a" "$out/deps/lib/libopenblas.a.xz"
ar rcs "$out/deps/lib/libopenblas.a" "$tmp/blas.o" && xz -9 "$out/deps/lib/libopenblas.a"
cp /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h \
  "$out/deps/include/"
cp -r /usr/include/gtest "$out/deps/include/"
cp "$libdir/libgtest.a" "$libdir/libgtest_main.a" "$out/deps/lib/"

# The prebuilt binaries, without their debug information.
rm -rf "$out/bin" "$out/lib"
if [ -f "$build/runtime/cuda/libmplan_runtime_cuda.a" ]; then
  mkdir -p "$out/bin" "$out/lib"
  strip --strip-debug -o "$out/bin/mplan_kernel_profiler_cuda" "$build/profiler/kernel_profiler/mplan_kernel_profiler_cuda"
  strip --strip-debug -o "$out/bin/gpu_tests" "$build/tests/gpu/gpu_tests"
  strip --strip-debug -o "$out/lib/libmplan_runtime_cuda.a" "$build/runtime/cuda/libmplan_runtime_cuda.a"
  strip --strip-debug -o "$out/lib/libmplan_runtime_core.a" "$build/runtime/libmplan_runtime_core.a"
  "${CUDACXX:-/usr/local/cuda/bin/nvcc}" -O2 -arch=sm_90 -o "$out/bin/copy_probe" bench/gpu/copy_probe.cu
fi

for m in cifar_small every_op alexnet vgg16 resnet50 resnet18 resnet34 resnet101 resnet152 vgg19 googlenet \
    densenet121 cifar_resnet cifar_vgg cifar_mobilenet cifar_inception cifar_densenet every_vision_op vit_b_16; do
  sed 's/^classes:/math: fp32\nclasses:/' "$root/examples/models/$m.yaml" > "$out/models/$m.yaml"
done
# ResNet-50 on TF32 tensor cores (node_validate.sh's tf32 stage).
sed 's/^classes:/math: tf32\nclasses:/' "$root/examples/models/resnet50.yaml" > "$out/models/resnet50_tf32.yaml"
# ResNet-50 at batch 256 and ViT-B/16 in bf16 (node_validate.sh's bf16 stage).
sed 's/^classes:/precision: bf16\nclasses:/; s/^batch: .*/batch: 256/' "$root/examples/models/resnet50.yaml" \
  > "$out/models/resnet50_bf16.yaml"
sed 's/^classes:/precision: bf16\nclasses:/' "$root/examples/models/vit_b_16.yaml" > "$out/models/vit_b_16_bf16.yaml"

# The CUDA-vs-CPU comparison (docs/gpu-validation.md, figure 1): one plan per
# case, generated for both targets; the CPU program runs here from the same
# initial weights, its weights after 3 steps are the reference.
cases=("cifar_small 1GiB" "cifar_small 6MiB" "every_op 64MiB" "every_op 64MiB --sub-batch 3")
rm -rf "$out/prog" "$out/ref"; mkdir -p "$out/prog" "$out/ref"
for c in "${cases[@]}"; do
  set -- $c; m=$1; b=$2; shift 2
  name="$m-$b${1:+-sb$2}"
  "$mplan" compile "$root/examples/models/$m.yaml" --budget "$b" "$@" --target cuda -o "$out/prog/$name" > /dev/null
  "$mplan" compile "$root/examples/models/$m.yaml" --budget "$b" "$@" --target cpu -o "$tmp/$name" > /dev/null
  cmake -S "$tmp/$name" -B "$tmp/$name/build" -DMPLAN_RUNTIME_LIBRARY="$build/runtime/libmplan_runtime.a" > /dev/null
  cmake --build "$tmp/$name/build" > /dev/null
  "$tmp/$name/build/train" --steps 0 --save "$out/ref/$name/init" > /dev/null
  "$tmp/$name/build/train" --steps 3 --load "$out/ref/$name/init" --save "$out/ref/$name/cpu3" > /dev/null
  rm -f "$out/prog/$name/trace.json" "$out/prog/$name/memory.svg"
  if [ -d "$out/lib" ]; then  # the CUDA program, built here; only its binary is kept
    cmake -S "$out/prog/$name" -B "$tmp/$name/build-cuda" -DMPLAN_RUNTIME_LIBRARY="$build/runtime/cuda/libmplan_runtime_cuda.a" > /dev/null
    cmake --build "$tmp/$name/build-cuda" > /dev/null
    mkdir -p "$out/prog/$name/build" && strip --strip-debug -o "$out/prog/$name/build/train" "$tmp/$name/build-cuda/train"
  fi
done
du -sh "$out"
