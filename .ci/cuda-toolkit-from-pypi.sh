#!/usr/bin/env bash
# Builds a CUDA 13 toolkit folder from PyPI wheels so that `cargo build --features cuda` (candle's
# CUDA kernels, cudarc) compiles and links on a machine with no GPU. Nothing built this way runs
# here: libcuda.so is a link-time stub; on a GPU machine the driver's own libcuda.so.1 is used.
#
# Usage:  source .ci/cuda-toolkit-from-pypi.sh   (exports CUDA_ROOT, PATH, ...)
#         cargo build --release --features cuda
# Env:    CUDA_PREFIX (default $HOME/.cache/cuda-pypi), CUDA_WHEELS_VERSION (default 13.0.2),
#         CUDA_COMPUTE_CAP (default 90: H100/H200).
# Measured here: wheels 647 MB download / 1.2 GB installed; candle-core+candle-nn with cuda build
# in about 11 minutes on 2 cores from an empty target dir (most of it candle's MoE kernels).
# Needs an R580+ driver where the result is run (CUDA 13).
CUDA_PREFIX=${CUDA_PREFIX:-$HOME/.cache/cuda-pypi}
export CUDA_ROOT=$CUDA_PREFIX/cuda
if [ ! -e "$CUDA_ROOT/lib/stubs/libcuda.so" ]; then
( set -euo pipefail
  CUDA_WHEELS_VERSION=${CUDA_WHEELS_VERSION:-13.0.2}
  VENV=$CUDA_PREFIX/venv
  mkdir -p "$CUDA_PREFIX"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --no-cache-dir "cuda-toolkit[nvcc,nvvm,crt,cudart,cccl,cublas,curand,nvrtc]==$CUDA_WHEELS_VERSION"
  W=$("$VENV/bin/python" -c 'import os,nvidia; print(os.path.join(list(nvidia.__path__)[0],"cu13"))')
  rm -rf "$CUDA_ROOT"; mkdir -p "$CUDA_ROOT/lib/stubs"
  ln -s "$W/bin" "$CUDA_ROOT/bin"; ln -s "$W/include" "$CUDA_ROOT/include"; ln -s "$W/nvvm" "$CUDA_ROOT/nvvm"
  ln -s lib "$CUDA_ROOT/lib64"
  for f in "$W"/lib/*; do ln -s "$f" "$CUDA_ROOT/lib/$(basename "$f")"; done
  # The wheels ship only versioned names; the linker wants the plain ones.
  for so in "$W"/lib/lib{cudart,cublas,cublasLt,curand,nvrtc}.so.*; do
    b=$(basename "$so"); ln -sf "$b" "$CUDA_ROOT/lib/${b%%.so.*}.so"; done
  # No libcuda.so exists on PyPI: a stub with every cu* symbol of cuda.h, for linking only.
  { grep -ohE '\bcu[A-Z][A-Za-z0-9_]*\b' "$W/include/cuda.h"
    grep -ohE 'PFN_cu[A-Z][A-Za-z0-9_]*' "$W/include/cudaProfilerTypedefs.h" | sed -E 's/^PFN_//; s/_v[0-9]+$//'
  } | sort -u | sed 's/.*/void &(void){}/' > "$CUDA_ROOT/lib/stubs/cuda_stub.c"
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$CUDA_ROOT/lib/stubs/libcuda.so" "$CUDA_ROOT/lib/stubs/cuda_stub.c"
) || { echo "cuda-toolkit-from-pypi: could not build the toolkit folder" >&2; return 1 2>/dev/null || exit 1; }
fi
export CUDA_HOME=$CUDA_ROOT
export PATH=$CUDA_ROOT/bin:$PATH
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
export CUDAFORGE_THREADS=${CUDAFORGE_THREADS:-$(nproc)}
