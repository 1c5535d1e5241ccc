"""step_torch.py MODEL MODE STEPS [--shape L,H,D,T,B] [--warmup W] [--threads N] — one training
step of an ampx model, written in PyTorch and run on the CPU, for tools/bench/cpu.sh. Prints
the median milliseconds per step after W warm-up steps (default 5).

MODEL is
  mlp_wide  models/mlp_wide.json: 16-1024 gelu, layernorm, 1024 gelu, 1024 gelu, 4 logits,
            batch 256, AdamW (lr 0.003, weight decay 0.01), clipping at 1.0
  gpt       models/gpt.json: byte-level (vocabulary 256), L pre-layernorm blocks of H-head
            causal attention and a 4x tanh-GELU MLP, width D, context T, learned positions,
            tied embedding and head, AdamW (betas 0.9/0.95, weight decay 0.1 on 2-D weights),
            clipping at 1.0, batch B; --shape L,H,D,T,B (default 4,4,128,128,16, gpt.json;
            12,12,768,64,4 is the GPT-2 124M shape at a byte vocabulary)
  cnn       models/cnn_mnist.json: [1, 28, 28] images, 3x3 convolutions of 32 and 64 filters
            ("same" padding, no bias), each with batch norm, relu and 2x2 max pooling, 3136-128
            relu, dropout 0.25, 10 logits; batch 64, AdamW (lr 0.002, weight decay 1e-4), no
            clipping
MODE is f32, bf16 (torch.autocast on the CPU: matrix products in bf16, the rest f32), or
sdpa_f32 / sdpa_bf16: the same with attention as one
torch.nn.functional.scaled_dot_product_attention call (is_causal) instead of the written-out
Q K^T, mask, softmax and P V. The first step checks the dtypes it claims: parameters and
gradients f32, and the outputs of the projections, the attention and the head bf16 under
autocast (f32 otherwise); a mismatch exits non-zero. Threads: N (default 2). Inputs are
random (the step's cost does not depend on the data)."""
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(1)
L, H, D, T, B, V = 4, 4, 128, 128, 16, 256
SEEN = {}  # name -> dtype of an activation, filled during the first (checked) step


def seen(name, t):
    if SEEN.get("on"):
        SEEN[name] = t.dtype
    return t


class Block(nn.Module):
    def __init__(self, sdpa):
        super().__init__()
        self.sdpa = sdpa
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.register_buffer("masked", torch.ones(T, T, dtype=torch.bool).tril().logical_not(), persistent=False)

    def forward(self, x):
        q, k, v = seen("qkv", self.qkv(self.ln1(x))).split(D, dim=2)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))
            s = s.masked_fill(self.masked, float("-inf"))
            y = F.softmax(s.float(), dim=-1).to(v.dtype) @ v
        y = seen("attention", y).transpose(1, 2).reshape(B, T, D)
        x = x + self.proj(y)
        return x + self.out(seen("fc", F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, sdpa):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Block(sdpa) for _ in range(L))
        self.ln_f = nn.LayerNorm(D)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = seen("head", self.ln_f(x) @ self.wte.weight.t())
        return F.cross_entropy(logits.float().view(-1, V), targets.reshape(-1))


class MLPWide(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm1 = nn.Linear(16, 1024), nn.LayerNorm(1024)
        self.fc2, self.fc3, self.logits = nn.Linear(1024, 1024), nn.Linear(1024, 1024), nn.Linear(1024, 4)

    def forward(self, x, label):
        x = self.norm1(F.gelu(self.fc1(x), approximate="tanh"))
        x = F.gelu(self.fc3(seen("fc2", F.gelu(self.fc2(x), approximate="tanh"))), approximate="tanh")
        return F.cross_entropy(seen("head", self.logits(x)).float(), label)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
        self.conv2, self.bn2 = nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64)
        self.fc1, self.logits, self.drop = nn.Linear(3136, 128), nn.Linear(128, 10), nn.Dropout(0.25)

    def forward(self, x, label):
        x = F.max_pool2d(F.relu(self.bn1(seen("conv1", self.conv1(x)))), 2)
        x = F.max_pool2d(F.relu(self.bn2(seen("conv2", self.conv2(x)))), 2)
        x = self.drop(F.relu(self.fc1(x.flatten(1))))
        return F.cross_entropy(seen("head", self.logits(x)).float(), label)


def check_dtypes(model, low, names):
    """Exits when a parameter, a gradient or a recorded activation is not the dtype the mode
    claims: f32 master weights and gradients always, bf16 products under autocast."""
    want = torch.bfloat16 if low else torch.float32
    bad = [f"{n} {p.dtype}" for n, p in model.named_parameters() if p.dtype != torch.float32]
    bad += [f"{n}.grad {p.grad.dtype}" for n, p in model.named_parameters()
            if p.grad is not None and p.grad.dtype != torch.float32]
    bad += [f"{n} {d} (want {want})" for n, d in SEEN.items() if n != "on" and d != want]
    bad += [f"{n} not recorded" for n in names if n not in SEEN]
    if bad:
        sys.exit("step_torch.py: dtypes not as the mode says: " + ", ".join(bad))


def main():
    global L, H, D, T, B
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["mlp_wide", "gpt", "cnn"])
    ap.add_argument("mode", choices=["f32", "bf16", "sdpa_f32", "sdpa_bf16"])
    ap.add_argument("steps", type=int)
    ap.add_argument("--shape", default="4,4,128,128,16", help="L,H,D,T,B of gpt")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.warmup < 1:
        sys.exit("step_torch.py: --warmup must be 1 or more (the first step is the checked one)")
    torch.set_num_threads(a.threads)
    L, H, D, T, B = (int(x) for x in a.shape.split(","))
    low, sdpa = a.mode.endswith("bf16"), a.mode.startswith("sdpa")
    if a.model == "gpt":
        model = GPT(sdpa)
        decay = [p for p in model.parameters() if p.dim() >= 2]
        rest = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": rest, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.95))
        batch = lambda: (lambda d: (d[:, :-1], d[:, 1:]))(torch.randint(0, V, (B, T + 1)))
    elif sdpa:
        sys.exit("step_torch.py: %s has no attention (modes f32, bf16)" % a.model)
    elif a.model == "cnn":
        model = CNN()
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
        batch = lambda: (torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,)))
    else:
        model = MLPWide()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
        batch = lambda: (torch.randn(256, 16), torch.randint(0, 4, (256,)))
    times = []
    for step in range(a.steps + a.warmup):
        x, y = batch()
        SEEN["on"] = step == 0
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.model != "cnn":
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if step == 0:
            names = {"gpt": ("qkv", "attention", "fc", "head"), "cnn": ("conv1", "conv2"),
                     "mlp_wide": ("fc2", "head")}[a.model]
            check_dtypes(model, low, names)
        opt.step()
        if step >= a.warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    print("%.3f" % statistics.median(times))


if __name__ == "__main__":
    main()
