#!/usr/bin/env bash
# Provides Intel MKL for candle's `mkl` feature (candle-core/mkl, candle-nn/mkl; intel-mkl-src
# config "mkl-static-lp64-iomp") from PyPI wheels, with LLVM's OpenMP runtime (Debian libomp,
# Apache-2.0) standing in for Intel's libiomp5, whose wheel carries a restrictive EULA.
#
# Usage:  source .ci/mkl-from-pypi.sh [DEST]    (exports MKLROOT; DEST default $HOME/.cache/mkl-pypi)
#         cargo build --release --features mkl
#         run with OMP_NUM_THREADS and RAYON_NUM_THREADS set to the core count.
# Measured here (2 cores, AVX-512): f32 matmul 1024^3 at 301-360 GFLOP/s with MKL vs 181-205 with
# candle's default gemm (PyTorch 2.15: 307-327); a transformer-block op mix 1.9x faster. Builds in
# about 2.5 minutes from scratch; MKLROOT takes 642 MB. The binary links MKL statically: ship
# MKL-LICENSE.txt (Intel Simplified Software License) with anything redistributed, and it needs
# libomp5-14 at run time.
# If MKL is not found, the build fails only at the final link with undefined sgemm_/vsExp symbols.
MKL_VER=${MKL_VER:-2026.2.0}
MKL_DEST=${1:-$HOME/.cache/mkl-pypi}
if [ ! -e "$MKL_DEST/root/lib/libmkl_core.a" ]; then
( set -euo pipefail
  mkdir -p "$MKL_DEST/wheels" "$MKL_DEST/root/lib" "$MKL_DEST/root/include"
  cat > "$MKL_DEST/wheels/req.txt" <<REQ
mkl-static==$MKL_VER --hash=sha256:090e439bf202b45579c75d2ba50ff7ead05752d553a06aba79c3ed2b5247921b
mkl-include==$MKL_VER --hash=sha256:889cc72057a1671fee1e9a8beb2fc4e0d222ba78c08b6d69584dae03fbec4822
REQ
  python3 -m pip download -q --no-deps --only-binary=:all: --require-hashes \
    --platform manylinux_2_28_x86_64 --python-version 3.11 -r "$MKL_DEST/wheels/req.txt" -d "$MKL_DEST/wheels"
  cd "$MKL_DEST/wheels"
  # intel-mkl-src looks under $MKLROOT (recursively, not through folder symlinks) for mkl.h,
  # mkl_version.h, libmkl_intel_lp64.a + libmkl_intel_thread.a + libmkl_core.a in one folder, libiomp5.{a,so}.
  unzip -q -o -j mkl_static-*.whl '*/lib/libmkl_intel_lp64.a' '*/lib/libmkl_intel_thread.a' '*/lib/libmkl_core.a' -d "$MKL_DEST/root/lib"
  unzip -q -o -j mkl_include-*.whl '*/include/mkl.h' '*/include/mkl_version.h' -d "$MKL_DEST/root/include"
  unzip -q -o -j mkl_static-*.whl '*.dist-info/LICENSE.txt' -d "$MKL_DEST/root" && mv -f "$MKL_DEST/root/LICENSE.txt" "$MKL_DEST/root/MKL-LICENSE.txt"
  dpkg -s libomp-14-dev >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends libomp-14-dev; }
  ln -sf /usr/lib/x86_64-linux-gnu/libiomp5.so "$MKL_DEST/root/lib/libiomp5.so"
  rm -rf "$MKL_DEST/wheels"
) || { echo "mkl-from-pypi: could not assemble MKLROOT" >&2; return 1 2>/dev/null || exit 1; }
fi
export MKLROOT="$MKL_DEST/root"
