#!/usr/bin/env bash
# placement_cli.sh AMPX SRC — ordered backend lists (--backend A,B): each node on the first
# backend that takes it, the copies between them exact.
#   - a forwarding plugin over the cpu backend (tests/plugins/wrapper.c, WRAP_FORWARD) that
#     shows only some ops (the loader's ops= option), the rest on cpu: checkpoints byte-
#     identical to all-cpu runs for gpt_tiny (GEMM alone forwarded), mlp, residual_bn and
#     cnn_mnist (each with a different subset), with the forwarder as home or cpu as home;
#     a skipped step and a resume under placement byte-identical too; planted faults (a
#     write never brought home, a stale scalars block) break the identity
#   - the example plugin of docs/examples/plugin (11 ops), unchanged, with cpu: a small GPT
#     and cnn_mnist train to the all-cpu loss within the example's rounding
#   - `ampx policy --backend A,B` lists every node with its backend and each fallback's
#     reason, and the bytes copied; placement "strict" and bad rules are refused with one line
#   - opencl (GEMM and attention alone) + cpu on this machine's OpenCL device, when there is one
# Env: AMPX_TEST_FORWARD (the forwarding plugin), AMPX_TEST_OLD_MINOR (an ABI 1.1 plugin),
# AMPX_TEST_INNER_PLUGIN (the cpu plugin both wrap).
set -uo pipefail
ampx=$1
src=$2
fwd=${AMPX_TEST_FORWARD:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
export AMPX_BACKEND_OPTS=cpu.threads=1,forward.threads=1,wrapper.threads=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# a small GPT (d_model 64, context 32) so the run stays quick
sed -e 's/"dim": 128/"dim": 64/; s/"units": 512/"units": 256/; s/"units": 128/"units": 64/' \
  -e 's/"shape": \[64\]/"shape": [32]/g' "$src/models/gpt_tiny.json" >"$work/gpt_small.json"

# two checkpoints equal byte for byte but for the placement a "measured" run keeps in its
# metadata
same_st() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.get("__metadata__", {}).pop("placement", None)
    return h, b[8 + n:]
sys.exit(0 if load(sys.argv[1]) == load(sys.argv[2]) else 1)
PY
}

# same NAME MODEL STEPS OPS [extra train args...]: forwarder(OPS)+cpu against cpu, byte for byte
same() {
  local name=$1 model=$2 steps=$3 ops=$4
  shift 4
  "$ampx" train "$model" --backend cpu --steps "$steps" --checkpoint "$work/$name.cpu.st" \
    --metrics "$work/$name.cpu.jsonl" --quiet "$@" >"$work/out" 2>&1 ||
    { fail "$name: cpu run: $(cat "$work/out")"; return; }
  "$ampx" train "$model" --backend "$fwd,cpu" --backend-opt "forward.ops=$ops" --steps "$steps" \
    --checkpoint "$work/$name.placed.st" --metrics "$work/$name.placed.jsonl" "$@" \
    >"$work/placed.out" 2>&1 || { fail "$name: placed run: $(cat "$work/placed.out")"; return; }
  # the records (loss, scale, norm, the monitor's and the forensics' figures) but the clock's
  for k in cpu placed; do
    sed -E 's/"(time_ms|steps_per_s)": *[0-9.eE+-]+/"\1":0/g' "$work/$name.$k.jsonl" >"$work/$name.$k.m"
  done
  cmp -s "$work/$name.cpu.m" "$work/$name.placed.m" || fail "$name: the metrics differ from cpu's"
  grep -q '^placement: .* on forward' "$work/placed.out" ||
    fail "$name: no placement line: $(head -5 "$work/placed.out")"
  local eq=(cmp -s)
  [[ " $* " == *" measured "* ]] && eq=(same_st)
  "${eq[@]}" "$work/$name.cpu.st" "$work/$name.placed.st" ||
    fail "$name: forward($ops)+cpu checkpoint differs from the all-cpu one"
  echo "ok: $name: forward($ops)+cpu byte-identical to cpu"
}
step_ops=unscale_check,sum_squares,scaler_update,adamw,sgd,cast,amp_pass,grad_stats
same gpt_gemm "$work/gpt_small.json" 12 gemm
same gpt_home "$work/gpt_small.json" 12 "gemm,embedding_fwd,embedding_bwd,$step_ops"
same mlp "$src/models/mlp.json" 30 gemm,act_fwd,act_bwd
same mlp_home "$src/models/mlp.json" 30 "softmax_xent,bias_grad,$step_ops"
same residual_bn "$src/models/residual_bn.json" 30 batchnorm_fwd,batchnorm_bwd,add
# the monitor and the forensics read each node's outputs at home as it finishes
same monitored "$src/models/mlp_f16.json" 20 gemm,cast,act_fwd --monitor 2 --forensics --log-every 5
cnn="$src/models/cnn_mnist.json"
same cnn "$cnn" 8 im2col,col2im,pool2d_fwd,pool2d_bwd,gemm
# placement "measured": the first steps time each node on both backends and keep the
# fastest; the same code runs on both, so whatever it chooses the checkpoint is cpu's
same measured "$work/gpt_small.json" 12 gemm,layernorm_fwd,layernorm_bwd,add --placement measured
grep -q '^placement measured over 6 steps .* chose ' "$work/placed.out" ||
  fail "measured: no report of what was timed and chosen: $(tail -4 "$work/placed.out")"
# ... and a resume keeps what it chose (from the checkpoint) instead of measuring again
"$ampx" train "$work/gpt_small.json" --backend "$fwd,cpu" --backend-opt forward.ops=gemm,add \
  --placement measured --steps 8 --checkpoint "$work/m8.st" --quiet >"$work/out" 2>&1 ||
  fail "measured, first part: $(cat "$work/out")"
"$ampx" train "$work/gpt_small.json" --backend "$fwd,cpu" --backend-opt forward.ops=gemm,add \
  --placement measured --steps 12 --resume "$work/m8.st" --checkpoint "$work/m12.st" >"$work/out" 2>&1 ||
  fail "measured, resumed: $(cat "$work/out")"
grep -q 'placement measured in the run this one resumes' "$work/out" ||
  fail "measured, resumed: the choice was not kept: $(grep placement "$work/out")"
same_st "$work/m12.st" "$work/gpt_gemm.cpu.st" || fail "measured, resumed: checkpoint differs from cpu"
# a skipped step (a non-finite gradient injected at step 5) and a resume, placed
AMPX_INJECT_NONFINITE=5 same gpt_skip "$work/gpt_small.json" 8 gemm,layernorm_fwd,layernorm_bwd
grep -q 'skipped 1\|1 skipped' "$work/placed.out" || fail "gpt_skip: no skipped step: $(tail -2 "$work/placed.out")"
"$ampx" train "$work/gpt_small.json" --backend "$fwd,cpu" --backend-opt forward.ops=gemm \
  --steps 6 --checkpoint "$work/half.st" --quiet >"$work/out" 2>&1 || fail "resume: first half: $(cat "$work/out")"
"$ampx" train "$work/gpt_small.json" --backend "$fwd,cpu" --backend-opt forward.ops=gemm \
  --steps 12 --resume "$work/half.st" --checkpoint "$work/resumed.st" --quiet >"$work/out" 2>&1 ||
  fail "resume: second half: $(cat "$work/out")"
cmp -s "$work/resumed.st" "$work/gpt_gemm.cpu.st" || fail "resume across a placed run differs"
# planted faults must break the identity
for f in no-writeback stale-scalars; do
  AMPX_TEST_PLACE_FAULT=$f "$ampx" train "$work/gpt_small.json" --backend "$fwd,cpu" \
    --backend-opt forward.ops=gemm,softmax_xent --steps 12 --checkpoint "$work/fault.st" --quiet \
    >"$work/out" 2>&1
  cmp -s "$work/fault.st" "$work/gpt_gemm.cpu.st" && fail "planted fault $f went unnoticed"
done

# a plugin built for ABI 1.1 (gemm and cast only, tests/plugins/wrapper.c WRAP_OLD_MINOR) is
# placed like any other: its GEMMs there, the rest on cpu
# (it takes no GEMM epilogue: the dense layers are GEMM, bias and activation apart, as on cpu
# with gemm_epilogue=0)
old=${AMPX_TEST_OLD_MINOR:?}
"$ampx" train "$src/models/mlp.json" --backend cpu --backend-opt gemm_epilogue=0 --steps 30 \
  --checkpoint "$work/noepi.st" --quiet >"$work/out" 2>&1 || fail "cpu gemm_epilogue=0: $(cat "$work/out")"
"$ampx" train "$src/models/mlp.json" --backend "$old,cpu" --backend-opt cpu.gemm_epilogue=0 \
  --steps 30 --checkpoint "$work/old.st" >"$work/out" 2>&1 || fail "ABI 1.1 plugin in a list: $(cat "$work/out")"
grep -q 'placement: .* on wrapper' "$work/out" || fail "ABI 1.1 plugin: nothing placed on it: $(head -4 "$work/out")"
cmp -s "$work/old.st" "$work/noepi.st" || fail "ABI 1.1 plugin + cpu: checkpoint differs from all-cpu"

# evaluation, sampling and ampx diff on a placed list
list=("--backend" "$fwd,cpu" "--backend-opt" "forward.ops=gemm,layernorm_fwd")
"$ampx" eval "$work/gpt_small.json" --checkpoint "$work/gpt_gemm.cpu.st" "${list[@]}" >"$work/e1" 2>&1 ||
  fail "eval on a list: $(cat "$work/e1")"
"$ampx" eval "$work/gpt_small.json" --checkpoint "$work/gpt_gemm.cpu.st" --backend cpu >"$work/e2" 2>&1
cmp -s "$work/e1" "$work/e2" || fail "eval on a list differs from cpu: $(cat "$work/e1" "$work/e2")"
# sampling with the KV cache: the same tokens as on cpu (the same code on both sides)
"$ampx" generate "$work/gpt_small.json" --checkpoint "$work/gpt_gemm.cpu.st" --backend cpu \
  --prompt "To be" --tokens 24 --temperature 0 --quiet >"$work/gen.cpu" 2>&1 || fail "generate: $(cat "$work/gen.cpu")"
"$ampx" generate "$work/gpt_small.json" --checkpoint "$work/gpt_gemm.cpu.st" "${list[@]}" \
  --prompt "To be" --tokens 24 --temperature 0 --quiet >"$work/gen.list" 2>&1 || fail "generate on a list: $(cat "$work/gen.list")"
cmp -s "$work/gen.cpu" "$work/gen.list" || fail "generate on a list differs: $(cat "$work/gen.cpu" "$work/gen.list")"
"$ampx" diff "$work/gpt_small.json" --backend cpu --backend "$fwd,cpu" --backend-opt forward.ops=gemm \
  --steps 3 >"$work/out" 2>&1 || fail "ampx diff cpu against a list: $(tail -3 "$work/out")"

# data parallel, ZeRO-1, two ranks on a list: the same checkpoint as two ranks on cpu
if mpi=$(command -v mpirun); then
  for k in cpu list; do
    b=(--backend cpu)
    [ "$k" = list ] && b=(--backend "$fwd,cpu" --backend-opt forward.ops=gemm,act_fwd)
    # (under ASan the ranks run with leak checking off, as tools/sanitize.sh runs dist_mpi:
    # Open MPI's process-lifetime allocations have no frames LeakSanitizer can name)
    ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0" \
      timeout -k 5 120 "$mpi" --oversubscribe -np 2 -x AMPX_BACKEND_OPTS -x AMPX_TEST_INNER_PLUGIN -x ASAN_OPTIONS \
      "$ampx" train "$src/models/mlp.json" "${b[@]}" --zero 1 --steps 20 --quiet \
      --checkpoint "$work/z.$k.st" >"$work/out" 2>&1 || fail "--zero 1, 2 ranks, $k: $(cat "$work/out")"
  done
  cmp -s "$work/z.cpu.st" "$work/z.list.st" || fail "--zero 1 on a list differs from cpu"
else
  echo "mpirun: not here, the two-rank case skipped"
fi

# the listing and the refusals
"$ampx" policy "$work/gpt_small.json" --backend "$fwd,cpu" --backend-opt forward.ops=gemm \
  >"$work/list" 2>&1 || fail "policy --backend: $(cat "$work/list")"
grep -q 'layernorm_bwd .* cpu .*forward has no layernorm_bwd' "$work/list" ||
  fail "listing: no layernorm_bwd fallback with its reason: $(grep layernorm_bwd "$work/list" | head -2)"
grep -q '^copies: .* per step' "$work/list" || fail "listing: no copies total"
"$ampx" train "$work/gpt_small.json" --backend "$fwd,cpu" --backend-opt forward.ops=gemm \
  --placement strict --steps 2 >"$work/out" 2>&1 && fail "placement strict trained with fallbacks"
grep -q 'backend forward has no embedding_fwd, which node "wte" needs' "$work/out" ||
  fail "strict: $(cat "$work/out")"
"$ampx" train "$work/gpt_small.json" --backend "$fwd,cpu" --place 'h*=opencl' --steps 2 \
  >"$work/out" 2>&1 && fail "a rule naming no backend of the list was accepted"
grep -q "names backend 'opencl', which is not in the list (forward, cpu)" "$work/out" ||
  fail "bad rule: $(cat "$work/out")"
"$ampx" train "$work/gpt_small.json" --backend "$fwd,cpu" --backend-opt forward.ops=gemm \
  --place 'wte=forward' --steps 2 >"$work/out" 2>&1 && fail "a rule on a backend lacking the op was accepted"
grep -q 'puts node "wte" on forward, but forward has no embedding_fwd' "$work/out" ||
  fail "impossible rule: $(cat "$work/out")"
"$ampx" train "$work/gpt_small.json" --backend "$fwd,cpu" --backend-opt forward.ops=gemm \
  --place 'h*.attn*=cpu' --steps 2 --quiet >"$work/out" 2>&1 || fail "a rule: $(cat "$work/out")"
"$ampx" train "$work/gpt_small.json" --backend cpu --backend-opt opencl.threads=1 --steps 1 \
  >"$work/out" 2>&1 && fail "an option scoped to a backend not in use was accepted"

# the example plugin, unchanged, beside cpu
ex="$work/libampx-example.so"
if cc -O2 -std=c11 -fPIC -shared -I"$src/core/include" -o "$ex" "$src/docs/examples/plugin/example.c" -lm 2>"$work/cc"; then
  # its kernels are plain loops: a few steps, the loss of the last against all-cpu's
  last_loss() { "$ampx" train "$@" 2>&1 | sed -n 's/^step [0-9]*\/[0-9]* loss \([0-9.]*\) .*/\1/p' | tail -1; }
  for run in "gpt_small:$work/gpt_small.json --steps 8 --batch 8" \
    "cnn_mnist:$cnn --steps 4 --batch 16"; do
    name=${run%%:*}
    args=${run#*:}
    # shellcheck disable=SC2086
    a=$(last_loss $args --backend cpu --eval-every 0)
    # shellcheck disable=SC2086
    b=$(last_loss $args --backend "$ex,cpu" --eval-every 0)
    if [ -z "$a" ] || [ -z "$b" ] || ! awk -v a="$a" -v b="$b" 'BEGIN { exit !(b <= a * 1.01 && b >= a * 0.99) }'; then
      fail "example+cpu $name: loss '$b', all-cpu '$a'"
    else
      echo "ok: example+cpu $name: loss $b (all-cpu $a)"
    fi
  done
else
  fail "the example plugin does not build: $(cat "$work/cc")"
fi

# opencl for GEMM and attention alone, the rest on cpu
if "$ampx" backends 2>/dev/null | grep -A1 -E '^opencl ' | grep -q 'available$'; then
  v() { "$ampx" train "$work/gpt_small.json" --steps 40 --backend "$@" --quiet 2>&1 |
    sed -n 's/^validation loss \([0-9.]*\) nats.*/\1/p'; }
  a=$(v cpu)
  b=$(v opencl,cpu --backend-opt opencl.ops=gemm,attn_fwd,attn_bwd)
  if [ -z "$b" ] || ! awk -v a="$a" -v b="$b" 'BEGIN { exit !(b <= a * 1.02 && b >= a * 0.98) }'; then
    fail "opencl(gemm, attention)+cpu: validation loss '$b', all-cpu $a"
  else
    echo "ok: opencl(gemm, attention)+cpu: validation loss $b (cpu $a)"
  fi
else
  echo "opencl: not available here, skipped"
fi
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "placement: all passed"
