#!/usr/bin/env bash
# hostile.sh AMPX SRC BUILD — ampx against hostile input and faults (issue: hostile input):
# checkpoints as untrusted input, search paths, readers, write errors, atomic files,
# resource limits, misbehaving plugins. Each case: one clear line and a non-zero exit,
# never a crash, nothing on disk lost.
set -uo pipefail
ampx=$(realpath "$1")
src=$2
build=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
mlp=$src/models/mlp.json
: "${AMPX_TEST_INNER_PLUGIN:=$build/lib/ampx/libampx-cpu.so}"
export AMPX_TEST_INNER_PLUGIN

# expect_error NAME PATTERN CMD...: exit status 1, one line on stderr matching PATTERN.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc -eq 1 ] || fail "$name: exit $rc, expected 1 ($(head -c 600 "$work/err"))"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$name: expected one line, got: $(head -c 600 "$work/err")"
  grep -Eq -- "$pattern" "$work/err" || fail "$name: '$(head -c 600 "$work/err")' does not match '$pattern'"
}

# ---- 2. checkpoints are untrusted input
"$ampx" train "$mlp" --steps 6 --checkpoint "$work/good" --quiet >/dev/null 2>"$work/err" ||
  fail "train for a checkpoint: $(cat "$work/err")"
ck() { # ck MUTATION PATTERN: the mutated checkpoint is refused by eval and by --resume
  python3 "$src/tests/hostile/ckpt_mutate.py" "$work/good" "$work/bad_$1" "$1" || fail "mutate $1"
  expect_error "checkpoint $1 (eval)" "bad_$1: $2" "$ampx" eval "$mlp" --checkpoint "$work/bad_$1"
  expect_error "checkpoint $1 (resume)" "bad_$1: $2" "$ampx" train "$mlp" --steps 8 --quiet \
    --resume "$work/bad_$1"
}
ck step_negative '__metadata__\.step "-5" is not an integer in \[0, '
ck step_text '__metadata__\.step "12abc" is not an integer'
ck step_huge '__metadata__\.step "99999999999999999999" is not an integer'
ck scale_nan 'ampx\.scalars: scale is nan, expected a finite number > 0'
ck scale_zero 'ampx\.scalars: scale is 0, expected a finite number > 0'
ck scale_negative 'ampx\.scalars: scale is -4, expected'
ck skipped_negative 'ampx\.scalars: skipped_steps is -1, expected an integer in \[0, '
ck growth_negative 'ampx\.scalars: growth_tracker is -3'
ck stop_reason 'ampx\.scalars: stop_reason is 1: the run that wrote it stopped'
ck adam_v_negative 'tensor "ampx\.adam_v\.fc1\.weight" element 3 is -1, expected a finite number >= 0'
ck weight_nan 'tensor "fc2\.bias" element 0 is nan, expected a finite number'
ck weight_inf 'tensor "fc1\.weight" element 7 is -inf'
ck offsets_fraction 'tensor "fc1\.bias": data_offsets is not \[begin, end\] with integers'
ck offsets_overlap 'tensor "fc1\.bias": data_offsets overlap another tensor'
ck offsets_gap 'the tensors cover [0-9]+ bytes of a [0-9]+-byte data section'
ck offsets_huge 'bytes [0-9]+\.\.[0-9]+ of the data section belong to no tensor'
ck extra_tensor 'tensor "stowaway" is not part of model "mlp"'
ck meta_number '__metadata__\.seed is a number, expected a string'
ck meta_disagrees '__metadata__\.applied_steps [0-9]+ disagrees with the scalars block'
ck dtype_unknown 'tensor "fc1\.bias": dtype is missing or not a safetensors dtype'
ck shape_negative 'tensor "fc1\.bias": shape\[0\] is not a non-negative integer'
expect_error "checkpoint /dev/zero" '/dev/zero: not a regular file' "$ampx" eval "$mlp" --checkpoint /dev/zero
"$ampx" eval "$mlp" --checkpoint "$work/good" >/dev/null 2>"$work/err" || fail "the good checkpoint: $(cat "$work/err")"

# ---- 1. search paths: no ELF built or installed searches the current directory
runpath_ok() { # runpath_ok FILE: every RUNPATH/RPATH entry absolute or $ORIGIN-relative
  local entries
  entries=$(readelf -d "$1" 2>/dev/null | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p')
  [ -z "$entries" ] && return 0
  local IFS=:
  # a trailing ':' is an empty entry too; 'read -a' drops it, so test the string itself
  case "$entries" in *: | :* | *::*) echo "$1: empty entry in '$entries'"; return 1 ;; esac
  for e in $entries; do
    case "$e" in
      /*) ;;
      '$ORIGIN' | '$ORIGIN/'* | '${ORIGIN}' | '${ORIGIN}/'*) ;;
      *) echo "$1: relative entry '$e' in '$entries'"; return 1 ;;
    esac
  done
}
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 || fail "cmake --install: $(tail -3 "$work/install.log")"
n_elf=0
while IFS= read -r -d '' f; do
  head -c 4 "$f" 2>/dev/null | grep -q "ELF" || continue
  n_elf=$((n_elf + 1))
  runpath_ok "$f" >>"$work/runpath" || fail "search path: $(tail -1 "$work/runpath")"
done < <(find "$build/bin" "$build/lib" "$build/tests" "$work/prefix" -type f -print0)
[ $n_elf -ge 5 ] || fail "search path: only $n_elf ELF files found under $build and the install"
mkdir -p "$work/planted"
cat >"$work/planted.c" <<'C'
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    write(2, "PLANTED LIBRARY LOADED\n", 23);
    _exit(42);
}
C
for lib in libm.so.6 libcjson.so.1 libampx.so.0 libdl.so.2 libOpenCL.so.1 libpthread.so.0 libclblast.so.1; do
  cc -shared -fPIC -o "$work/planted/$lib" "$work/planted.c" || fail "cannot build a planted $lib"
done
for bin in "$ampx" "$work/prefix/bin/ampx"; do
  (cd "$work/planted" && "$bin" --version) >"$work/out" 2>&1
  rc=$?
  [ $rc -eq 0 ] && grep -q "^ampx " "$work/out" ||
    fail "search path: $bin --version run from a folder of planted libraries: exit $rc, $(head -c 300 "$work/out")"
  (cd "$work/planted" && "$bin" backends) >"$work/out" 2>&1
  grep -q PLANTED "$work/out" && fail "search path: $bin backends loaded a planted library"
done

echo "hostile: $fails failure(s)"
test $fails -eq 0
