#!/usr/bin/env bash
# fuzz.sh [SECONDS] — builds the libFuzzer harnesses of tests/fuzz (clang, ASan + UBSan) into
# build-fuzz/ and runs each for SECONDS (default 60) from its seed corpus, after replaying the
# inputs that once crashed (tests/fuzz/regressions/HARNESS/). Fails on any finding; a crash
# leaves its input in build-fuzz/artifacts/: add it to tests/fuzz/regressions/HARNESS/ with
# the fix. The corpus in the tree is read, never written: new inputs go to build-fuzz/corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
bash tools/deps.sh --fuzz
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
  clang -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null; then
  ver=$(clang -dumpversion | cut -d. -f1)
  echo "installing: libclang-rt-$ver-dev (libFuzzer)"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "libclang-rt-$ver-dev" >/dev/null
fi
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  CC=clang cmake -S . -B build-fuzz -DAMPX_FUZZ=ON -DAMPX_BUILD_TESTS=OFF -DAMPX_OPENCL=OFF \
    -DAMPX_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
fi
cmake --build build-fuzz -j "$(nproc)" --target ampx-fuzz >build-fuzz/build.log 2>&1 ||
  { tail -20 build-fuzz/build.log; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p build-fuzz/artifacts
failed=()
for h in json model policy checkpoint csv idx tokens tokenizer metrics trace set weights roundtrip windows \
  gemm_params; do
  bin=build-fuzz/bin/fuzz_$h
  reg=tests/fuzz/regressions/$h
  if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
    if ! "$bin" -runs=0 "$reg"/* >"build-fuzz/fuzz_$h.log" 2>&1; then
      echo "fuzz_$h: a regression input fails again (build-fuzz/fuzz_$h.log)"
      failed+=("$h")
      continue
    fi
  fi
  corpus=build-fuzz/corpus/$h
  mkdir -p "$corpus"
  seeds=(tests/fuzz/corpus/$h)
  case $h in json | model | roundtrip) seeds+=(models) ;; esac
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="build-fuzz/artifacts/$h-" "$corpus" "${seeds[@]}" \
    >"build-fuzz/fuzz_$h.log" 2>&1; then
    echo "fuzz_$h: ${seconds} s, no finding ($(grep -o 'cov: [0-9]*' "build-fuzz/fuzz_$h.log" | tail -1))"
  else
    echo "fuzz_$h: FINDING (build-fuzz/fuzz_$h.log, input in build-fuzz/artifacts/)"
    grep -m3 -E "ERROR|runtime error|SUMMARY" "build-fuzz/fuzz_$h.log" || true
    failed+=("$h")
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "fuzz: findings in ${failed[*]}"; exit 1; }
