"""gpt2_models.py [--check] — writes the GPT-2 family as ampx models: models/gpt2_124m.json,
gpt2_350m.json, gpt2_774m.json and gpt2_1558m.json, one file per size because the number of
blocks is the node list itself. Each is GPT-2 as llm.c's train_gpt2.cu trains it: learned
positions (1024 rows), pre-norm blocks, tanh GELU, fused QKV, the head tied to wte, normal
0.02 init with the two residual projections scaled by 1/sqrt(2 x blocks) ("residual_layers"),
AdamW (betas 0.9/0.95, weight decay 0.1 on the 2-D weights), 700 warm-up steps then cosine to
0, clipping at 1.0, 8 x 1024 tokens a micro-batch accumulated 64 times (524 288 tokens a
step, 18 865 steps: one pass over fineweb10B), mixed_bf16 without loss scaling. The peak
learning rates are GPT-3's for the nearest sizes (its Table 2.1: 6e-4 at 125M, 3e-4 at 350M,
2.5e-4 at 760M, 2e-4 at 1.3B). With --check, compares the files in models/ with what it
would write and exits 1 on any difference (tests/train/llmc_cli.sh runs it)."""
import os
import sys

# name: (blocks, heads, width, peak learning rate)
SIZES = {"124m": (12, 12, 768, 0.0006), "350m": (24, 16, 1024, 0.0003),
         "774m": (36, 20, 1280, 0.00025), "1558m": (48, 25, 1600, 0.0002)}


def model(name, blocks, heads, width, lr):
    init = '{"weight": "normal", "std": 0.02}'
    res = f'{{"weight": "normal", "std": 0.02, "residual_layers": {blocks}}}'
    attn_init = f'{{"qkv": {{"std": 0.02}}, "proj": {{"std": 0.02, "residual_layers": {blocks}}}}}'
    nodes = [f'{{"name": "wte", "op": "embedding", "inputs": ["tokens"], "vocab": 50257, "dim": {width}, "init": {init}}}',
             f'{{"name": "wpe", "op": "position_embedding", "inputs": ["wte"], "max_positions": 1024, "init": {init}}}']
    prev = "wpe"
    for i in range(blocks):
        h = f"h{i}"
        nodes += [f'{{"name": "{h}.ln1", "op": "layernorm", "inputs": ["{prev}"]}}',
                  f'{{"name": "{h}.attn", "op": "attention", "inputs": ["{h}.ln1"], "heads": {heads}, "causal": true, "init": {attn_init}}}',
                  f'{{"name": "{h}.res1", "op": "add", "inputs": ["{prev}", "{h}.attn"]}}',
                  f'{{"name": "{h}.ln2", "op": "layernorm", "inputs": ["{h}.res1"]}}',
                  f'{{"name": "{h}.fc", "op": "dense", "inputs": ["{h}.ln2"], "units": {4 * width}, "activation": "gelu", "init": {init}}}',
                  f'{{"name": "{h}.proj", "op": "dense", "inputs": ["{h}.fc.gelu"], "units": {width}, "init": {res}}}',
                  f'{{"name": "{h}.res2", "op": "add", "inputs": ["{h}.res1", "{h}.proj"]}}']
        prev = f"{h}.res2"
    nodes += [f'{{"name": "ln_f", "op": "layernorm", "inputs": ["{prev}"]}}',
              '{"name": "head", "op": "dense", "inputs": ["ln_f"], "share": "wte"}']
    lines = ['{', f'  "name": "gpt2_{name}",', '  "inputs": {',
             '    "tokens": {"dtype": "i32", "shape": [1024]},',
             '    "next": {"dtype": "i32", "shape": [1024], "classes": 50257}', '  },', '  "nodes": [']
    lines += [f"    {n}," for n in nodes[:-1]] + [f"    {nodes[-1]}", "  ],"]
    lines += ['  "loss": {"type": "softmax_cross_entropy", "logits": "head", "labels": "next"},',
              '  "policy": "mixed_bf16",', '  "scaler": "none",',
              f'  "optimizer": {{"type": "adamw", "lr": {lr}, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, '
              '"clip_grad_norm": 1.0, "schedule": {"type": "warmup_cosine", "warmup_steps": 700, "min_lr": 0.0}},',
              '  "data": {"source": "tokens", "train": "$DATA/fineweb10B/fineweb_train_*.bin", '
              '"val": "$DATA/fineweb10B/fineweb_val_000000.bin", "order": "shuffled"},',
              '  "train": {"steps": 18865, "batch": 8, "accumulate": 64, "seed": 1, "log_every": 10, "eval_every": 250}',
              '}']
    return "\n".join(lines) + "\n"


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit(__doc__.split("\n")[0])
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")
    bad = 0
    for name, (blocks, heads, width, lr) in SIZES.items():
        path = os.path.join(root, f"gpt2_{name}.json")
        text = model(name, blocks, heads, width, lr)
        if check:
            have = open(path).read() if os.path.exists(path) else None
            if have != text:
                print(f"{path}: differs from what tools/gpt2_models.py writes", file=sys.stderr)
                bad = 1
        else:
            with open(path, "w") as f:
                f.write(text)
    sys.exit(bad)


if __name__ == "__main__":
    main()
