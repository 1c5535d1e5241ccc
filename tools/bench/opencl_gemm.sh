#!/usr/bin/env bash
# opencl_gemm.sh [BUILD_DIR] [-- opencl_gemm args] — builds tools/bench/opencl_gemm.c against
# the build tree's libampx and the system's CLBlast, and runs it: the OpenCL backend's
# f32, bf16 and f16 GEMM next to CLBlast SGEMM on the same device (medians, ratios).
# Example: bash tools/bench/opencl_gemm.sh build -- --sizes 256,512,1024 --reps 7 --markdown
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) # absolute: it goes into the RUNPATH
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
[ -f "$build/lib/libampx.so" ] || { echo "opencl_gemm.sh: no libampx in $build (build first)" >&2; exit 1; }
[ -f "$build/lib/ampx/libampx-opencl.so" ] || { echo "opencl_gemm.sh: no OpenCL backend in $build" >&2; exit 1; }
out=$build/bin/opencl_gemm_bench
cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I"$root/core/include" "$root/tools/bench/opencl_gemm.c" \
  -o "$out" -L"$build/lib" -lampx -Wl,-rpath,"$build/lib" $(pkg-config --cflags --libs clblast OpenCL)
AMPX_PLUGIN_PATH=$build/lib/ampx exec "$out" "$@"
