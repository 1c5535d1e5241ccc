#!/usr/bin/env bash
# llmc_cli.sh AMPX SRC — llm.c's GPT-2 checkpoints both ways, on models/gpt2_124m.json shrunk
# by llmc_gen.py (2 blocks, width 32, context 16 of a 32-row position table, vocabulary 200
# padded to 256): a generated f32 and bf16 checkpoint loads and trains; f32 -> llm.c -> f32
# is bit-identical (checkpoints and exported weights compared byte for byte); the llm.c
# file ampx writes equals the one it read (the padding rows zeroed); every header field,
# a truncated or overlong file and a NaN value are refused with one line naming them.
set -uo pipefail
ampx=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
source "$src/tests/cli_lib.sh"
gen() { python3 "$src/tests/train/llmc_gen.py" "$@"; }

cd "$work" || exit 1
gen model "$src/models/gpt2_124m.json" m.json || fail "llmc_gen.py model"
gen tokens tokens.bin 5000 || fail "llmc_gen.py tokens"
gen ckpt f32.bin 3 && gen ckpt bf16.bin 5 || fail "llmc_gen.py ckpt"
zero=(--steps 1 --set optimizer.lr=0 --quiet) # one step that leaves the weights as they are

# ---- read and train: the loss starts near ln 200 and the run finishes
"$ampx" train m.json --init-from f32.bin --checkpoint a.safetensors >out 2>err ||
  fail "train from llm.c f32: $(cat err)"
grep -q "^done: step 4, 4 applied" out || fail "train from llm.c f32: $(cat out)"
"$ampx" train m.json --init-from bf16.bin --quiet >/dev/null 2>err || fail "train from bf16: $(cat err)"

# ---- what ampx writes is what it read (f32 and bf16), padding rows zero
"$ampx" train m.json --init-from f32.bin "${zero[@]}" --checkpoint c.safetensors >/dev/null 2>err &&
  "$ampx" export m.json --checkpoint c.safetensors --format llmc --out c.bin 2>err ||
  fail "export f32: $(cat err)"
gen same f32.bin c.bin || fail "f32 written back differs from the file read"
"$ampx" train m.json --init-from bf16.bin "${zero[@]}" --checkpoint d.safetensors >/dev/null 2>err &&
  "$ampx" export m.json --checkpoint d.safetensors --format llmc --out d.bin --dtype bf16 2>err ||
  fail "export bf16: $(cat err)"
gen same bf16.bin d.bin || fail "bf16 written back differs from the file read"

# ---- f32 -> llm.c -> f32, bit for bit, from weights ampx trained
"$ampx" export m.json --checkpoint a.safetensors --format llmc --out a.bin 2>err || fail "export: $(cat err)"
"$ampx" train m.json --init-from a.bin "${zero[@]}" --checkpoint b.safetensors >/dev/null 2>err &&
  "$ampx" export m.json --checkpoint b.safetensors --format llmc --out b.bin 2>err ||
  fail "reload: $(cat err)"
cmp -s a.bin b.bin || fail "llm.c files of a round trip differ"
"$ampx" export --checkpoint a.safetensors -o a.st && "$ampx" export --checkpoint b.safetensors -o b.st ||
  fail "safetensors export"
cmp -s a.st b.st || fail "weights after f32 -> llm.c -> f32 differ"

# ---- malformed files: one line naming the field
for c in "magic=1:header\[0\] \(magic\) is 1, expected 20240326" \
  "version=4:header\[1\] \(version\) is 4, expected 3 \(f32\) or 5 \(bf16\)" \
  "maxT=16:header\[2\] \(maxT\) is 16, expected 32" \
  "maxT=64:header\[2\] \(maxT\) is 64, expected 32 .*max_positions" \
  "V=100:header\[3\] \(vocab_size\) is 100, expected 200" \
  "L=3:header\[4\] \(num_layers\) is 3, expected 2" \
  "NH=4:header\[5\] \(num_heads\) is 4, expected 2" \
  "C=64:header\[6\] \(channels\) is 64, expected 32" \
  "Vp=100:header\[7\] \(padded_vocab_size\) is 100, expected vocab_size 200" \
  "trunc=1:139775 bytes; its header declares 139776" \
  "extra=2:139778 bytes; its header declares 139776" \
  "trunc=139000:776 bytes, shorter than llm.c's header of 1024" \
  "nan=5:tensor 0 \(wte\) for \"wte.weight\" element 5 is nan"; do
  gen ckpt bad.bin 3 "${c%%:*}"
  expect_error "llm.c ${c%%:*}" 1 "^ampx train: bad.bin: ${c#*:}" "$ampx" train m.json --init-from bad.bin
done
# a model that is not llm.c's GPT-2
expect_error "not GPT-2" 1 "is not an embedding|parameter tensors" \
  "$ampx" train "$src/models/mlp.json" --steps 1 --init-from f32.bin
# GPT-2's table of 32 rows read by a model of 16 positions needs max_positions
python3 -c 'import json,sys; m=json.load(open("m.json")); [n.pop("max_positions") for n in m["nodes"] if n["op"]=="position_embedding"]; json.dump(m,open("m16.json","w"))'
expect_error "no max_positions" 1 "header\[2\] \(maxT\) is 32, expected 16 .*max_positions" \
  "$ampx" train m16.json --init-from f32.bin
expect_error "export needs a model" 2 "expects MODEL.json" \
  "$ampx" export --checkpoint a.safetensors --format llmc --out x.bin
expect_error "llm.c is f32 or bf16" 2 "--dtype is f32 or bf16" \
  "$ampx" export m.json --checkpoint a.safetensors --format llmc --out x.bin --dtype f16

# ---- llm.c's sequential loader over a glob of shards; resume is bit-identical
for i in 0 1 2; do gen tokens "shard_00$i.bin" $((300 + 100 * i)); done
python3 -c 'import json; m=json.load(open("m.json")); m["data"]={"source":"tokens","train":"shard_*.bin","val":"tokens.bin","order":"sequential"}; json.dump(m,open("seq.json","w"))'
"$ampx" train seq.json --init-from f32.bin --steps 12 --accumulate 2 --checkpoint s12.safetensors \
  >out 2>err || fail "sequential: $(cat err)"
grep -q "batch 2 x 2" out || fail "--accumulate 2 not in force: $(head -1 out)"
"$ampx" train seq.json --init-from f32.bin --steps 5 --accumulate 2 --checkpoint s5.safetensors \
  --quiet >/dev/null 2>err && "$ampx" train seq.json --resume s5.safetensors --steps 12 \
  --accumulate 2 --checkpoint r12.safetensors --quiet >/dev/null 2>err || fail "resume: $(cat err)"
cmp -s s12.safetensors r12.safetensors || fail "sequential: 5 + 7 steps differ from 12"
"$ampx" train seq.json --init-from f32.bin --steps 12 --accumulate 2 --set data.order=random \
  --checkpoint x12.safetensors --quiet >/dev/null 2>err || fail "random: $(cat err)"
cmp -s s12.safetensors x12.safetensors && fail "sequential and random orders read the same"
# shuffled as llm.c's train_gpt2.cu: resumed mid-epoch (an epoch is 9 + 12 + 15 chunks of
# 2 x 16 + 1 tokens; the resume starts at micro-batch 10) it is bit-identical too; it reads
# another order than sequential, and another with another shuffle_seed
"$ampx" train seq.json --init-from f32.bin --steps 12 --accumulate 2 --set data.order=shuffled \
  --checkpoint h12.safetensors --quiet >/dev/null 2>err || fail "shuffled: $(cat err)"
"$ampx" train seq.json --init-from f32.bin --steps 5 --accumulate 2 --set data.order=shuffled \
  --checkpoint h5.safetensors --quiet >/dev/null 2>err && "$ampx" train seq.json --resume \
  h5.safetensors --steps 12 --accumulate 2 --set data.order=shuffled --checkpoint hr12.safetensors \
  --quiet >/dev/null 2>err || fail "shuffled resume: $(cat err)"
cmp -s h12.safetensors hr12.safetensors || fail "shuffled: 5 + 7 steps differ from 12"
cmp -s h12.safetensors s12.safetensors && fail "shuffled and sequential orders read the same"
"$ampx" train seq.json --init-from f32.bin --steps 12 --accumulate 2 --set data.order=shuffled \
  --set data.shuffle_seed=7 --checkpoint h7.safetensors --quiet >/dev/null 2>err ||
  fail "shuffle_seed: $(cat err)"
cmp -s h12.safetensors h7.safetensors && fail "shuffle seeds 42 and 7 read the same"
expect_error "bad order" 1 '\$\.data\.order: unknown value "shuffle" \(did you mean "shuffled"\?\)' \
  "$ampx" train seq.json --steps 1 --set data.order=shuffle
expect_error "seed without shuffle" 1 '\$\.data\.shuffle_seed: "shuffle_seed" applies to "order": "shuffled"' \
  "$ampx" train seq.json --steps 1 --set data.shuffle_seed=3
expect_error "negative seed" 1 '\$\.data\.shuffle_seed: expected an integer in \[0, 2147483647\], found -1' \
  "$ampx" train seq.json --steps 1 --set data.order=shuffled --set data.shuffle_seed=-1
expect_error "shard too small" 1 "training shard 1 of 3 holds 300 tokens, fewer than one sequential chunk of 20 x 16 \+ 1" \
  "$ampx" train seq.json --steps 1 --batch 20
expect_error "no shard" 1 "nothing_\*.bin: no file matches" \
  "$ampx" train seq.json --steps 1 --set 'data.train=nothing_*.bin'
expect_error "accumulate 0" 2 "accumulate" "$ampx" train seq.json --accumulate 0

# ---- The GPT-2 family (tools/gpt2_models.py writes one file a size): the shipped files are
# what the script writes; each loads and plans; weight decay is on exactly the 2-D weights
# (wte, wpe, and per block the QKV, attention output, MLP up and down weights); 124M at
# T = 1024, B = 4 plans under 24 GB, and the larger sizes plan more.
python3 "$src/tools/gpt2_models.py" --check || fail "models/gpt2_*.json differ from tools/gpt2_models.py"
prev=0
for size in 124m 350m 774m 1558m; do
  "$ampx" policy "$src/models/gpt2_$size.json" --set train.batch=4 >"$work/pol" 2>&1 ||
    fail "gpt2_$size: ampx policy: $(tail -1 "$work/pol")"
  total=$(sed -n 's/^memory: .*; total \([0-9.]*\) vs f32 .*/\1/p' "$work/pol")
  [ -n "$total" ] || fail "gpt2_$size: no planned total in: $(grep memory "$work/pol")"
  awk -v t="${total:-0}" -v p="$prev" 'BEGIN { exit !(t > p) }' || fail "gpt2_$size: total $total MiB, not above the smaller size's $prev"
  prev=${total:-0}
  blocks=$(grep -c '^h[0-9]*\.attn\.qkv ' "$work/pol")
  decayed=$(grep -c '; weight decay 0\.1$' "$work/pol")
  [ "$decayed" -eq $((2 + 4 * blocks)) ] || fail "gpt2_$size: $decayed tensors decayed, expected $((2 + 4 * blocks)) for $blocks blocks"
  grep '; weight decay 0\.1$' "$work/pol" | grep -v '\.weight ' && fail "gpt2_$size: decay on a tensor that is not a weight"
  grep -E '\.(bias|gamma|beta) ' "$work/pol" | grep -v '; no weight decay$' && fail "gpt2_$size: a bias or norm parameter decays"
  [ "$size" = 124m ] && { awk -v t="${total:-0}" 'BEGIN { exit !(t > 0 && t < 24 * 1024) }' ||
    fail "gpt2_124m at T=1024, B=4 plans $total MiB, not under 24 GB"; }
done

echo "llmc_cli: $fails failed"
[ "$fails" -eq 0 ]
