# Sourced on the GPU node by node_validate.sh: finds cuDNN (a system install, or
# PyTorch's nvidia-cudnn wheel) and cuBLAS, unpacks pack.sh's folder.
#   PACK: the folder pack.sh wrote (default .gpu)
PACK=${PACK:-.gpu}
R=$(pwd)
export NVIDIA_TF32_OVERRIDE=0
if [ -f /usr/include/cudnn.h ] || [ -f /usr/local/cuda/include/cudnn.h ]; then
  CUDNN_FLAGS=""
else
  CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0])")
  CUDNN_LIB=$(ls "$CUDNN_DIR"/lib/libcudnn.so.9 2>/dev/null || ls "$CUDNN_DIR"/lib/libcudnn.so* | head -1)
  export LD_LIBRARY_PATH=$CUDNN_DIR/lib:${LD_LIBRARY_PATH:-}
  CUDNN_FLAGS="-DCUDNN_INCLUDE_DIR=$CUDNN_DIR/include -DCUDNN_LIBRARY=$CUDNN_LIB"
fi
[ -f "$PACK/deps/lib/libopenblas.a" ] || xz -dk "$PACK/deps/lib/libopenblas.a.xz"
# cuBLAS of PyTorch's wheel too, where the system has none for the prebuilt binaries.
CUBLAS_DIR=$(python3 -c "import nvidia.cublas as m; print(list(m.__path__)[0])" 2>/dev/null) &&
  [ -d "$CUBLAS_DIR/lib" ] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$CUBLAS_DIR/lib
mkdir -p /tmp/mplan-pack && tar xJf "$PACK/mplan.tar.xz" -C /tmp/mplan-pack
# The planner's own shared libraries for mplan alone (not for PyTorch's python).
MPLAN="env LD_LIBRARY_PATH=/tmp/mplan-pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} /tmp/mplan-pack/mplan"
CMAKE_COMMON="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=native $CUDNN_FLAGS"
