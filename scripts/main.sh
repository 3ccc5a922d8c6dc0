#!/usr/bin/env bash
# The main job on the default (no GPU needed): install what is missing, build
# mplan, and run it on an example model. This is the README's first command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target mplan
./build/cli/mplan bounds examples/models/vgg16.yaml
