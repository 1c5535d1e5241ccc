#!/usr/bin/env bash
# tokenize_cli.sh AMPX SOURCE_DIR — `ampx tokenize` as a user meets it: train, encode (documents,
# the end-of-text token, the validation split) and decode round trips on shipped and generated
# text, llm.c's tokenizer file, the token files `ampx train` reads, `ampx generate
# --tokenizer`, and one line for each bad argument and malformed file.
set -u
ampx=$1
src=$2
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

# expect_fail NAME STATUS WANT_SUBSTRING ARGS...: that exit status, one line on stderr
expect_fail() {
  local name=$1 status=$2 want=$3; shift 3
  "$ampx" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines; lines=$(wc -l <"$tmp/err")
  check "$name: exits $status (got $rc)" test "$rc" -eq "$status"
  check "$name: one line on stderr (got $lines)" test "$lines" -eq 1
  check "$name: mentions '$want'" grep -qF -- "$want" "$tmp/err"
}

odd=$src/tests/text/odd.txt
# a second document: generated words, so the merges have something to learn
python3 -c '
import random
random.seed(5)
w = ["the", "king", "queen", "shall", "not", "be", "it", "is", "what", "say", "thou", "art"]
print("\n\n".join(" ".join(random.choice(w) for _ in range(random.randint(3, 30))) + "." for _ in range(800)))
' >"$tmp/words.txt"

"$ampx" tokenize train --vocab 700 --out "$tmp/tok.json" --llmc-out "$tmp/tok.bin" "$odd" "$tmp/words.txt" 2>"$tmp/err"
rc=$?
check "train exits 0 (got $rc)" test $rc -eq 0
check "train reports its merges" grep -qE "[0-9]+ merges in [0-9.]+ s \([0-9.]+ s of CPU\), vocabulary" "$tmp/err"
check "the JSON file holds version, vocab_size, eot and the merges" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "ampx-bpe" and d["version"] == 1 and d["pre_split"] == "gpt2", d
assert d["eot"] == d["vocab_size"] - 1 and len(d["merges"]) == d["vocab_size"] - 257, d
assert all(a < 256 + i and b < 256 + i for i, (a, b) in enumerate(d["merges"]))' "$tmp/tok.json"
vocab=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$tmp/tok.json")

# one document per file, the end-of-text token before each: decode gives them back exactly
"$ampx" tokenize encode --tokenizer "$tmp/tok.json" --out "$tmp/all.bin" "$odd" "$tmp/words.txt" 2>"$tmp/err"
check "encode exits 0" test $? -eq 0
check "encode reports MB/s" grep -qF "MB/s" "$tmp/err"
{ printf '<|endoftext|>'; cat "$odd"; printf '<|endoftext|>'; cat "$tmp/words.txt"; } >"$tmp/want"
"$ampx" tokenize decode --tokenizer "$tmp/tok.json" "$tmp/all.bin" >"$tmp/back"
check "decode gives the text back byte for byte" cmp -s "$tmp/want" "$tmp/back"
"$ampx" tokenize decode --tokenizer "$tmp/tok.bin" --out "$tmp/back2" "$tmp/all.bin"
check "llm.c's tokenizer file decodes the same" cmp -s "$tmp/want" "$tmp/back2"
check "the token file: llm.c's header, one end-of-text per document" python3 -c '
import struct, sys
b = open(sys.argv[1], "rb").read()
h = struct.unpack("<256i", b[:1024])
assert h[0] == 20240520 and h[1] == 1 and len(b) == 1024 + 2 * h[2], h[:3]
ids = struct.unpack("<%dH" % h[2], b[1024:])
eot = int(sys.argv[2]) - 1
assert ids[0] == eot and ids.count(eot) == 2 and max(ids) < int(sys.argv[2])' "$tmp/all.bin" "$vocab"

# --separator cuts documents; the validation split is the stream's last fraction
"$ampx" tokenize encode --tokenizer "$tmp/tok.json" --out "$tmp/tr.bin" --val-fraction 0.25 \
  --val-out "$tmp/va.bin" --separator '\n\n' "$tmp/words.txt" 2>"$tmp/err"
check "encode --separator reports 800 documents" grep -qF " 800 documents" "$tmp/err"
"$ampx" tokenize decode --tokenizer "$tmp/tok.json" "$tmp/tr.bin" "$tmp/va.bin" >"$tmp/back"
python3 -c '
import sys
t = open(sys.argv[1], "rb").read().split(b"\n\n")
sys.stdout.buffer.write(b"".join(b"<|endoftext|>" + d + (b"\n\n" if i < len(t) - 1 else b"") for i, d in enumerate(t)))' \
  "$tmp/words.txt" >"$tmp/want"
check "documents cut after each separator, each after an end-of-text" cmp -s "$tmp/want" "$tmp/back"
check "the validation file holds a quarter of the tokens" python3 -c '
import os, sys
tr, va = [(os.path.getsize(p) - 1024) // 2 for p in sys.argv[1:]]
assert va == int((tr + va) * 0.25), (tr, va)' "$tmp/tr.bin" "$tmp/va.bin"

# the token files train a model, and generate decodes with the tokenizer
python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
v = int(sys.argv[3])
m["inputs"]["next"]["classes"] = v
m["nodes"][0]["vocab"] = v
m["data"] = {"source": "tokens", "train": sys.argv[4] + "/tr.bin", "val": sys.argv[4] + "/va.bin",
             "eval_windows": 2}
m["train"].update(steps=2, batch=2, log_every=1, eval_every=2)
json.dump(m, open(sys.argv[2], "w"))' "$src/models/gpt_tiny.json" "$tmp/lm.json" "$vocab" "$tmp"
"$ampx" train "$tmp/lm.json" --checkpoint "$tmp/ck.safetensors" >"$tmp/out" 2>&1
check "train reads the token files (exit 0)" test $? -eq 0
check "without bytes_per_token, bits per token only" grep -Eq "^step 2: val_loss [0-9.]+ \([0-9.]+ bits per token\)" "$tmp/out"
# with the bytes a token, validation in bits per byte too: nats / ln 2 / bytes_per_token
"$ampx" train "$tmp/lm.json" --set data.bytes_per_token=2.5 --metrics "$tmp/bpb.jsonl" >"$tmp/out" 2>&1
check "train with data.bytes_per_token (exit 0)" test $? -eq 0
check "bits per byte = bits per token / bytes_per_token" python3 -c '
import json, math, re, sys
out = open(sys.argv[1]).read()
m = re.search(r"^step 2: val_loss ([0-9.]+) \(([0-9.]+) bits per token, ([0-9.]+) bits per byte\)", out, re.M)
assert m, out
nats, bpt, bpb = map(float, m.groups())
assert abs(bpb - nats / math.log(2) / 2.5) < 1e-3 and abs(bpt - 2.5 * bpb) < 2e-3, m.groups()
row = [json.loads(l) for l in open(sys.argv[2]) if "val_loss" in l][-1]
assert abs(row["val_bits_per_byte"] - row["val_loss"] / math.log(2) / 2.5) < 1e-6, row' "$tmp/out" "$tmp/bpb.jsonl"
expect_fail "bytes_per_token on byte-level text" 1 "applies to token files" \
  train "$src/models/gpt_tiny.json" --set data.bytes_per_token=2
"$ampx" generate "$tmp/lm.json" --checkpoint "$tmp/ck.safetensors" --tokenizer "$tmp/tok.json" \
  --prompt "It's the king" --tokens 8 --temperature 0 >"$tmp/out" 2>"$tmp/err"
check "generate --tokenizer exits 0" test $? -eq 0
check "generate --tokenizer prints the prompt, then text" test "$(head -c 13 "$tmp/out")" = "It's the king"
"$ampx" generate "$tmp/lm.json" --checkpoint "$tmp/ck.safetensors" --tokenizer "$tmp/tok.bin" \
  --tokens 8 --temperature 0 >"$tmp/out" 2>"$tmp/err"
check "generate with llm.c's tokenizer file and no prompt starts from end-of-text" test $? -eq 0
expect_fail "generate: llm.c's file cannot encode a prompt" 1 "decodes only" \
  generate "$tmp/lm.json" --checkpoint "$tmp/ck.safetensors" --tokenizer "$tmp/tok.bin" --prompt hi
expect_fail "generate: a tokenizer larger than the model" 1 "more than the model's vocabulary" \
  generate "$src/models/gpt_tiny.json" --checkpoint "$tmp/ck.safetensors" --tokenizer "$tmp/tok.json"

# generation stops at a sampled end-of-text: a model trained on one short document repeated,
# each after an end-of-text token, ends its text where the document ends
for i in $(seq 400); do printf 'the king is dead.\n\n'; done >"$tmp/docs.txt"
"$ampx" tokenize train --vocab 300 --out "$tmp/dtok.json" "$tmp/docs.txt" 2>/dev/null
"$ampx" tokenize encode --tokenizer "$tmp/dtok.json" --separator '\n\n' --out "$tmp/dtr.bin" \
  --val-fraction 0.1 --val-out "$tmp/dva.bin" "$tmp/docs.txt" 2>/dev/null
python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
m["inputs"]["next"]["classes"] = 300
m["nodes"][0]["vocab"] = 300
m["data"] = {"source": "tokens", "train": sys.argv[3] + "/dtr.bin", "val": sys.argv[3] + "/dva.bin",
             "eval_windows": 2}
m["train"].update(steps=60, batch=4, log_every=20, eval_every=0)
json.dump(m, open(sys.argv[2], "w"))' "$src/models/gpt_tiny.json" "$tmp/dlm.json" "$tmp"
"$ampx" train "$tmp/dlm.json" --checkpoint "$tmp/dck.safetensors" >"$tmp/out" 2>&1
check "train on the repeated document (exit 0)" test $? -eq 0
"$ampx" generate "$tmp/dlm.json" --checkpoint "$tmp/dck.safetensors" --tokenizer "$tmp/dtok.json" \
  --prompt "the king" --tokens 30 --temperature 0 --samples 2 >"$tmp/out" 2>"$tmp/err"
check "generate stops at end-of-text (exit 0)" test $? -eq 0
check "each sample ends with its document, fewer tokens than asked" python3 -c '
import re, sys
out, err = open(sys.argv[1]).read(), open(sys.argv[2]).read()
parts = out.split("\n---\n")
assert len(parts) == 2, out
for p in parts:
    assert p.startswith("the king is dead.") and p.count("the king") == 1, out
n = int(re.search(r"(\d+) tokens in", err).group(1))
assert 0 < n < 60, err' "$tmp/out" "$tmp/err"

# without a tokenizer the ids are printed and nothing ends a sample, unless --eot names the id
"$ampx" generate "$tmp/dlm.json" --checkpoint "$tmp/dck.safetensors" --tokens 30 --temperature 0 \
  >"$tmp/ids" 2>"$tmp/err"
check "generate prints ids without a tokenizer (exit 0)" test $? -eq 0
eot=$(awk '{ print $2; exit }' "$tmp/ids") # the second id sampled
"$ampx" generate "$tmp/dlm.json" --checkpoint "$tmp/dck.safetensors" --tokens 30 --temperature 0 \
  --eot "${eot:-0}" >"$tmp/ids_eot" 2>"$tmp/err_eot"
check "generate --eot (exit 0)" test $? -eq 0
check "--eot ID ends the sample where ID was first sampled" python3 -c '
import re, sys
full, cut, eot = open(sys.argv[1]).read().split(), open(sys.argv[2]).read().split(), sys.argv[4]
assert eot in full[1:] and eot not in cut[1:] and cut == full[:full.index(eot, 1)], (eot, full, cut)
n = int(re.search(r"(\d+) tokens in", open(sys.argv[3]).read()).group(1))
assert n == len(cut) < 30, (n, cut)' "$tmp/ids" "$tmp/ids_eot" "$tmp/err_eot" "$eot"
expect_fail "generate: --eot outside the vocabulary" 1 "--eot 300: outside the model's vocabulary of 300" \
  generate "$tmp/dlm.json" --checkpoint "$tmp/dck.safetensors" --eot 300

# usage errors: exit 2
"$ampx" tokenize 2>"$tmp/err"; rc=$?
check "tokenize without a subcommand exits 2" test $rc -eq 2
"$ampx" tokenize encdoe 2>"$tmp/err"; rc=$?
check "a misspelt subcommand: exit 2, the nearest named" test $rc -eq 2
check "a misspelt subcommand names encode" grep -qF "did you mean 'encode'" "$tmp/err"
"$ampx" tokenize train --out "$tmp/x.json" "$odd" 2>/dev/null
check "train without --vocab exits 2" test $? -eq 2
"$ampx" tokenize train --vocab 100 --out "$tmp/x.json" "$odd" 2>"$tmp/err"
check "train --vocab 100 exits 2" test $? -eq 2
"$ampx" tokenize encode --tokenizer "$tmp/tok.json" --out "$tmp/x.bin" --val-fraction 0.1 "$odd" 2>/dev/null
check "encode --val-fraction without --val-out exits 2" test $? -eq 2
"$ampx" tokenize encode --tokenizer "$tmp/tok.json" --out "$tmp/x.bin" --val-fraction 1.5 --val-out "$tmp/y" "$odd" 2>/dev/null
check "encode --val-fraction 1.5 exits 2" test $? -eq 2
"$ampx" help tokenize >"$tmp/out"
check "help tokenize shows the subcommands" grep -q "ampx tokenize encode" "$tmp/out"

# bad files: exit 1, one line that names the file and the field
expect_fail "a missing corpus" 1 "nope.txt" tokenize train --vocab 300 --out "$tmp/x.json" "$tmp/nope.txt"
expect_fail "a missing tokenizer" 1 "nope.json" tokenize encode --tokenizer "$tmp/nope.json" --out "$tmp/x.bin" "$odd"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); d["merges"][3][1] = 9999
open(sys.argv[2], "w").write(json.dumps(d))' "$tmp/tok.json" "$tmp/bad.json"
expect_fail "a merge naming a later token" 1 "bad.json:1:" tokenize encode --tokenizer "$tmp/bad.json" --out "$tmp/x.bin" "$odd"
check "... with its JSON path" grep -qF '$.merges[3][1]: expected a token id in [0, 259)' "$tmp/err"
python3 -c '
import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[4] = 7
open(sys.argv[2], "wb").write(b)' "$tmp/tok.bin" "$tmp/bad.bin"
expect_fail "llm.c's tokenizer file of version 7" 1 "the header's version is 7" tokenize decode --tokenizer "$tmp/bad.bin" "$tmp/all.bin"
expect_fail "encoding with llm.c's tokenizer file" 1 "decodes only" tokenize encode --tokenizer "$tmp/tok.bin" --out "$tmp/x.bin" "$odd"
"$ampx" tokenize train --vocab 300 --out "$tmp/small.json" "$tmp/words.txt" 2>/dev/null
expect_fail "decoding ids outside the vocabulary" 1 "outside the model's vocabulary of" tokenize decode --tokenizer "$tmp/small.json" "$tmp/all.bin"
expect_fail "decoding a text file" 1 "not a token file" tokenize decode --tokenizer "$tmp/tok.json" "$odd"

# memory: a JSON tokenizer file is refused by its size (16 MiB, before it is read) and by its
# count of values (before any is parsed), in well under a second and a few times its bytes
python3 -c '
import sys
head = "{\"format\": \"ampx-bpe\", \"version\": 1, \"pre_split\": \"gpt2\", \"vocab_size\": 300, \"eot\": 299, \"merges\": ["
def write(path, n):
    with open(path, "w") as f:
        f.write(head + ",".join(["[1,2]"] * n) + "]}")
write(sys.argv[1], 3000000)  # 18 MB
write(sys.argv[2], 1500000)  # 9 MB, 4.5 million values
' "$tmp/huge_tok.json" "$tmp/many_tok.json"
expect_fail "a 18 MB JSON tokenizer" 1 "more than the 16 MiB a JSON tokenizer file may be" \
  tokenize encode --tokenizer "$tmp/huge_tok.json" --out "$tmp/x.bin" "$odd"
/usr/bin/time -f "%M" -o "$tmp/rss" "$ampx" tokenize encode --tokenizer "$tmp/many_tok.json" \
  --out "$tmp/x.bin" "$odd" >/dev/null 2>"$tmp/err"
check "a JSON tokenizer of 4.5 million values is refused by their count" \
  grep -qF "4500007 JSON values, more than the 196615 a tokenizer" "$tmp/err"
check "... within 64 MB of memory (got $(tail -1 "$tmp/rss") KB)" test "$(tail -1 "$tmp/rss")" -lt 65536

echo "tokenize_cli: $fails failure(s)"
test $fails -eq 0
