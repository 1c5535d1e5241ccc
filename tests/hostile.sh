#!/usr/bin/env bash
# hostile.sh AMPX SRC BUILD — ampx against hostile input and faults (issue: hostile input):
# checkpoints as untrusted input, search paths, readers, write errors, atomic files,
# resource limits, misbehaving plugins. Each case: one clear line and a non-zero exit,
# never a crash, nothing on disk lost.
set -uo pipefail
ampx=$(realpath "$1")
src=$2
build=$3
plugins=${4:-$build/tests/plugins}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
mlp=$src/models/mlp.json
# an instrumented build reserves terabytes of address space: no address-space limit there
asan=false
# (grep reads all of ldd's output: with -q it could exit first and pipefail would see SIGPIPE)
ldd "$ampx" 2>/dev/null | grep libasan >/dev/null && asan=true
: "${AMPX_TEST_INNER_PLUGIN:=$build/lib/ampx/libampx-cpu.so}"
export AMPX_TEST_INNER_PLUGIN

# expect_error NAME PATTERN CMD...: exit status 1, one line on stderr matching PATTERN.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc -eq 1 ] || fail "$name: exit $rc, expected 1 ($(head -c 600 "$work/err"))"
  # run-health warnings ("warning: ...") may come first; the error itself is one line
  [ "$(grep -vc '^warning: ' "$work/err")" -eq 1 ] || fail "$name: expected one line, got: $(head -c 600 "$work/err")"
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
# llm.c checkpoints (--init-from W.bin): every header field is tests/train/llmc_cli.sh's; here
# what is no file, what claims sizes it does not hold, what the input cap refuses
llmc() { python3 "$src/tests/train/llmc_gen.py" "$@"; }
llmc model "$src/models/gpt2_124m.json" "$work/llmc.json" && llmc tokens "$work/tokens.bin" 2000 &&
  llmc ckpt "$work/llmc.bin" 3 || fail "llmc_gen.py"
mkfifo "$work/llmc_fifo.bin"
expect_error "llm.c FIFO" 'llmc_fifo\.bin: not a regular file \(a pipe\)' \
  timeout 20 "$ampx" train "$work/llmc.json" --init-from "$work/llmc_fifo.bin"
expect_error "llm.c /dev/zero" '/dev/zero: not a regular file' "$ampx" train "$work/llmc.json" --init-from /dev/zero
llmc ckpt "$work/llmc_huge.bin" 3 C=2147483647 L=2147483647
expect_error "llm.c huge sizes" 'header\[4\] \(num_layers\) is 2147483647, expected 2' \
  "$ampx" train "$work/llmc.json" --init-from "$work/llmc_huge.bin"
llmc ckpt "$work/llmc_neg.bin" 3 Vp=-1
expect_error "llm.c negative Vp" 'header\[7\] \(padded_vocab_size\) is -1' \
  "$ampx" train "$work/llmc.json" --init-from "$work/llmc_neg.bin"
expect_error "llm.c over the input cap" 'llmc\.bin: .* is larger than the 100000 bytes input limit' \
  "$ampx" train "$work/llmc.json" --init-from "$work/llmc.bin" --max-input-bytes 100000

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

# ---- 6. readers accept what they should not
csvmodel() { # csvmodel FILE.csv [FEATURES]: a model reading FILE.csv
  cat <<J
{ "name": "csv", "inputs": { "x": { "dtype": "f32", "shape": [${2:-2}] }, "y": { "dtype": "i32", "classes": 2 } },
  "layers": [ { "name": "out", "type": "dense", "units": 2 } ],
  "loss": { "type": "softmax_cross_entropy", "logits": "out", "labels": "y" },
  "optimizer": { "lr": 0.01 }, "data": { "source": "csv", "train": "$1" }, "train": { "steps": 20, "batch": 8 } }
J
}
python3 - "$work" <<'PY'
import random, sys
w = sys.argv[1]
random.seed(3)
rows = ["%.4f,%.4f,%d" % (random.uniform(-1, 1), random.uniform(-1, 1), i % 2) for i in range(200)]
open(w + "/lf.csv", "w").write("\n".join(rows) + "\n")
open(w + "/cr.csv", "w", newline="").write("\r".join(rows) + "\r")
open(w + "/crlf.csv", "w", newline="").write("\r\n".join(rows) + "\r\n")
open(w + "/big.csv", "w").write("\n".join(rows[:5] + ["1e39,0.5,1"] + rows[5:]) + "\n")
open(w + "/hex.csv", "w").write("\n".join(rows[:5] + ["0x10,0.5,1"] + rows[5:]) + "\n")
open(w + "/inf.csv", "w").write("\n".join(rows[:5] + ["inf,0.5,1"] + rows[5:]) + "\n")
open(w + "/empty1.csv", "w").write("\n".join(["0.5,,1"] + rows) + "\n")
PY
for f in lf cr crlf big hex inf empty1; do csvmodel "$f.csv" >"$work/$f.json"; done
"$ampx" train "$work/lf.json" --quiet >"$work/lf.out" 2>&1 || fail "csv LF: $(cat "$work/lf.out")"
for f in cr crlf; do
  "$ampx" train "$work/$f.json" --quiet >"$work/$f.out" 2>&1 || fail "csv $f line endings: $(cat "$work/$f.out")"
  cmp -s <(sed 's/ [0-9.]* s (.*steps\/s)//' "$work/lf.out") <(sed 's/ [0-9.]* s (.*steps\/s)//' "$work/$f.out") ||
    fail "csv $f line endings train otherwise than LF: $(cat "$work/$f.out")"
done
expect_error "csv 1e39" 'big\.csv:6: column 1: 1e39 is out of the range of f32' "$ampx" train "$work/big.json"
expect_error "csv hex" 'hex\.csv:6: column 1: "0x10" is not a number' "$ampx" train "$work/hex.json"
expect_error "csv inf" 'inf\.csv:6: column 1: "inf" is not a number' "$ampx" train "$work/inf.json"
expect_error "csv first line with an empty field" 'empty1\.csv:1: column 2 is empty' "$ampx" train "$work/empty1.json"
# a large declared shape with a small file: refused from the file, nothing allocated for it
csvmodel lf.csv 16777216 >"$work/wide.json"
expect_error "csv large declared shape" 'lf\.csv:1: expected 16777217 columns \(16777216 features and a label\), found 3' \
  bash -c '"$2" || ulimit -v 8000000 2>/dev/null; "$0" train "$1"' "$ampx" "$work/wide.json" "$asan"
printf '{ "name": "\xff\xfe", "inputs": {} }' >"$work/utf8.json"
expect_error "model name not UTF-8" 'utf8\.json:1:12: invalid UTF-8 \(byte 0xff\) inside a string' "$ampx" policy "$work/utf8.json"
printf '{ "name": "\xc0\xaf" }' >"$work/overlong.json"
expect_error "overlong UTF-8" 'overlong\.json:1:12: invalid UTF-8' "$ampx" policy "$work/overlong.json"
long=$(printf 'm%.0s' $(seq 70))
sed "s/\"name\": \"mlp\"/\"name\": \"$long\"/" "$mlp" >"$work/longname.json"
expect_error "model name over 63 bytes" 'longname\.json:2:11: \$\.name: a model name has at most 63 bytes \(this one has 70\)' \
  "$ampx" policy "$work/longname.json"
expect_usage() { # expect_usage NAME PATTERN ARGS...: exit 2 and the message
  "$ampx" "${@:3}" >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "$1: exit $rc, expected 2"
  grep -Eq -- "$2" "$work/err" || fail "$1: '$(cat "$work/err")' does not match '$2'"
}
expect_usage "--steps overflow" "--steps '99999999999999999999': expected an integer in \[1, 2147483647\]" train "$mlp" --steps 99999999999999999999
expect_usage "--steps past the model's range" "--steps '2147483648'" train "$mlp" --steps 2147483648
expect_usage "--seed past the model's range" "--seed '2147483648': expected an integer in \[0, 2147483647\]" train "$mlp" --seed 2147483648
expect_usage "--batch with a suffix" "--batch '8k'" train "$mlp" --batch 8k
expect_usage "--seed negative" "--seed '-1'" train "$mlp" --seed -1
expect_usage "conformance --seed hex" "--seed '0x10'" conformance --backend cpu --seed 0x10
expect_usage "conformance --seed overflow" "--seed '99999999999999999999'" conformance --backend cpu --seed 99999999999999999999
# numeric environment variables: a malformed value is refused, never ignored
for kv in AMPX_MAX_INPUT_BYTES=abc AMPX_MAX_INPUT_BYTES=-1 AMPX_MAX_INPUT_BYTES=0 \
  AMPX_CREATE_TIMEOUT_S=abc AMPX_BUCKET_KB=-1 AMPX_PROBE_TIMEOUT_S=1x; do
  env "$kv" "$ampx" train "$mlp" --steps 1 --quiet >"$work/out" 2>"$work/err"; rc=$?
  [ $rc -eq 2 ] && grep -Eq "^ampx: ${kv%%=*}='${kv#*=}': expected an integer in \[" "$work/err" ||
    fail "$kv: exit $rc, $(cat "$work/err")"
done
AMPX_BUCKET_KB= AMPX_CREATE_TIMEOUT_S=0 "$ampx" train "$mlp" --steps 1 --quiet >/dev/null 2>"$work/err" ||
  fail "empty AMPX_BUCKET_KB and AMPX_CREATE_TIMEOUT_S=0 refused: $(cat "$work/err")"

# ---- 3. no silent bad output
# a full metrics disk is a warning and the run goes on (tests/train/keeper_cli.sh: it saves)
"$ampx" train "$mlp" --steps 5 --quiet --metrics /dev/full >/dev/null 2>"$work/err"; rc=$?
[ $rc -eq 0 ] && grep -q "warning: /dev/full: write error: No space left on device" "$work/err" ||
  fail "metrics on /dev/full: exit $rc, $(cat "$work/err")"
"$ampx" train "$mlp" --steps 5 --quiet >/dev/full 2>"$work/err"; rc=$?
[ $rc -eq 1 ] && grep -q "write error on standard output: No space left on device" "$work/err" ||
  fail "stdout on /dev/full: exit $rc, $(cat "$work/err")"
# progress lines that cannot be written stop the run, which saves its checkpoint first
"$ampx" train "$mlp" --steps 3000 --log-every 10 --checkpoint "$work/stdout_full.st" \
  >/dev/full 2>"$work/err"; rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$work/err")" -eq 1 ] &&
  grep -q "write error on standard output: No space left on device; checkpoint written to" "$work/err" &&
  "$ampx" eval "$mlp" --checkpoint "$work/stdout_full.st" >/dev/null 2>&1 ||
  fail "progress to /dev/full: exit $rc, $(cat "$work/err")"
"$ampx" --version >/dev/full 2>/dev/null; [ $? -eq 1 ] || fail "--version on /dev/full exits 0"
(cd "$work" && "$ampx" train "$mlp" --steps 5 --metrics closed.jsonl >&- 2>"$work/err"); rc=$?
[ $rc -eq 2 ] && grep -q "standard output is closed" "$work/err" || fail "stdout closed: exit $rc, $(cat "$work/err")"
[ -s "$work/closed.jsonl" ] && grep -q "^step\|^training" "$work/closed.jsonl" && fail "stdout closed: progress landed in the metrics file"
(cd "$work" && "$ampx" train "$mlp" --steps 5 --metrics closed2.jsonl --quiet 2>&- >/dev/null); rc=$?
[ $rc -eq 0 ] || fail "stderr closed: a good run exits $rc"
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$work/closed2.jsonl" ||
  fail "stderr closed: the metrics file is not JSON lines"
python3 - "$mlp" "$work/lr1000.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["optimizer"] = {"type": "adamw", "lr": 1000}
json.dump(m, open(sys.argv[2], "w"))
m["optimizer"] = {"type": "sgd", "lr": 1000}
json.dump(m, open(sys.argv[2].replace("adam", "sgd").replace("lr1000", "sgd1000"), "w"))
PY
cp "$work/good" "$work/keep"
expect_error "overflowing update (adamw)" 'not writing .*/keep: tensor ".*" element [0-9]+ is (-?inf|-?nan) at step [0-9]+ \(the update overflowed' \
  "$ampx" train "$work/lr1000.json" --steps 50 --checkpoint-every 5 --quiet --checkpoint "$work/keep"
# the periodic checkpoints before the overflow were good: the last of them is still there, whole
"$ampx" eval "$work/lr1000.json" --checkpoint "$work/keep" >/dev/null 2>"$work/err" ||
  fail "a checkpoint with non-finite values was written over a good one: $(cat "$work/err")"
"$ampx" train "$work/sgd1000.json" --steps 50 --quiet --checkpoint "$work/keep2" >/dev/null 2>"$work/err"; rc=$?
# the run-health check stops the run when the weights diverge; the held-out check catches what
# it does not see: either way one line says why and the checkpoint is not written
[ $rc -eq 1 ] && grep -Eq "the held-out loss is .*nan.*the checkpoint was not written|weights became non-finite|weights grew beyond" "$work/err" ||
  fail "overflowing update (sgd): exit $rc, $(cat "$work/err")"
[ -e "$work/keep2" ] && fail "overflowing update (sgd): a checkpoint was written"
echo '{"policy": "mixed_f16", "scaler": {"type": "static", "init_scale": 1e30}}' >"$work/allskip.json"
"$ampx" train "$mlp" --policy "$work/allskip.json" --steps 5 --quiet >/dev/null 2>"$work/err"; rc=$?
[ $rc -eq 1 ] && grep -q "no step of this run was applied: all 5 had non-finite gradients" "$work/err" ||
  fail "a run that applied no step: exit $rc, $(cat "$work/err")"

# ---- 4. atomic checkpoint files
mkdir -p "$work/ck"
sleep 0 & dead=$!
wait $dead
touch "$work/ck/.c.tmp.$dead.AbC123" "$work/ck/.c.tmp.$$.XyZ789"
ln -s "$work/victim" "$work/ck/c.tmp.$$"
"$ampx" train "$mlp" --steps 3 --quiet --checkpoint "$work/ck/c" >/dev/null 2>"$work/err" || fail "train into ck/: $(cat "$work/err")"
[ -e "$work/ck/.c.tmp.$dead.AbC123" ] && fail "a stale temporary file of a dead process was not removed"
[ -e "$work/ck/.c.tmp.$$.XyZ789" ] || fail "the temporary file of a live process was removed"
[ -e "$work/victim" ] && fail "a planted symlink redirected the checkpoint write"
[ "$(ls -A "$work/ck" | wc -l)" -eq 3 ] || fail "files left in ck/: $(ls -A "$work/ck")"
touch "$work/plainfile"
"$ampx" train "$mlp" --steps 100000 --checkpoint "$work/plainfile/c" >"$work/out" 2>"$work/err"; rc=$?
[ $rc -eq 1 ] && grep -q "plainfile/c: Not a directory" "$work/err" || fail "checkpoint under a file: exit $rc, $(cat "$work/err")"
grep -q "^training" "$work/out" && fail "a bad checkpoint folder was found only after training"
expect_error "checkpoint is a folder" "ck: not a regular file" "$ampx" train "$mlp" --steps 2 --quiet --checkpoint "$work/ck"
# a path of 4095 bytes: refused, never written under a truncated temporary name
deep=$work
while [ ${#deep} -lt 3800 ]; do deep=$deep/$(printf 'd%.0s' $(seq 200)); done
mkdir -p "$deep" || fail "mkdir a deep folder"
name=$(printf 'f%.0s' $(seq $((4095 - ${#deep} - 1))))
expect_error "4095-byte checkpoint path" 'path too long for a checkpoint' "$ampx" train "$mlp" --steps 2 --quiet --checkpoint "$deep/$name"
[ -e "$deep/$name" ] && fail "a 4095-byte checkpoint path was written"

# ---- 7. inserted casts never collide with the user's names
long=$(printf 'a%.0s' $(seq 60))
for v in A B; do
  if [ $v = A ]; then n1='x->bf16' n2=${long}1 n3=${long}2; else n1=rx n2=r1 n3=r2; fi
  cat >"$work/collide$v.json" <<J
{ "name": "collide", "inputs": { "x": { "dtype": "f32", "shape": [2] }, "label": { "dtype": "i32", "classes": 3 } },
  "nodes": [
    { "name": "$n1", "op": "relu", "inputs": ["x"] },
    { "name": "$n2", "op": "tanh", "inputs": ["x"] },
    { "name": "$n3", "op": "sigmoid", "inputs": ["x"] },
    { "name": "fc1", "op": "dense", "inputs": ["x"], "units": 8 },
    { "name": "fc2", "op": "dense", "inputs": ["$n1"], "units": 8 },
    { "name": "fc3", "op": "dense", "inputs": ["$n2"], "units": 8 },
    { "name": "fc4", "op": "dense", "inputs": ["$n3"], "units": 8 },
    { "name": "s1", "op": "add", "inputs": ["fc1", "fc2"] },
    { "name": "s2", "op": "add", "inputs": ["fc3", "fc4"] },
    { "name": "s", "op": "add", "inputs": ["s1", "s2"] },
    { "name": "logits", "op": "dense", "inputs": ["s"], "units": 3 } ],
  "loss": { "type": "softmax_cross_entropy", "logits": "logits", "labels": "label" },
  "policy": "mixed_bf16", "train": { "steps": 30, "batch": 32 } }
J
  "$ampx" train "$work/collide$v.json" --checkpoint "$work/collide$v.ck" --quiet >/dev/null 2>"$work/err" ||
    fail "collide$v: $(cat "$work/err")"
  "$ampx" policy "$work/collide$v.json" >"$work/collide$v.policy" || fail "policy collide$v"
done
# a user node named like a cast ("x->bf16") and two names sharing 50 characters: the same
# casts (one per value read in bf16), and training identical to the model with plain names
grep -q "^casts inserted: 5" "$work/collideA.policy" || fail "collide: casts: $(grep -i cast "$work/collideA.policy")"
grep -Eq "^x->bf16 +bf16 .*cast inserted by the policy \(x f32 -> bf16\)" "$work/collideA.policy" || fail "collide: x's cast"
grep -Eq "cast inserted by the policy \(${long}2 f32 -> bf16\)" "$work/collideA.policy" || fail "collide: the second long name's cast"
cmp -s "$work/collideA.ck" "$work/collideB.ck" || fail "a user node named like a cast changed what trains"

# ---- 5. resource limits
expect_error "model /dev/zero" '/dev/zero: not a regular file \(a device\)' "$ampx" train /dev/zero
mkfifo "$work/fifo.json"
expect_error "model FIFO" 'fifo\.json: not a regular file \(a pipe\)' "$ampx" policy "$work/fifo.json"
csvmodel /dev/zero >"$work/zero.json"
expect_error "csv /dev/zero" '/dev/zero: not a regular file' "$ampx" train "$work/zero.json"
python3 -c 'import sys; open(sys.argv[1], "w").write("[" + "0," * (9 << 20) + "0]")' "$work/huge.json"
expect_error "18 MiB JSON" 'huge\.json: 18\.0 MiB is larger than the 16\.0 MiB input limit \(raise it with --max-input-bytes' \
  "$ampx" policy "$work/huge.json"
expect_error "18 MiB JSON, cap raised" 'huge\.json:1:1: .*expected an object|huge\.json.*object' \
  "$ampx" policy "$work/huge.json" --max-input-bytes 40000000
AMPX_MAX_INPUT_BYTES=1000 "$ampx" train "$work/lf.json" --quiet >/dev/null 2>"$work/err"
grep -q 'lf\.csv: .* is larger than the 1000 bytes input limit' "$work/err" || fail "AMPX_MAX_INPUT_BYTES: $(cat "$work/err")"
# duplicate keys are found in linear time: 200k keys parse in well under the time limit
python3 -c '
import sys
keys = ",".join("\"k%d\": %d" % (i, i) for i in range(200000))
open(sys.argv[1], "w").write("{\"name\": \"m\", \"x\": {" + keys + ", \"k7\": 0}}")' "$work/keys.json"
start=$(date +%s)
expect_error "200k keys, one duplicate" 'keys\.json:1:[0-9]+: duplicate key "k7" \(first at line 1\)' timeout 20 "$ampx" policy "$work/keys.json"
[ $(($(date +%s) - start)) -le 10 ] || fail "200k keys took $(($(date +%s) - start)) s"
# a model whose state exceeds the device is refused with the figures before any allocation
python3 - "$mlp" "$work/huge_model.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["inputs"]["x"]["shape"] = [1024]
m["layers"][0]["units"] = 1 << 24
m["layers"][1]["units"] = 1 << 24
json.dump(m, open(sys.argv[2], "w"))
PY
expect_error "state beyond the device" 'huge_model\.json: the parameters, optimizer state and data need [0-9.]+ GiB \(at least\) but the device \(.*\) has [0-9.]+ GiB' \
  "$ampx" train "$work/huge_model.json"

# ---- 8. plugins that misbehave
"$ampx" train "$mlp" --steps 3 --backend "$plugins/libcrash.so" >"$work/out" 2>"$work/err"; rc=$?
[ $rc -ne 0 ] || fail "a crashing plugin: exit 0"
grep -Eq "ampx: SIGSEGV inside backend 'wrapper' \($plugins/libcrash.so\) during op gemm issued by (fc1|self-check)" "$work/err" ||
  fail "a crashing plugin is not named: exit $rc, $(head -c 500 "$work/err")"
mkdir -p "$work/path"
# a plugin whose ops return OK and compute nothing is refused before training
expect_error "a plugin that computes nothing" "backend wrapper returned OK from a 2x3 by 3x2 gemm but computed C\\[0\\] = -7, expected -1" \
  "$ampx" train "$mlp" --steps 3 --backend "$plugins/libnoop.so"
cp "$plugins/libhang.so" "$work/path/libampx-hang.so"
cp "$plugins/libcrash.so" "$work/path/libampx-strings.so"
start=$(date +%s)
AMPX_PROBE_TIMEOUT_S=2 AMPX_PLUGIN_PATH="$work/path" timeout 60 "$ampx" backends >"$work/out" 2>&1; rc=$?
[ $rc -eq 0 ] || fail "backends with a hanging probe: exit $rc"
[ $(($(date +%s) - start)) -le 30 ] || fail "backends with a hanging probe took $(($(date +%s) - start)) s"
grep -q "libampx-hang.so: loading and probing did not finish within 2 s" "$work/out" ||
  fail "a hanging probe is not reported: $(head -c 600 "$work/out")"
grep -qE "^cpu " "$work/out" || fail "backends with a hanging probe: cpu is not listed"
name=$(printf 'X%.0s' $(seq 127))
grep -qx "  device: $name" "$work/out" || fail "a device name without a NUL is not bounded: $(grep -a 'device: X' "$work/out" | head -c 300)"

echo "hostile: $fails failure(s)"
test $fails -eq 0
