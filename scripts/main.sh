#!/usr/bin/env bash
# The main job on the default (no GPU needed): install what is missing, build
# mplan, then compile the small CIFAR-size model under an 8 MiB budget with a
# cost profile measured on this CPU, build the generated program and train it
# for a few steps on the CPU backend. This is the README's first command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${jobs}" --target mplan mplan_runtime

model=examples/models/cifar_small.yaml
out=out/cifar_small
# The profile lives beside the output folder: compile replaces that folder as a whole.
profile=out/cifar_small.profile.json
mkdir -p out
set -x
./build/cli/mplan bounds "$model" --device k40
./build/cli/mplan profile "$model" --backend cpu -o "$profile"
./build/cli/mplan compile "$model" --budget 8MiB --profile "$profile" -o "$out" --build
./build/cli/mplan inspect "$out/plan.json"
"$out/build/train" --steps 10 --lr 0.05 --seed 1
