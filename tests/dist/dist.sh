#!/usr/bin/env bash
# dist.sh AMPX SRC MPIEXEC — data-parallel training with `mpirun --oversubscribe -np 2`:
#   - equivalence: f32, a fixed seed, 2 ranks x batch 32 and 1 process x batch 64 reach the
#     same parameters after 50 steps within 1e-5 relative, with every step's loss and
#     gradient norm within 1e-5 (a control, 1 process x batch 32, must not), for example data
#     and for token windows; the all-reduce in place on the CPU
#     backend's memory (ABI 1.3 handles) and the host copy give the same bits;
#   - an overflow injected on rank 1 only skips the same step as in one process, on rank 0
#     too (its metrics say so), and the parameters still agree;
#   - resume of a 2-rank run is bit-identical to the straight 2-rank run;
#   - fp8 (policy.fp8): every rank keeps the same scales (a control without the amax
#     all-reduce diverges at step 1), and a 2-rank fp8 run resumes bit-identically;
#   - llm.c's chunk orders: sequential 2 x 4 matches 1 x 8, shuffled ranks walk their own
#     permutations, and a shuffled 2-rank run resumes bit-identically;
#   - models/mlp.json on 2 ranks reaches the single-process held-out accuracy, and only
#     rank 0 prints (one progress line per interval, one summary);
#   - faults end the job within 30 s with a message naming the rank: ranks with different
#     models, data paths (rank 2 of 4), data contents (one relative path in two working
#     folders), or --resume on one rank of 4 only or of other checkpoints (named by step and
#     digest) are refused at start naming what differs; rank 2 of 4 killed with
#     kill -9; a rank stopped with SIGSTOP (the watchdog, AMPX_DIST_TIMEOUT=3, names it);
#     ranks that diverge (a weight made non-finite on one rank only);
#   - launchers: RANK/WORLD_SIZE/LOCAL_RANK exported from mpirun's run; rotated or grown,
#     and PMI_RANK/PMI_SIZE against a singleton, they stop every rank naming both sides;
#     WORLD_SIZE without an MPI process manager is refused;
#   - AMPX_DIST_CHECK=1 (signatures before every collective) raises no false alarm and gives
#     the same bits, and a collective made one value short on one rank (AMPX_INJECT_COLLECTIVE)
#     stops the job within 10 s naming both ranks' signatures, on 2 ranks and on 4;
#   - 4 ranks (oversubscribed): 4 x 16 reaches 1 x 64's parameters within 1e-5 (and every
#     step's loss and norm), and a rank stopped among 4 is named by the others' watchdog;
#   - ZeRO-1 (--zero 1, gradients reduce-scattered) records the same steps and writes the same
#     checkpoint as plain data parallelism on 2 ranks (an overflow included; the gradient norm
#     to rounding), reaches its parameters within 1e-5 on 4 with the clip active (the same
#     step skipped), takes the host-copy path to the same bits, resumes across ZeRO and world sizes,
#     with a quarter of the optimizer state per rank on 4 and its share of the sharded masters;
#   - SIGTERM to mpirun (which forwards it to every rank, then kills them 1 s later): the
#     ranks agree on a step at the end of an interval, rank 0 saves (ZeRO-1's state gathered
#     first), and the resume from that checkpoint is bit-identical to the straight run;
#   - another world size on resume with the global batch kept: 4 -> 2, 2 -> 4 and 4 -> 1
#     reach the straight run's parameters within 1e-5 with the loss scaler's state carried (a
#     control with another global batch does not), and token windows 2 -> 1 too.
set -uo pipefail
ampx=$1
src=$2
mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# CI runs as root; one thread per rank, 2 ranks on 2 cores
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export AMPX_BACKEND_OPTS=threads=1
mpi2() { timeout -k 5 60 "$mpiexec" --oversubscribe -np 2 "$@"; }
compare() { python3 "$src/tests/dist/compare.py" "$@"; }
same() { python3 "$src/tests/dist/same_metrics.py" "$@"; }
sgd=$src/tests/dist/mlp_sgd.json
skipped() { python3 -c 'import json,sys; print(",".join(str(r["step"]) for r in map(json.loads, open(sys.argv[1])) if r.get("skipped")))' "$1"; }

# ---- equivalence: the same examples, another summation order
# (and at each iteration, as PyTorch's DDP tests compare: every step's loss and gradient norm
# within 1e-5 relative, the same steps applied at the same scale and learning rate)
"$ampx" train "$sgd" --batch 64 --quiet --checkpoint "$work/one.st" --metrics "$work/one.jsonl" \
  >/dev/null 2>"$work/err" || fail "1 process: $(cat "$work/err")"
mpi2 "$ampx" train "$sgd" --batch 32 --checkpoint "$work/two.st" --metrics "$work/two.jsonl" \
  >"$work/out" 2>&1 || fail "2 ranks: $(cat "$work/out")"
compare "$work/one.st" "$work/two.st" --rel 1e-5 || fail "2 ranks x 32 != 1 x 64 after 50 steps"
d=$(same "$work/one.jsonl" "$work/two.jsonl" --rel 1e-5) || fail "2 ranks x 32 != 1 x 64 at some step: $d"
grep -q "host memory in place" "$work/out" || fail "the CPU backend's gradients are not all-reduced in place"
# the communicator's own clock (ampx_dist_comm_ms): every MPI call of the run, so never 0
grep -qE "^communicator: [0-9.]+ ms on rank 0" "$work/out" && ! grep -q "^communicator: 0.0 ms" "$work/out" ||
  fail "no communicator time in the summary: $(cat "$work/out")"
# the host copy (read, MPI, write back: backends without ABI 1.3 handles) sums the same
AMPX_DIST_PATH=copy mpi2 "$ampx" train "$sgd" --batch 32 --checkpoint "$work/copy.st" >"$work/out" 2>&1 ||
  fail "2 ranks, host copy: $(cat "$work/out")"
grep -q "(.* ms, host copy)" "$work/out" || fail "AMPX_DIST_PATH=copy: $(cat "$work/out")"
compare "$work/two.st" "$work/copy.st" --exact || fail "the host copy path gives other gradients"
"$ampx" train "$sgd" --batch 32 --quiet --checkpoint "$work/half.st" --metrics "$work/half.jsonl" \
  >/dev/null 2>&1
same "$work/one.jsonl" "$work/half.jsonl" --rel 1e-5 >/dev/null &&
  fail "control: 1 process x batch 32 has batch 64's losses, so the per-step check proves nothing"
compare "$work/one.st" "$work/half.st" --differ 1e-5 ||
  fail "control: 1 process x batch 32 matches batch 64, so the comparison proves nothing"

# ---- token windows: rank r draws windows [r*b, (r+1)*b) of each global batch
sed -e 's/"dim": 128/"dim": 32/; s/"units": 512/"units": 64/; s/"units": 128/"units": 32/' \
  -e 's/"shape": \[64\]/"shape": [16]/g; s/"policy": "mixed_bf16"/"policy": "f32"/' \
  -e 's/"optimizer": {.*}},$/"optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},/' \
  "$src/models/gpt_tiny.json" >"$work/gpt.json"
# (AdamW divides by sqrt(v): a gradient that is zero but for rounding, as the key bias's is,
# turns a different summation order into a full-size step, so the comparison uses SGD)
[ "$(grep -c '"type": "sgd"\|"policy": "f32"\|"dim": 32' "$work/gpt.json")" -eq 3 ] ||
  fail "models/gpt_tiny.json no longer has the settings this test changes"
"$ampx" train "$work/gpt.json" --steps 5 --batch 8 --quiet --checkpoint "$work/g1.st" \
  >/dev/null 2>"$work/err" || fail "gpt 1 process: $(cat "$work/err")"
mpi2 "$ampx" train "$work/gpt.json" --steps 5 --batch 4 --quiet --checkpoint "$work/g2.st" \
  >"$work/out" 2>&1 || fail "gpt 2 ranks: $(cat "$work/out")"
compare "$work/g1.st" "$work/g2.st" --rel 1e-5 || fail "gpt: 2 ranks x 4 windows != 1 x 8"
"$ampx" train "$work/gpt.json" --steps 5 --batch 4 --quiet --checkpoint "$work/g3.st" \
  >/dev/null 2>&1
compare "$work/g1.st" "$work/g3.st" --differ 1e-5 || fail "gpt control: batch 4 matches batch 8"
# resumed on 1 process x 8 from 2 ranks x 4 at step 3: the same windows as the straight run
mpi2 "$ampx" train "$work/gpt.json" --steps 3 --batch 4 --quiet --checkpoint "$work/gc2.st" \
  >"$work/out" 2>&1 || fail "gpt 2 ranks, 3 steps: $(cat "$work/out")"
"$ampx" train "$work/gpt.json" --steps 5 --batch 8 --resume "$work/gc2.st" --quiet \
  --checkpoint "$work/gr1.st" >/dev/null 2>"$work/err" || fail "gpt 2 -> 1: $(cat "$work/err")"
compare "$work/g1.st" "$work/gr1.st" --rel 1e-5 || fail "gpt: 2 ranks x 4 resumed as 1 x 8 != 1 x 8"

# ---- llm.c's chunk orders: sequential, 2 ranks x 4 read the chunks 1 x 8 reads; shuffled,
# each rank walks its own permutations (seeded 42 + rank) as llm.c's ranks do, so the two
# differ; a shuffled 2-rank run resumed at step 3 is bit-identical to the straight one
for o in sequential shuffled; do
  "$ampx" train "$work/gpt.json" --steps 6 --batch 8 --set data.order=$o --quiet \
    --checkpoint "$work/o1_$o.st" >/dev/null 2>"$work/err" || fail "$o 1 process: $(cat "$work/err")"
  mpi2 "$ampx" train "$work/gpt.json" --steps 6 --batch 4 --set data.order=$o --quiet \
    --checkpoint "$work/o2_$o.st" >"$work/out" 2>&1 || fail "$o 2 ranks: $(cat "$work/out")"
done
compare "$work/o1_sequential.st" "$work/o2_sequential.st" --rel 1e-5 ||
  fail "sequential: 2 ranks x 4 != 1 x 8"
compare "$work/o1_shuffled.st" "$work/o2_shuffled.st" --differ 1e-5 ||
  fail "shuffled: 2 ranks read what 1 process reads, not their own permutations"
mpi2 "$ampx" train "$work/gpt.json" --steps 3 --batch 4 --set data.order=shuffled --quiet \
  --checkpoint "$work/o3.st" >"$work/out" 2>&1 && mpi2 "$ampx" train "$work/gpt.json" \
  --resume "$work/o3.st" --steps 6 --batch 4 --set data.order=shuffled --quiet \
  --checkpoint "$work/o6.st" >"$work/out" 2>&1 || fail "shuffled 2-rank resume: $(cat "$work/out")"
compare "$work/o2_shuffled.st" "$work/o6.st" --exact || fail "shuffled 2 ranks: 3 + 3 steps != 6"

# ---- an overflow on rank 1 only: every rank skips step 10
AMPX_INJECT_NONFINITE=10 "$ampx" train "$sgd" --batch 64 --quiet --checkpoint "$work/one_i.st" \
  --metrics "$work/one_i.jsonl" >/dev/null 2>&1 || fail "1 process with an overflow"
AMPX_INJECT_NONFINITE=10@1 mpi2 -x AMPX_INJECT_NONFINITE "$ampx" train "$sgd" --batch 32 --quiet \
  --checkpoint "$work/two_i.st" --metrics "$work/two_i.jsonl" >"$work/out" 2>&1 ||
  fail "2 ranks with an overflow on rank 1: $(cat "$work/out")"
[ "$(skipped "$work/one_i.jsonl")" = 10 ] || fail "1 process skipped '$(skipped "$work/one_i.jsonl")', expected 10"
[ "$(skipped "$work/two_i.jsonl")" = 10 ] ||
  fail "rank 0 skipped '$(skipped "$work/two_i.jsonl")' with the overflow on rank 1, expected 10"
[ "$(wc -l <"$work/two_i.jsonl")" -eq 50 ] || fail "metrics: $(wc -l <"$work/two_i.jsonl") lines, expected rank 0's 50"
compare "$work/one_i.st" "$work/two_i.st" --rel 1e-5 || fail "with an overflow: 2 ranks != 1 process"
# armed forensics: rank 0's outputs were finite, so its report points at another rank
AMPX_INJECT_NONFINITE=3@1 mpi2 -x AMPX_INJECT_NONFINITE "$ampx" train "$sgd" --batch 32 --steps 5 \
  --log-every 5 --forensics >"$work/out" 2>&1 || fail "2 ranks, forensics: $(cat "$work/out")"
grep -q "^step 3: skipped, .*first non-finite: none in rank 0's outputs: another rank's gradients brought it through the all-reduce" \
  "$work/out" || fail "2 ranks, forensics on rank 0: $(cat "$work/out")"

# ---- resume: 25 steps, a checkpoint, 25 more == 50 straight, bit for bit
mpi2 "$ampx" train "$sgd" --batch 32 --steps 25 --quiet --checkpoint "$work/r.st" >"$work/out" 2>&1 ||
  fail "2 ranks, 25 steps: $(cat "$work/out")"
cp "$work/r.st" "$work/c2.st" # for the resume on 4 ranks below
mpi2 "$ampx" train "$sgd" --batch 32 --resume "$work/r.st" --quiet --checkpoint "$work/r.st" \
  >"$work/out" 2>&1 || fail "2 ranks, resumed: $(cat "$work/out")"
compare "$work/two.st" "$work/r.st" --exact || fail "resumed 2-rank run differs from the straight one"

# ---- fp8 (policy.fp8): the ranks' amaxes are MAX all-reduced before each scale update, so
# every rank holds the same scales; the agreement check at each interval (here every step)
# hashes them with the scalars block. Without the all-reduce (AMPX_FP8_LOCAL_AMAX=1, the
# control) the ranks' data give other amaxes and the check stops the run at step 1. A resume
# carries the scaling state: 25 + 25 steps equal 50, bit for bit.
fp8=$work/mlp_fp8.json
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["policy"]={"preset":"mixed_bf16","fp8":{"amax_history":8}}; json.dump(m,open(sys.argv[2],"w"))' "$sgd" "$fp8"
mpi2 "$ampx" train "$fp8" --batch 32 --log-every 1 --quiet --checkpoint "$work/f8.st" >"$work/out" 2>&1 ||
  fail "fp8, 2 ranks: $(cat "$work/out")"
AMPX_FP8_LOCAL_AMAX=1 mpi2 -x AMPX_FP8_LOCAL_AMAX "$ampx" train "$fp8" --batch 32 --log-every 1 --quiet \
  >"$work/out" 2>&1 && fail "fp8 without the amax all-reduce: the ranks' scales did not part"
grep -q "step 1: .*fp8 scales or weights differ" "$work/out" ||
  fail "fp8 control: no divergence named at step 1: $(cat "$work/out")"
mpi2 "$ampx" train "$fp8" --batch 32 --steps 25 --quiet --checkpoint "$work/f8r.st" >"$work/out" 2>&1 ||
  fail "fp8, 2 ranks, 25 steps: $(cat "$work/out")"
mpi2 "$ampx" train "$fp8" --batch 32 --resume "$work/f8r.st" --quiet --checkpoint "$work/f8r.st" \
  >"$work/out" 2>&1 || fail "fp8, 2 ranks, resumed: $(cat "$work/out")"
compare "$work/f8.st" "$work/f8r.st" --exact || fail "fp8: the resumed 2-rank run differs from the straight one"

# ---- models/mlp.json: the single-process accuracy; rank 0 alone prints
acc() { sed -n 's/^held-out accuracy \([0-9.]*\)%.*/\1/p' "$1"; }
"$ampx" train "$src/models/mlp.json" >"$work/one.out" 2>&1 || fail "mlp 1 process: $(cat "$work/one.out")"
mpi2 "$ampx" train "$src/models/mlp.json" --batch 32 >"$work/two.out" 2>&1 ||
  fail "mlp 2 ranks: $(cat "$work/two.out")"
a1=$(acc "$work/one.out") a2=$(acc "$work/two.out")
python3 -c "import sys; sys.exit(not (float('${a2:-0}') >= float('${a1:-100}') - 1.0))" ||
  fail "mlp: 2 ranks reach ${a2:-?}%, 1 process ${a1:-?}%"
[ "$(grep -c '^step 1500/1500 ' "$work/two.out")" -eq 1 ] || fail "expected one final progress line: $(cat "$work/two.out")"
[ "$(grep -c '^step 50/1500 ' "$work/two.out")" -eq 1 ] || fail "expected one progress line per interval"
[ "$(grep -c '^done:' "$work/two.out")" -eq 1 ] || fail "expected one summary"
grep -q "^data-parallel over 2 ranks" "$work/two.out" || fail "no data-parallel line"

# ---- the trace of a 2-rank run shows the all-reduce as communication slices of each step
mpi2 "$ampx" train "$src/models/mlp.json" --steps 4 --trace "$work/dp.json" --quiet >/dev/null 2>&1 ||
  fail "2 ranks with --trace"
python3 - "$work/dp.json" <<'PY' || fail "no communication in the trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
comm = [e for e in ev if e.get("cat") == "communication"]
steps = {e["args"]["step"] for e in comm if e["name"] == "allreduce.f32"}
assert steps == {1, 2, 3, 4}, steps
assert all(e["args"]["bytes"] > 0 and e["dur"] >= 0 for e in comm), comm[:2]
PY

# ---- faults, each ending the job within 30 s with the rank named
t0=$SECONDS
timeout -k 5 30 "$mpiexec" --oversubscribe -np 1 "$ampx" train "$sgd" --quiet : \
  -np 1 "$ampx" train "$src/models/mlp.json" --quiet >"$work/out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "different models: exit $rc"
grep -q "rank 1's model file (its bytes) differs from rank 0's" "$work/out" ||
  fail "different models: $(cat "$work/out")"

# ---- agreement at start: data paths and contents, --resume on one rank only
head -c 30000 "$src/README.md" >"$work/a.txt"
tr 'a-z' 'b-za' <"$work/a.txt" >"$work/b.txt"
mkdir -p "$work/ra" "$work/rb"
sed -e 's|"data": {[^}]*}|"data": {"source": "text", "train": "train.txt"}|' "$work/gpt.json" >"$work/ra/m.json"
grep -q '"train": "train.txt"' "$work/ra/m.json" || fail "no data object to replace in $work/gpt.json"
cp "$work/ra/m.json" "$work/rb/m.json"
cp "$work/a.txt" "$work/ra/train.txt" && cp "$work/b.txt" "$work/rb/train.txt"
# (4 ranks, rank 2 reading another file)
timeout -k 5 30 "$mpiexec" --oversubscribe -np 2 "$ampx" train "$work/ra/m.json" --steps 2 --quiet : \
  -np 1 "$ampx" train "$work/ra/m.json" --steps 2 --quiet --set data.train=../rb/train.txt : \
  -np 1 "$ampx" train "$work/ra/m.json" --steps 2 --quiet >"$work/out" 2>&1
[ $? -ne 0 ] || fail "other data paths: exit 0"
grep -q "rank 2 reads other data files than rank 0: .*rb/train.txt here, .*ra/train.txt on rank 0" \
  "$work/out" || fail "other data paths: $(cat "$work/out")"
# the same relative path in two working folders: other bytes under one name
timeout -k 5 30 "$mpiexec" --oversubscribe -np 1 -wdir "$work/ra" "$ampx" train m.json --steps 2 --quiet : \
  -np 1 -wdir "$work/rb" "$ampx" train m.json --steps 2 --quiet >"$work/out" 2>&1
[ $? -ne 0 ] || fail "other data contents: exit 0"
grep -q "rank 1's data files' contents (the same paths, other bytes) differs" "$work/out" ||
  fail "other data contents: $(cat "$work/out")"
"$ampx" train "$sgd" --steps 5 --quiet --checkpoint "$work/r5.st" >/dev/null 2>&1 || fail "resume source run"
timeout -k 5 30 "$mpiexec" --oversubscribe -np 1 "$ampx" train "$sgd" --quiet --resume "$work/r5.st" : \
  -np 3 "$ampx" train "$sgd" --quiet >"$work/out" 2>&1
[ $? -ne 0 ] || fail "--resume on rank 0 of 4 only: exit 0"
# (the first rank to say so ends the job; rank 0, which agrees with itself, waits half a
# second before its count, so one of ranks 1-3 names what differs first)
grep -Eq "rank [123]'s start: --resume or --init-from on some ranks only differs" "$work/out" ||
  fail "--resume on rank 0 of 4 only: $(cat "$work/out")"
# the checkpoint's step and bytes: ranks given other files are refused naming both steps and
# digests (another step; the same step of another run); a file rank 1 cannot open is rank 0's
"$ampx" train "$sgd" --steps 3 --quiet --checkpoint "$work/r3.st" >/dev/null 2>&1 || fail "step 3 run"
"$ampx" train "$sgd" --steps 5 --seed 9 --quiet --checkpoint "$work/r5s.st" >/dev/null 2>&1 ||
  fail "seed 9 run"
for other in r3 r5s; do
  timeout -k 5 30 "$mpiexec" --oversubscribe -np 1 "$ampx" train "$sgd" --quiet --resume "$work/r5.st" : \
    -np 1 "$ampx" train "$sgd" --quiet --resume "$work/$other.st" >"$work/out" 2>&1 &&
    fail "--resume of other files ($other): exit 0"
  want=$([ $other = r3 ] && echo 3 || echo 5)
  grep -Eq "rank 1's checkpoint .*/$other.st is not rank 0's: step $want, digest [0-9a-f]{16} here, step 5, digest [0-9a-f]{16} on rank 0" \
    "$work/out" || fail "--resume of other files ($other): $(cat "$work/out")"
done
timeout -k 5 30 "$mpiexec" --oversubscribe -np 1 "$ampx" train "$sgd" --quiet --steps 8 --resume "$work/r5.st" : \
  -np 1 "$ampx" train "$sgd" --quiet --steps 8 --resume "$work/absent.st" >"$work/out" 2>&1 ||
  fail "--resume of a file on rank 0's machine only: $(cat "$work/out")"
# ---- launchers: torchrun's RANK/WORLD_SIZE/LOCAL_RANK (a wrapper exporting them from
# mpirun's, rotated by SHIFT or grown by GROW) and MPICH's PMI_RANK/PMI_SIZE must agree with
# the rank and size MPI gives; a disagreement stops every rank with both named
cat >"$work/torchrun.sh" <<'SH'
#!/usr/bin/env bash
export RANK=$(((OMPI_COMM_WORLD_RANK + ${SHIFT:-0}) % OMPI_COMM_WORLD_SIZE))
export WORLD_SIZE=$((OMPI_COMM_WORLD_SIZE + ${GROW:-0})) LOCAL_RANK=$OMPI_COMM_WORLD_LOCAL_RANK
exec "$@"
SH
mpi2 bash "$work/torchrun.sh" "$ampx" train "$sgd" --steps 5 --quiet --checkpoint "$work/tr.st" \
  >"$work/out" 2>&1 || fail "RANK/WORLD_SIZE as MPI's: $(cat "$work/out")"
SHIFT=1 mpi2 -x SHIFT bash "$work/torchrun.sh" "$ampx" train "$sgd" --steps 5 --quiet >"$work/out" 2>&1 &&
  fail "RANK rotated against MPI's: exit 0"
# both ranks disagree; whichever says so first ends the job
grep -Eq "rank ([01]) of 2: the launcher's RANK=[01] disagrees with MPI, which made this process rank \1 of 2" \
  "$work/out" || fail "RANK rotated against MPI's: $(cat "$work/out")"
GROW=2 mpi2 -x GROW bash "$work/torchrun.sh" "$ampx" train "$sgd" --steps 5 --quiet >"$work/out" 2>&1 &&
  fail "WORLD_SIZE=4 on 2 ranks: exit 0"
grep -Eq "rank ([01]) of 2: the launcher's WORLD_SIZE=4 disagrees with MPI, which made this process rank \1 of 2" \
  "$work/out" || fail "WORLD_SIZE=4 on 2 ranks: $(cat "$work/out")"
WORLD_SIZE=2 RANK=0 timeout -k 5 30 "$ampx" train "$sgd" --steps 5 --quiet >"$work/out" 2>&1 &&
  fail "WORLD_SIZE=2 without mpirun: exit 0"
grep -q "WORLD_SIZE=2, but no MPI process manager started this process" "$work/out" ||
  fail "WORLD_SIZE=2 without mpirun: $(cat "$work/out")"
# under mpirun in a Slurm allocation the ranks inherit srun's PMI_RANK and SLURM_LOCALID:
# mpirun's own variables are the ones compared
PMI_RANK=5 SLURM_LOCALID=0 mpi2 -x PMI_RANK -x SLURM_LOCALID "$ampx" train "$sgd" --steps 5 --quiet \
  >"$work/out" 2>&1 || fail "inherited PMI_RANK, SLURM_LOCALID under mpirun: $(cat "$work/out")"
# a variable that is not a count, and a malformed test hook, are refused in one line
RANK=x mpi2 -x RANK "$ampx" train "$sgd" --steps 5 --quiet >"$work/out" 2>&1 && fail "RANK=x: exit 0"
grep -q "RANK=x: expected a count, 0 or more" "$work/out" || fail "RANK=x: $(cat "$work/out")"
AMPX_INJECT_COLLECTIVE=0 mpi2 -x AMPX_INJECT_COLLECTIVE "$ampx" train "$sgd" --steps 5 --quiet \
  >"$work/out" 2>&1 && fail "AMPX_INJECT_COLLECTIVE=0: exit 0"
grep -q "AMPX_INJECT_COLLECTIVE=0: expected STEP or STEP@RANK, STEP >= 1" "$work/out" ||
  fail "AMPX_INJECT_COLLECTIVE=0: $(cat "$work/out")"
# PMI's variables read: a process MPI starts alone (a singleton) is not PMI's rank 1 of 2
PMI_SIZE=2 PMI_RANK=1 timeout -k 5 30 "$ampx" train "$sgd" --steps 5 --quiet >"$work/out" 2>&1 &&
  fail "PMI_SIZE=2 in a singleton: exit 0"
grep -q "rank 0 of 1: the launcher's PMI_RANK=1, PMI_SIZE=2 disagree with MPI" "$work/out" ||
  fail "PMI_SIZE=2 in a singleton: $(cat "$work/out")"
# every collective's signature compared (AMPX_DIST_CHECK=1): no false alarm, the same bits
AMPX_DIST_CHECK=1 mpi2 -x AMPX_DIST_CHECK "$ampx" train "$sgd" --batch 32 --checkpoint "$work/chk.st" \
  >"$work/out" 2>&1 || fail "AMPX_DIST_CHECK=1: $(cat "$work/out")"
compare "$work/two.st" "$work/chk.st" --exact || fail "AMPX_DIST_CHECK=1 changes the result"
# a collective made one value short on rank 1 at step 10 (AMPX_INJECT_COLLECTIVE, a test
# hook): the signature check names both ranks' all-reduces, every rank stops at once
t1=$SECONDS
AMPX_DIST_CHECK=1 AMPX_INJECT_COLLECTIVE=10@1 timeout -k 5 30 "$mpiexec" --oversubscribe -np 2 \
  -x AMPX_DIST_CHECK -x AMPX_INJECT_COLLECTIVE "$ampx" train "$sgd" --quiet >"$work/out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "a collective of another size: exit $rc"
n0=$(sed -n 's/.*rank 0 of 2: .*rank 0 an all-reduce of \([0-9]*\) at step 10, rank 1 an all-reduce of \([0-9]*\) at step 10$/\1 \2/p' "$work/out")
[ -n "$n0" ] && [ "${n0% *}" -eq $((${n0#* } + 1)) ] ||
  fail "a collective of another size: rank 0 names '$n0': $(cat "$work/out")"
grep -Eq "rank 1 of 2: the ranks call different collectives: rank 1 an all-reduce of ${n0#* } at step 10, rank 0 an all-reduce of ${n0% *} at step 10" \
  "$work/out" || fail "a collective of another size: rank 1's words: $(cat "$work/out")"
[ $((SECONDS - t1)) -le 10 ] || fail "a collective of another size: the job ended after $((SECONDS - t1)) s"
# among 4 ranks, rank 3's: the first of ranks 0-2 to see it names rank 3's signature
t1=$SECONDS
AMPX_DIST_CHECK=1 AMPX_INJECT_COLLECTIVE=10@3 timeout -k 5 30 "$mpiexec" --oversubscribe -np 4 \
  -x AMPX_DIST_CHECK -x AMPX_INJECT_COLLECTIVE "$ampx" train "$sgd" --quiet >"$work/out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "a collective of another size on rank 3 of 4: exit $rc"
[ $((SECONDS - t1)) -le 10 ] ||
  fail "a collective of another size on rank 3 of 4: the job ended after $((SECONDS - t1)) s"
grep -Eq "rank [012] of 4: the ranks call different collectives: rank [012] an all-reduce of ${n0% *} at step 10, rank 3 an all-reduce of ${n0#* } at step 10" \
  "$work/out" || fail "a collective of another size on rank 3 of 4: $(cat "$work/out")"

find_rank() { # JOB [RANK]: rank RANK's (default 1) pid among mpirun's children (from /proc:
  local v=    # procps may be missing)
  for _ in $(seq 100); do
    for stat in /proc/[0-9]*/stat; do
      { read -r p _ _ ppid _ <"$stat"; } 2>/dev/null || continue
      [ "$ppid" = "$1" ] || continue
      tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -x "OMPI_COMM_WORLD_RANK=${2:-1}" >/dev/null && v=$p
    done
    [ -n "$v" ] && break
    sleep 0.1
  done
  echo "$v"
}
"$mpiexec" --oversubscribe -np 4 "$ampx" train "$sgd" --steps 100000000 --quiet >"$work/out" 2>&1 &
job=$!
victim=$(find_rank $job 2)
sleep 1
t1=$SECONDS
[ -n "$victim" ] || fail "kill -9: rank 2's process not found among mpirun's children"
[ -n "$victim" ] && kill -9 "$victim"
for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then
  fail "kill -9 of rank 2 of 4: the job still runs after 30 s"
  kill -9 $job
fi
wait $job
rc=$?
[ $rc -ne 0 ] || fail "kill -9 of rank 2 of 4: exit 0"
grep -q "rank 2 .*signal 9" "$work/out" || fail "kill -9 of rank 2 of 4: $(cat "$work/out")"
[ $((SECONDS - t1)) -le 30 ] || fail "kill -9: the job ended after $((SECONDS - t1)) s"

# a rank stopped (SIGSTOP) without dying: the others name it within the deadline
stop_rank() { # NP RANK PATTERN: rank RANK of NP stopped under AMPX_DIST_TIMEOUT=3
  local np=$1 rank=$2 pattern=$3 job victim t1 rc
  AMPX_DIST_TIMEOUT=3 "$mpiexec" --oversubscribe -np "$np" -x AMPX_DIST_TIMEOUT "$ampx" train \
    "$sgd" --steps 100000000 --quiet >"$work/out" 2>&1 &
  job=$!
  victim=$(find_rank $job "$rank")
  sleep 2
  t1=$SECONDS
  [ -n "$victim" ] || fail "SIGSTOP: rank $rank of $np not found among mpirun's children"
  [ -n "$victim" ] && kill -STOP "$victim"
  for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
  if kill -0 $job 2>/dev/null; then
    fail "SIGSTOP of rank $rank of $np: the job still runs after 30 s"
    kill -9 $job
  fi
  [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null
  wait $job
  rc=$?
  [ $rc -ne 0 ] || fail "SIGSTOP of rank $rank of $np: exit 0"
  grep -Eq "$pattern" "$work/out" || fail "SIGSTOP of rank $rank of $np: $(cat "$work/out")"
  [ $((SECONDS - t1)) -le 15 ] || fail "SIGSTOP: the job ended after $((SECONDS - t1)) s (deadline 3 s)"
  echo "watchdog: rank $rank of $np stopped, the job ended after $((SECONDS - t1)) s"
}
stop_rank 2 1 "rank 0 of 2: step [0-9]+: .* waited [0-9.]+ s for rank 1, which (has not reached it|reached it and fell silent): stalled or hung"

# ---- 4 ranks (oversubscribed): 4 x 16 reaches 1 x 64's parameters; a stopped rank 2 is named
timeout -k 5 90 "$mpiexec" --oversubscribe -np 4 "$ampx" train "$sgd" --batch 16 \
  --checkpoint "$work/four.st" --metrics "$work/four.jsonl" >"$work/out" 2>&1 ||
  fail "4 ranks: $(cat "$work/out")"
compare "$work/one.st" "$work/four.st" --rel 1e-5 || fail "4 ranks x 16 != 1 x 64 after 50 steps"
d=$(same "$work/one.jsonl" "$work/four.jsonl" --rel 1e-5) || fail "4 ranks x 16 != 1 x 64 at some step: $d"
stop_rank 4 2 "rank [013] of 4: step [0-9]+: .* for rank 2, which (has not reached it|reached it and fell silent)"

# ---- ZeRO-1 (--zero 1): each bucket of gradients is reduce-scattered, each rank unscales,
# checks, squares and updates its shard of the masters and optimizer state alone (the
# non-finite flags a MAX all-reduce, the squared norm a SUM of per-shard sums), the shards
# are all-gathered. With the clip inactive (mlp.json's clip_grad_norm 5: norms below 0.25)
# every step's loss, scale, skip and learning rate equal plain data parallelism's (mixed_bf16
# AdamW with an overflow on rank 1, under AMPX_DIST_CHECK=1), the gradient norm to rounding
# (another summation order), and so does the checkpoint (the state gathered on rank 0), byte
# for byte. With the clip active (f32 SGD on 4 ranks, clip_grad_norm 0.1 below every norm,
# an overflow on rank 2) the same step is skipped and the parameters agree within 1e-5 (the
# clip coefficient differs by rounding). A ZeRO checkpoint resumes without ZeRO bit for bit,
# and with ZeRO on 4 ranks (each its shard of it) within 1e-5; the optimizer state per rank
# is a quarter on 4 ranks
for z in 0 1; do
  AMPX_DIST_CHECK=1 AMPX_INJECT_NONFINITE=10@1 mpi2 -x AMPX_DIST_CHECK -x AMPX_INJECT_NONFINITE \
    "$ampx" train "$src/models/mlp.json" --zero $z --steps 30 --quiet --metrics "$work/z$z.jsonl" \
    --checkpoint "$work/z$z.st" >"$work/out" 2>&1 || fail "mlp.json, --zero $z: $(cat "$work/out")"
  AMPX_INJECT_NONFINITE=10@2 timeout -k 5 90 "$mpiexec" --oversubscribe -np 4 -x AMPX_INJECT_NONFINITE \
    "$ampx" train "$sgd" --batch 16 --zero $z --set optimizer.clip_grad_norm=0.1 --steps 30 --quiet \
    --metrics "$work/s$z.jsonl" --checkpoint "$work/s$z.st" >"$work/out" 2>&1 ||
    fail "4 ranks, --zero $z: $(cat "$work/out")"
done
[ "$(skipped "$work/z1.jsonl")" = 10 ] || fail "--zero 1: skipped '$(skipped "$work/z1.jsonl")', expected 10"
[ "$(skipped "$work/s1.jsonl")" = 10 ] || fail "--zero 1, 4 ranks: skipped '$(skipped "$work/s1.jsonl")', expected 10"
same "$work/z0.jsonl" "$work/z1.jsonl" --norm-rel 1e-6 >"$work/out" ||
  fail "--zero 1 != plain, mlp.json: $(cat "$work/out")"
echo "--zero 1 against plain, mlp.json on 2 ranks: $(cat "$work/out")"
python3 -c "import json,sys; sys.exit(not min(r['grad_norm'] for r in map(json.loads, open(sys.argv[1])) if r['grad_norm']) > 0.1)" \
  "$work/s0.jsonl" || fail "control: the 4-rank run's gradient norms do not all exceed the clip"
d=$(compare "$work/s0.st" "$work/s1.st" --rel 1e-5) || fail "--zero 1 != plain, 4 ranks, clipped: $d"
echo "--zero 1 against plain, 4 ranks, clipped: $d"
same "$work/s0.jsonl" "$work/z0.jsonl" >/dev/null && fail "control: two other runs record the same steps"
compare "$work/z0.st" "$work/z1.st" --exact || fail "--zero 1 writes another checkpoint than plain"
AMPX_DIST_PATH=copy AMPX_INJECT_NONFINITE=10@1 mpi2 -x AMPX_DIST_PATH -x AMPX_INJECT_NONFINITE \
  "$ampx" train "$src/models/mlp.json" --zero 1 --steps 30 --quiet --checkpoint "$work/zh.st" \
  >"$work/out" 2>&1 || fail "--zero 1, host copy: $(cat "$work/out")"
compare "$work/z1.st" "$work/zh.st" --exact || fail "--zero 1: the host-copy path != in place"
AMPX_INJECT_NONFINITE=10@1 mpi2 -x AMPX_INJECT_NONFINITE "$ampx" train "$src/models/mlp.json" --zero 1 \
  --steps 15 --quiet --checkpoint "$work/zc.st" >"$work/out" 2>&1 || fail "--zero 1, 15 steps: $(cat "$work/out")"
mpi2 "$ampx" train "$src/models/mlp.json" --steps 30 --resume "$work/zc.st" --quiet \
  --checkpoint "$work/zp.st" >"$work/out" 2>&1 || fail "--zero 1 resumed plain: $(cat "$work/out")"
compare "$work/z0.st" "$work/zp.st" --exact || fail "a --zero 1 checkpoint resumed without ZeRO != straight"
# 2 ranks x 32 (weight_copies "auto" casts the copies on use at 32) write the copies as one
# process x 64 (which keeps them) does: it resumes them with no note of another precision
# policy, plain and --zero 1, and the other way round
for z in 0 1; do
  mpi2 "$ampx" train "$src/models/mlp.json" --batch 32 --zero $z --steps 5 --quiet \
    --checkpoint "$work/b32z$z.st" >"$work/out" 2>&1 || fail "2 x 32, --zero $z: $(cat "$work/out")"
  "$ampx" train "$src/models/mlp.json" --steps 10 --resume "$work/b32z$z.st" --quiet \
    >"$work/out" 2>&1 || fail "2 x 32, --zero $z, resumed on 1: $(cat "$work/out")"
  grep -q "another precision policy" "$work/out" && fail "2 x 32, --zero $z, resumed on 1: $(cat "$work/out")"
  mpi2 "$ampx" train "$src/models/mlp.json" --batch 32 --zero $z --steps 10 --resume "$work/b32z0.st" \
    --set train.weight_copies=keep --quiet >"$work/out" 2>&1 || fail "2 x 32 resumed on 2 with kept copies, --zero $z: $(cat "$work/out")"
  grep -q "another precision policy" "$work/out" && fail "2 x 32 resumed on 2 with kept copies, --zero $z: $(cat "$work/out")"
done
"$ampx" train "$src/models/mlp.json" --steps 5 --quiet --checkpoint "$work/b64.st" >/dev/null 2>&1 ||
  fail "1 x 64: the run"
mpi2 "$ampx" train "$src/models/mlp.json" --batch 32 --zero 1 --steps 10 --resume "$work/b64.st" --quiet \
  --checkpoint "$work/b64r.st" >"$work/out" 2>&1 || fail "1 x 64 resumed on 2 x 32: $(cat "$work/out")"
python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]
assert sum(k.startswith("ampx.copy.") for k in json.loads(b[8:8+n])) == 2' "$work/b64r.st" ||
  fail "1 x 64 resumed on 2 x 32 --zero 1: its checkpoint lacks the working copies"
# (mlp.json's batch is 64: 4 x 32 is 2 x 64; weight_copies "auto" may decide otherwise at
# another batch, and the checkpoints would hold other tensors)
timeout -k 5 90 "$mpiexec" --oversubscribe -np 4 "$ampx" train "$src/models/mlp.json" --batch 32 --zero 1 \
  --set train.weight_copies=keep --steps 30 --resume "$work/zc.st" --quiet --checkpoint "$work/z4.st" \
  >"$work/out" 2>&1 ||
  fail "--zero 1 resumed on 4 ranks: $(cat "$work/out")"
d=$(compare "$work/z0.st" "$work/z4.st" --rel 1e-5) || fail "--zero 1, 2 -> 4 ranks != 2 ranks straight: $d"
echo "--zero 1, 2 -> 4 ranks against 2 ranks straight: $d"
state() { sed -n 's/^parameters on each rank: .*optimizer state \([0-9.]*\) MiB.*/\1/p' "$1"; }
for z in 0 1; do
  timeout -k 5 90 "$mpiexec" --oversubscribe -np 4 "$ampx" train "$src/models/gpt_tiny.json" --zero $z \
    --steps 1 >"$work/m$z.out" 2>&1 || fail "gpt_tiny, 4 ranks, --zero $z: $(cat "$work/m$z.out")"
done
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (b <= a / 4 + 0.01 and b > 0))" \
  "$(state "$work/m0.out")" "$(state "$work/m1.out")" ||
  fail "--zero 1 on 4 ranks: optimizer state '$(state "$work/m1.out")' MiB per rank, plain '$(state "$work/m0.out")'"
echo "optimizer state per rank, gpt_tiny on 4 ranks: $(state "$work/m0.out") MiB plain, $(state "$work/m1.out") MiB --zero 1"
# the f32 masters of parameters with bf16 copies are sharded too: 2 + 4/4 bytes of 6 each
weights() { sed -n 's/^parameters on each rank: weights \([0-9.]*\) MiB.*/\1/p' "$1"; }
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (a / 3 < b <= 0.6 * a))" \
  "$(weights "$work/m0.out")" "$(weights "$work/m1.out")" ||
  fail "--zero 1 on 4 ranks: weights '$(weights "$work/m1.out")' MiB per rank, plain '$(weights "$work/m0.out")'"
echo "weights per rank, gpt_tiny on 4 ranks: $(weights "$work/m0.out") MiB plain, $(weights "$work/m1.out") MiB --zero 1"

# ---- another world size on resume, the global batch kept (4 x 16 = 2 x 32 = 1 x 64): the
# run goes on as a straight run at the new size, the loss scaler's state carried (an overflow
# at step 10 on rank 2 of 4 halved the scale and skipped a step), within 1e-5 (the ranks'
# summation order differs, so not bit for bit); a control keeps the per-rank batch (global
# 32) and must differ
AMPX_INJECT_NONFINITE=10@2 timeout -k 5 90 "$mpiexec" --oversubscribe -np 4 -x AMPX_INJECT_NONFINITE \
  "$ampx" train "$sgd" --batch 16 --steps 25 --quiet --checkpoint "$work/c4.st" >"$work/out" 2>&1 ||
  fail "4 ranks x 16, 25 steps: $(cat "$work/out")"
mpi2 "$ampx" train "$sgd" --batch 32 --resume "$work/c4.st" --checkpoint "$work/r42.st" >"$work/out" 2>&1 ||
  fail "4 -> 2 ranks: $(cat "$work/out")"
grep -q "^done: step 50, 49 applied, 1 skipped, .*final loss scale 32768" "$work/out" ||
  fail "4 -> 2 ranks: the scaler's state did not carry over: $(cat "$work/out")"
grep -q "note:" "$work/out" && fail "4 -> 2 ranks, the global batch kept: $(grep note: "$work/out")"
d=$(compare "$work/two_i.st" "$work/r42.st" --rel 1e-5) || fail "4 ranks resumed on 2 != 2 ranks straight: $d"
echo "4 -> 2 ranks against 2 ranks straight: $d"
"$ampx" train "$sgd" --batch 64 --resume "$work/c4.st" --quiet --checkpoint "$work/r41.st" \
  >/dev/null 2>"$work/err" || fail "4 ranks -> 1 process: $(cat "$work/err")"
d=$(compare "$work/one_i.st" "$work/r41.st" --rel 1e-5) ||
  fail "4 ranks resumed on 1 process != 1 process straight: $d"
echo "4 ranks -> 1 process against 1 process straight: $d"
timeout -k 5 90 "$mpiexec" --oversubscribe -np 4 "$ampx" train "$sgd" --batch 16 --resume "$work/c2.st" \
  --quiet --checkpoint "$work/r24.st" >"$work/out" 2>&1 || fail "2 -> 4 ranks: $(cat "$work/out")"
d=$(compare "$work/four.st" "$work/r24.st" --rel 1e-5) || fail "2 ranks resumed on 4 != 4 ranks straight: $d"
echo "2 -> 4 ranks against 4 ranks straight: $d"
mpi2 "$ampx" train "$sgd" --batch 16 --resume "$work/c4.st" --quiet --checkpoint "$work/r42b.st" \
  >"$work/out" 2>&1 || fail "4 -> 2 ranks x 16: $(cat "$work/out")"
grep -q "note: .*/c4.st was written by 4 ranks x batch 16 x 1 micro-batch (64 examples a step); this run trains 2 x 16 x 1 (32 a step)" \
  "$work/out" || fail "4 -> 2 ranks x 16: no note of the other global batch: $(cat "$work/out")"
compare "$work/two_i.st" "$work/r42b.st" --differ 1e-5 >/dev/null ||
  fail "control: 4 ranks resumed on 2 x 16 (global 32) match global 64, so the comparison proves nothing"

AMPX_INJECT_NONFINITE_UPDATE=15@1 timeout -k 5 30 "$mpiexec" --oversubscribe -np 2 \
  -x AMPX_INJECT_NONFINITE_UPDATE "$ampx" train "$sgd" --quiet >"$work/out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "diverged ranks: exit $rc"
grep -q "rank 1's scalars block, fp8 scales or weights differ from rank 0's" "$work/out" ||
  fail "diverged ranks: $(cat "$work/out")"

# ---- SIGTERM to mpirun, as a scheduler's preemption: one consistent checkpoint, resumed
# bit-identically (with ZeRO-1 too: the shards are gathered before rank 0 saves)
mlp=$src/models/mlp.json
for zero in 0 1; do
  mpi2 "$ampx" train "$mlp" --steps 10000 --zero $zero --quiet --checkpoint "$work/term_straight.st" \
    >"$work/out" 2>&1 || fail "SIGTERM, zero $zero: the straight run: $(cat "$work/out")"
  rm -f "$work/term.st" "$work/term.jsonl"
  "$mpiexec" --oversubscribe -np 2 "$ampx" train "$mlp" --steps 10000 --zero $zero --quiet \
    --metrics "$work/term.jsonl" --checkpoint "$work/term.st" >"$work/out" 2>&1 &
  pid=$!
  # SIGTERM once the run is under way (its first records written), well before its end
  for _ in $(seq 400); do
    [ "$(wc -l <"$work/term.jsonl" 2>/dev/null || echo 0)" -ge 100 ] && break
    sleep 0.05
  done
  kill -TERM $pid
  wait $pid
  grep -Eq "stopped by SIGTERM at step [0-9]+: checkpoint written" "$work/out" ||
    fail "SIGTERM, zero $zero: no checkpoint written: $(cat "$work/out")"
  [ -f "$work/term.st" ] || { fail "SIGTERM, zero $zero: no checkpoint" && continue; }
  mpi2 "$ampx" train "$mlp" --steps 10000 --zero $zero --quiet --resume "$work/term.st" \
    --checkpoint "$work/term_resumed.st" >"$work/out" 2>&1 ||
    fail "SIGTERM, zero $zero: the resume: $(cat "$work/out")"
  cmp -s "$work/term_straight.st" "$work/term_resumed.st" ||
    fail "SIGTERM, zero $zero: the resumed run's checkpoint differs from the straight run's"
done

[ $fails -eq 0 ] && echo "dist: all checks passed"
exit $((fails > 0))
