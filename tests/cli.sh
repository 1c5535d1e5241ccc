#!/usr/bin/env bash
# cli.sh AMPX TEST_PLUGIN_DIR — the `ampx` command as a user meets it: listings, exit
# statuses, and one clear line for every plugin that cannot load.
set -u
ampx=$1
plugins=$2
# The wrapper test plugins wrap the real CPU plugin: ctest says where it is; by hand, the
# build tree's copy.
: "${AMPX_TEST_INNER_PLUGIN:=$(dirname "$ampx")/../lib/ampx/libampx-cpu.so}"
export AMPX_TEST_INNER_PLUGIN
# The ABI version the host speaks, as backend.h states it.
abi=$(awk '/^#define AMPX_ABI_MAJOR/ {ma = $3} /^#define AMPX_ABI_MINOR/ {mi = $3}
           END {print ma "." mi}' "$(dirname "$0")/../core/include/ampx/backend.h")
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

# expect_fail NAME WANT_SUBSTRING ARGS...: non-zero exit (not a crash), one line on stderr
expect_fail() {
  local name=$1 want=$2; shift 2
  "$ampx" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines; lines=$(wc -l <"$tmp/err")
  check "$name: exits 1 (got $rc)" test "$rc" -eq 1
  check "$name: one line on stderr (got $lines)" test "$lines" -eq 1
  check "$name: mentions '$want'" grep -qF -- "$want" "$tmp/err"
}

"$ampx" --version >"$tmp/out"; check "--version" grep -qF "ABI $abi" "$tmp/out"
"$ampx" --help >"$tmp/out"; check "--help" grep -q conformance "$tmp/out"
"$ampx" frobnicate 2>/dev/null; check "unknown command exits 2" test $? -eq 2
"$ampx" --help >"$tmp/out"; check "--help has the exit-status table" grep -q "^  2  usage" "$tmp/out"
# README.md's exit-status table and synopsis name every status and command --help does
readme=$(dirname "$0")/../README.md
man=$(dirname "$0")/../docs/ampx.1
"$ampx" --help >"$tmp/help"
for st in $(sed -n '/^exit status:/,/^$/s/^  \([0-9][0-9]*\) .*/\1/p' "$tmp/help"); do
  check "README.md's exit-status table has $st" grep -qE "^\| ([0-9]+, )*$st[ ,]" "$readme"
  check "ampx.1's EXIT STATUS has $st" grep -qE "^\.BR? $st( |\$)" "$man"
done
for c in $(sed -n '/^commands:/,/^$/s/^  \([a-z-]*\) .*/\1/p' "$tmp/help"); do
  check "README.md's synopsis has ampx $c" grep -qE "^ampx $c( |\$)" "$readme"
done
"$ampx" help train >"$tmp/out"; rc=$?
check "help train: exit 0, the train usage" test $rc -eq 0 -a "$(head -c 22 "$tmp/out")" = "usage: ampx train MODE"
"$ampx" help generate >"$tmp/out"; check "help generate shows generate's options" grep -q -- "--temperature" "$tmp/out"
"$ampx" trian 2>"$tmp/err"; rc=$?
check "a misspelt command: exit 2, the nearest named" test $rc -eq 2 -a "$(cat "$tmp/err")" = "ampx: unknown command 'trian' (did you mean 'train'?)"
"$ampx" train x.json --stpes 3 2>"$tmp/err"; rc=$?
check "a misspelt option: exit 2, the nearest named" test $rc -eq 2
check "a misspelt option names --steps" grep -qF "unknown option '--stpes' (did you mean '--steps'?)" "$tmp/err"
# a long option only as spelled in full: a prefix getopt_long would complete is refused, with
# what it could be (README.md, "The ampx command"), never run as that option (issue 47)
"$ampx" train x.json --step 10 2>"$tmp/err"; rc=$?
check "a prefix of one option: exit 2, refused" test $rc -eq 2
check "a prefix of one option names it" test "$(head -n 1 "$tmp/err")" = "ampx train: unknown option '--step' (did you mean '--steps'?)"
"$ampx" train x.json --see=3 2>"$tmp/err"; rc=$?
check "--see=3: exit 2, --seed named" test $rc -eq 2 -a "$(head -n 1 "$tmp/err")" = "ampx train: unknown option '--see=3' (did you mean '--seed'?)"
"$ampx" train x.json --s 3 2>"$tmp/err"; rc=$?
check "an ambiguous prefix: exit 2, every option it could be" test $rc -eq 2 -a "$(head -n 1 "$tmp/err")" = "ampx train: unknown option '--s' (did you mean '--steps', '--seed' or '--set'?)"
"$ampx" train x.json --step 2>"$tmp/err"
check "a prefix without a value: refused as a prefix" grep -qxF "ampx train: unknown option '--step' (did you mean '--steps'?)" "$tmp/err"
"$ampx" predict x.json --check c 2>"$tmp/err"; rc=$?
check "predict refuses a prefix too" test $rc -eq 2 -a "$(head -n 1 "$tmp/err")" = "ampx predict: unknown option '--check' (did you mean '--checkpoint'?)"
"$ampx" train x.json --zzzzzz 2>"$tmp/err"
check "an unknown option far from any: no suggestion" grep -qxF "ampx train: unknown option '--zzzzzz'" "$tmp/err"
"$ampx" train x.json --steps 2>"$tmp/err"
check "an option without its value says so" grep -qF "option '--steps' needs a value" "$tmp/err"
"$ampx" train x.json --accumulate 0 2>"$tmp/err"; rc=$?
check "--accumulate 0: exit 2, the range" test $rc -eq 2 -a "$(cat "$tmp/err")" = "ampx train: --accumulate '0': expected an integer in [1, 65536]"
"$ampx" train "$(dirname "$0")/../models/mlp.json" --steps 2 --batch 8 --accumulate 3 >"$tmp/out" 2>"$tmp/err"
check "--accumulate 3 sets micro-batches per step" grep -qF "batch 8 x 3" "$tmp/out"
"$ampx" conformance 2>/dev/null; check "conformance without --backend exits 2" test $? -eq 2
"$ampx" train x.json --stpes 3 2>"$tmp/err"
check "a bad option ends with the --help hint, not the whole usage" test "$(tail -n 1 "$tmp/err")" = "Try 'ampx train --help' for more information." -a "$(wc -l <"$tmp/err")" -eq 2
"$ampx" eval x.json --steps 5 2>"$tmp/err"; rc=$?
check "a train-only option given to eval: exit 2, named by its flag" test $rc -eq 2 -a "$(cat "$tmp/err")" = "ampx eval: option '--steps' is for ampx train"
"$ampx" train x.json --help=1 2>"$tmp/err"; rc=$?
check "--help=1: exit 2, takes no value" test $rc -eq 2 -a "$(head -n 1 "$tmp/err")" = "ampx train: option '--help' takes no value"
"$ampx" train x.json -s 2>"$tmp/err"
check "a short option without its value is named as typed" grep -qxF "ampx train: option '-s' needs a value" "$tmp/err"
"$ampx" generate x.json --checkpoint c --tokens 3.5 2>"$tmp/err"; rc=$?
check "generate --tokens 3.5: exit 2 with a line" test $rc -eq 2 -a "$(cat "$tmp/err")" = "ampx generate: --tokens '3.5': expected a whole number"
for c in train eval policy generate backends; do
  "$ampx" "$c" --help >/dev/full 2>"$tmp/err"; rc=$?
  check "$c --help to a full disk: exit 1 with the write error" test $rc -eq 1 -a -n "$(grep -F 'write error' "$tmp/err")"
done
"$ampx" train "$(dirname "$0")/../models/mlp.json" --steps 1 --backend cpuu 2>"$tmp/err"
check "a misspelt backend: the nearest named" grep -qF "backend 'cpuu' not found (did you mean 'cpu'?)" "$tmp/err"
AMPX_DATA_DIR="$tmp/nodata" "$ampx" train "$(dirname "$0")/../models/gpt.json" --steps 1 2>"$tmp/err"
check "a missing \$DATA corpus: the script that fetches it" grep -qF "nodata/shakespeare/train.txt: No such file or directory (a \$DATA file: fetch \"shakespeare\" with tools/data/shakespeare.sh" "$tmp/err"

"$ampx" backends >"$tmp/out"; rc=$?
check "backends exits 0" test $rc -eq 0
check "backends lists cpu as available" grep -qF "ABI $abi, available" "$tmp/out"
check "backends shows the op table" grep -qE '^  gemm +yes +yes +yes +27/27' "$tmp/out"
# the fp8 ops asked with the dtypes they take (e4m3/e5m2 operands), not all-float ones
check "backends: cpu does fp8_quantize" grep -qE '^  fp8_quantize +yes +yes +yes +12/12' "$tmp/out"
check "backends: cpu does gemm_fp8" grep -qE '^  gemm_fp8 +yes +yes +yes +12/12' "$tmp/out"
"$ampx" backends --json >"$tmp/json"
check "backends --json is JSON with cpu" python3 -c '
import json,sys
d=json.load(open(sys.argv[1]))
cpu=[b for b in d["backends"] if b["name"]=="cpu"][0]
assert cpu["available"] and cpu["abi"]==sys.argv[2], cpu
assert cpu["ops"]["gemm"]["bf16"] and cpu["ops"]["gemm"]["combos_supported"]==27
for op in ("fp8_quantize", "gemm_fp8"):
    e=cpu["ops"][op]
    assert e["f32"] and e["bf16"] and e["f16"] and e["combos_supported"]==e["combos_total"]==12, (op, e)
' "$tmp/json" "$abi"

printf 'not a plugin\n' >"$tmp/libampx-text.so"
expect_fail "missing file" "./does-not-exist.so: cannot load backend" conformance --backend ./does-not-exist.so
expect_fail "not a shared object" "$tmp/libampx-text.so: cannot load backend" conformance --backend "$tmp/libampx-text.so"
expect_fail "no entry symbol" "no symbol 'ampx_backend_entry'" conformance --backend "$plugins/libno_entry.so"
expect_fail "entry symbol is data" "'ampx_backend_entry' is not a function" conformance --backend "$plugins/libdata_entry.so"
expect_fail "a directory" "not a regular file" conformance --backend /tmp/
mkfifo "$tmp/libampx-fifo.so"
expect_fail "a FIFO" "not a regular file" conformance --backend "$tmp/libampx-fifo.so"
rm -f "$tmp/libampx-fifo.so"
"$ampx" conformance --backend '' 2>"$tmp/err"; check "empty --backend exits 2" test $? -eq 2
check "empty --backend says --backend is required" grep -q -- "--backend is required" "$tmp/err"
expect_fail "wrong ABI major" "plugin speaks 2.7, host speaks $abi" conformance --backend "$plugins/libwrong_major.so"
expect_fail "probe unavailable" "unavailable: test device is switched off" conformance --backend "$plugins/libunavailable.so"
expect_fail "unknown backend name" "backend 'nosuch' not found" conformance --backend nosuch
expect_fail "bad backend option" "no_such_key" conformance --backend cpu --backend-opt no_such_key=1

# Broken files on the search path are listed as such; the rest still lists, exit 0.
mkdir -p "$tmp/path"
cp "$plugins/libdata_entry.so" "$tmp/path/libampx-data.so"
cp "$tmp/libampx-text.so" "$tmp/path/libampx-t.so"
cp "$plugins/libunavailable.so" "$tmp/path/libampx-off.so"
AMPX_PLUGIN_PATH="$tmp/path" "$ampx" backends >"$tmp/out" 2>&1; rc=$?
check "backends with broken plugins on the path exits 0 (got $rc)" test $rc -eq 0
check "backends lists a data entry as not loadable" grep -qE "^  not loadable: .*libampx-data.so: not an ampx backend" "$tmp/out"
check "backends lists a one-letter plugin name" grep -qE "^t +$tmp/path/libampx-t.so" "$tmp/out"
check "backends lists an unavailable plugin with its reason" grep -q "unavailable: .*test device is switched off" "$tmp/out"
check "backends still lists cpu" grep -qE "^cpu " "$tmp/out"

# A plugin whose ops start failing: failures reported, exit 1, no crash.
"$ampx" conformance --backend "$plugins/libfailing.so" --quick >"$tmp/out" 2>"$tmp/err"; rc=$?
check "failing plugin exits 1 (got $rc)" test $rc -eq 1
check "failing plugin reports the fault" grep -q 'injected device fault' "$tmp/err"

# The real thing, quick: a passing run prints the closing count and exits 0.
"$ampx" conformance --backend cpu --quick --op gemm >"$tmp/out" 2>&1; rc=$?
check "conformance cpu gemm exits 0 (got $rc)" test $rc -eq 0
check "conformance prints the closing count" grep -qE '^[0-9]+ passed, 0 failed' "$tmp/out"
"$ampx" conformance --backend cpu --quick --op cast --json >"$tmp/json"; rc=$?
check "conformance --json exits 0" test $rc -eq 0
check "conformance --json is JSON" python3 -c '
import json,sys
d=json.load(open(sys.argv[1])); assert d["ok"] and d["summary"]["failed"]==0 and d["cases"]' "$tmp/json"

# ampx bench: small runs only (benchmarks are not tests); the JSON line and the errors.
"$ampx" bench gemm --backend cpu --dtype bf16 --m 65 --n 33 --k 70 --trans-b --batch 2 --reps 3 --json >"$tmp/out" 2>"$tmp/err"; rc=$?
check "bench gemm --json exits 0 (got $rc)" test $rc -eq 0
check "bench gemm --json: the last line is the JSON object" python3 -c '
import json,sys
d=json.loads(open(sys.argv[1]).read().splitlines()[-1])
for key in ("gflops","ms","dtype","m","n","k","kernel"): assert key in d, key
assert d["dtype"]=="bf16" and (d["m"],d["n"],d["k"],d["batch"])==(65,33,70,2) and d["trans_b"], d
assert d["gflops"]>0 and d["ms"]>0 and d["ok"] and d["kernel"], d' "$tmp/out"
AMPX_CPU_ISA=portable "$ampx" bench gemm --backend cpu --dtype f32 --m 8 --n 8 --k 8 --reps 2 --json >"$tmp/out" 2>&1
check "bench gemm reports the ISA cap in use" grep -q '"kernel":"portable"' "$tmp/out"
"$ampx" bench op adamw --backend cpu --dtype bf16 --n 100000 --reps 3 --json >"$tmp/out" 2>&1; rc=$?
check "bench op adamw exits 0 (got $rc)" test $rc -eq 0
check "bench op --json has GB/s beside the copy" python3 -c '
import json,sys
d=json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert d["op"]=="adamw" and d["gbs"]>0 and d["copy_gbs"]>0, d' "$tmp/out"
"$ampx" bench gemm --backend cpu --dtype f32 --m 8 --n 8 2>/dev/null; check "bench gemm without --k exits 2" test $? -eq 2
"$ampx" bench gemm --backend cpu --dtype f64 --m 8 --n 8 --k 8 2>/dev/null; check "bench gemm --dtype f64 exits 2" test $? -eq 2
"$ampx" bench gemm --backend cpu --dtype f32 --m 0 --n 8 --k 8 2>/dev/null; check "bench gemm --m 0 exits 2" test $? -eq 2
"$ampx" bench op nosuchop --backend cpu 2>/dev/null; check "bench op unknown op exits 2" test $? -eq 2
"$ampx" bench frob 2>/dev/null; check "bench unknown benchmark exits 2" test $? -eq 2
expect_fail "bench unknown backend" "backend 'nosuch' not found" bench gemm --backend nosuch --dtype f32 --m 8 --n 8 --k 8
expect_fail "bench bad ISA cap" "isa=sse9" bench gemm --backend cpu --backend-opt isa=sse9 --dtype f32 --m 8 --n 8 --k 8

echo "cli: $fails failure(s)"
test $fails -eq 0
