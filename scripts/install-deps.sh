#!/usr/bin/env bash
# Installs what mplan needs from Debian's packages, and only what is missing.
# Idempotent: a second run installs nothing. Run as root (or with sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libyaml-cpp-dev libboost-graph-dev libglpk-dev glpk-utils libfmt-dev
  libgtest-dev nlohmann-json3-dev libcli11-dev libopenblas-dev
  # Image-file data of the generated program: JPEG and PNG decoding.
  libjpeg62-turbo-dev libpng-dev
  # The robustness defences: strace injects kills and write errors
  # into `mplan compile` and the generated program's checkpoints in the tests;
  # clang with its libFuzzer runtime builds the fuzz targets of bench/fuzz.sh.
  strace clang libclang-rt-14-dev
  # ONNX import.
  libonnx-dev libprotobuf-dev
  # Programs of several ranks (data parallel): MPI starts the ranks and sums the
  # CPU backend's gradients (runtime/mpi); mpirun runs them in the tests.
  libopenmpi-dev openmpi-bin
)
# PyTorch is the reference the end-to-end tests compare against (Debian's python3).
if [[ "${MPLAN_WITH_TORCH:-1}" == 1 ]]; then
  packages+=(python3-torch python3-numpy)
  # torchvision's models and torch.onnx.export's ONNX checker: the import tests (tests/import).
  packages+=(python3-torchvision python3-onnx)
  # tools/plot_log.py draws the metrics log's curves.
  packages+=(python3-matplotlib)
  # scikit-learn's handwritten digits: the data of the trained-to-accuracy test.
  packages+=(python3-sklearn)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: everything is installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) != 0 ]]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
