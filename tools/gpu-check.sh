#!/usr/bin/env bash
# gpu-check.sh [OUT_DIR] — the one prepared check of the CUDA backend on a machine with an
# NVIDIA GPU. Builds ampx there with its own nvcc and cmake (tests too when Criterion is
# installed), then records, into OUT_DIR/gpu-check.md (default: build-gpu/gpu-check), everything
# docs/GPU.md needs:
#   - the date, the device (nvidia-smi), the driver and toolkit versions;
#   - `ampx backends` (cuda must be available, with its compute capability and memory);
#   - `ampx conformance --backend cuda` (the full sweep) and the GEMM op again with
#     gemm=native, so the native kernel is judged on every dtype combination too;
#   - the CUDA test suites (ctest -R cuda) when the tests were built, GEMM_FP8 on the native
#     kernel, and the fp8 golden test (Transformer Engine's update) on cuda;
#   - `ampx train models/mlp.json --backend cuda`, gpt_tiny under policy.fp8, and mlp.json on
#     2 ranks with mpirun (gradients over NCCL) when Open MPI is installed;
#   - `ampx bench gemm` for bf16 and f32 at 4096 and 8192;
#   - tools/bench/cuda_peer.cu: the plugin's GEMM (cuBLAS path and native kernel) against
#     cublasGemmEx called directly, side by side in one process, medians of 5 trials;
#   - PyTorch's torch.matmul at the same sizes when python3 has torch with CUDA.
# Budget: a few minutes on a 16-core machine with an H100/H200 (the build dominates).
# Every step runs even when an earlier one fails (each within LIMIT seconds, default 300;
# exit 124 means it ran out); the exit status is 1 if any failed.
set -u
cd "$(dirname "$0")/.."
build=${AMPX_GPU_BUILD_DIR:-build-gpu}
out=${1:-$build/gpu-check}
mkdir -p "$out"
md="$out/gpu-check.md"
log="$out/gpu-check.log"
: >"$log"
jobs=$(nproc 2>/dev/null || echo 4)
fails=0

say() { echo "$*" | tee -a "$md"; }
# step NAME CMD...: runs CMD, its output into the log and (fenced) into the report
step() {
  local name=$1; shift
  echo "== $name: $*" >>"$log"
  local t0=$SECONDS
  # a hung kernel must not eat the machine's budget: each step has a limit (exit 124)
  timeout -k 10 "${LIMIT:-300}" "$@" >"$out/step.txt" 2>&1
  local rc=$?
  cat "$out/step.txt" >>"$log"
  {
    echo
    echo "### $name (exit $rc, $((SECONDS - t0)) s)"
    echo
    echo '```'
    echo "\$ $*"
    tail -n "${TAIL:-40}" "$out/step.txt"
    echo '```'
  } >>"$md"
  echo "$name: exit $rc ($((SECONDS - t0)) s)"
  [ $rc -eq 0 ] || fails=$((fails + 1))
  return $rc
}

: >"$md"
say "# CUDA backend check, $(date -u '+%Y-%m-%d %H:%M UTC')"
say ""
say "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
if command -v nvidia-smi >/dev/null; then
  say "- device: $(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -1)"
else
  say "- device: nvidia-smi not found"
fi
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
say "- toolkit: $("$nvcc" --version 2>/dev/null | tail -1)"
say "- host: $(nproc) cores, $(uname -m)"

# ---- build
have_criterion=OFF
pkg-config --exists criterion 2>/dev/null && have_criterion=ON
TAIL=15 step "configure" cmake -S . -B "$build" -DAMPX_OPENCL=OFF \
  -DAMPX_BUILD_TESTS=$have_criterion -DAMPX_WERROR=OFF
TAIL=15 step "build" cmake --build "$build" -j "$jobs"
ampx="$build/bin/ampx"
plugin="$build/lib/ampx/libampx-cuda.so"
if [ ! -x "$ampx" ] || [ ! -f "$plugin" ]; then
  say ""
  say "build failed: no $ampx or $plugin; see $log"
  exit 1
fi

# ---- the backend, conformance, tests
step "backends" "$ampx" backends
TAIL=60 step "conformance (full sweep)" "$ampx" conformance --backend cuda
"$ampx" conformance --backend cuda --json >"$out/conformance.json" 2>/dev/null
TAIL=20 step "conformance, GEMM on the native kernel" \
  "$ampx" conformance --backend cuda --op gemm --backend-opt gemm=native
# fp8 (ABI 1.7): GEMM_FP8 on the native kernel too (the default hands aligned TN layouts to
# cuBLASLt on sm_89+), and Transformer Engine's update replayed bit for bit
TAIL=20 step "conformance, GEMM_FP8 on the native kernel" \
  "$ampx" conformance --backend cuda --op gemm_fp8 --backend-opt gemm=native
if [ "$have_criterion" = ON ]; then
  TAIL=30 step "ctest -R cuda" ctest --test-dir "$build" -R cuda --output-on-failure
  TAIL=10 step "fp8 golden (Transformer Engine's update)" env AMPX_CONFORMANCE_BACKENDS=cuda \
    "$build/bin/test_fp8_golden"
fi

# ---- training
if "$ampx" train --help >/dev/null 2>&1; then
  TAIL=30 step "train models/mlp.json" "$ampx" train models/mlp.json --backend cuda
  echo '{"policy": {"preset": "mixed_bf16", "fp8": {}}}' >"$out/fp8_policy.json"
  TAIL=12 step "train models/gpt_tiny.json under policy.fp8" "$ampx" train models/gpt_tiny.json \
    --backend cuda --steps 300 --policy "$out/fp8_policy.json"
  # data-parallel: 2 ranks on the one GPU (or two), gradients over NCCL (docs/DISTRIBUTED.md);
  # the summary must say "NCCL" and reach the single-process accuracy
  if command -v mpirun >/dev/null; then
    TAIL=12 step "mpirun -np 2 train models/mlp.json (NCCL)" env OMPI_ALLOW_RUN_AS_ROOT=1 \
      OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 "$ampx" train models/mlp.json \
      --backend cuda --batch 32
    grep -q "ms, NCCL)" "$out/step.txt" || { say "(the gradients did not take the NCCL path)"; fails=$((fails + 1)); }
  else
    say "### mpirun -np 2 (NCCL): skipped (no mpirun; Debian: openmpi-bin libopenmpi-dev)"
  fi
else
  say ""
  say "### train: skipped (\`ampx train\` does not exist in this commit)"
fi

# ---- GEMM rates
if "$ampx" bench --help >/dev/null 2>&1; then
  for dt in bf16 f32; do
    for n in 4096 8192; do
      TAIL=20 step "ampx bench gemm $dt $n" "$ampx" bench gemm --backend cuda --dtype "$dt" \
        --m "$n" --n "$n" --k "$n"
    done
  done
else
  say ""
  say "### ampx bench: skipped (\`ampx bench\` does not exist in this commit; cuda_peer below times the plugin's GEMM itself)"
fi
peer="$out/cuda_peer"
cudalib=$(dirname "$(dirname "$nvcc")")/lib64
if step "build cuda_peer" "$nvcc" -O2 -std=c++17 -Icore/include -o "$peer" \
  tools/bench/cuda_peer.cu -L"$cudalib" -lcublas -ldl; then
  LD_LIBRARY_PATH="$cudalib:${LD_LIBRARY_PATH:-}" TAIL=20 \
    step "GEMM: plugin vs cuBLAS, same process" "$peer" "$plugin" 4096 8192
fi
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  cat >"$out/torch_peer.py" <<'PY'
import statistics, time, torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
print("| dtype | n | torch.matmul TFLOP/s |\n|---|---|---|")
for n in (4096, 8192):
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float32, "f32")):
        a = torch.randn(n, n, device="cuda", dtype=dt); b = torch.randn(n, n, device="cuda", dtype=dt)
        reps = 20 if n <= 4096 else 5
        torch.matmul(a, b); torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(reps): torch.matmul(a, b)
            torch.cuda.synchronize(); ts.append((time.perf_counter() - t0) / reps)
        print(f"| {name} | {n} | {2 * n**3 / statistics.median(ts) / 1e12:.1f} |")
PY
  TAIL=10 step "GEMM: PyTorch torch.matmul" python3 "$out/torch_peer.py"
else
  say ""
  say "### PyTorch: skipped (no torch with CUDA in python3)"
fi

rm -f "$out/step.txt"
say ""
say "failed steps: $fails (full output: $log)"
[ $fails -eq 0 ]
