"""step_torch.py MODEL MODE STEPS — one training step of an ampx model, written in PyTorch and
run on the CPU with 2 threads, for tools/bench/cpu.sh. Prints the
median milliseconds per step after 5 warm-up steps.

MODEL is
  mlp_wide  models/mlp_wide.json: 16-1024 gelu, layernorm, 1024 gelu, 1024 gelu, 4 logits,
            batch 256, AdamW (lr 0.003, weight decay 0.01), clipping at 1.0
  gpt       models/gpt.json: byte-level, context 128, 4 pre-layernorm blocks of 4-head causal
            attention and a 4x tanh-GELU MLP, d_model 128, learned positions, tied embedding
            and head, AdamW (betas 0.9/0.95, weight decay 0.1 on 2-D weights), clipping at
            1.0, batch 16
MODE is f32 or bf16 (torch.autocast on the CPU: matrix products in bf16, the rest f32).
Inputs are random (the step's cost does not depend on the data)."""
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(2)
torch.manual_seed(1)
T, D, H, L, V, B = 128, 128, 4, 4, 256, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).tril().logical_not(), float("-inf"))
        y = (F.softmax(s.float(), dim=-1).to(v.dtype) @ v).transpose(1, 2).reshape(B, T, D)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(D)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, V), targets.reshape(-1))


class MLPWide(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm1 = nn.Linear(16, 1024), nn.LayerNorm(1024)
        self.fc2, self.fc3, self.logits = nn.Linear(1024, 1024), nn.Linear(1024, 1024), nn.Linear(1024, 4)

    def forward(self, x, label):
        x = self.norm1(F.gelu(self.fc1(x), approximate="tanh"))
        x = F.gelu(self.fc3(F.gelu(self.fc2(x), approximate="tanh")), approximate="tanh")
        return F.cross_entropy(self.logits(x).float(), label)


def main():
    name, mode, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if name == "gpt":
        model = GPT()
        decay = [p for p in model.parameters() if p.dim() >= 2]
        rest = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": rest, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.95))
        batch = lambda: (lambda d: (d[:, :-1], d[:, 1:]))(torch.randint(0, V, (B, T + 1)))
    elif name == "mlp_wide":
        model = MLPWide()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
        batch = lambda: (torch.randn(256, 16), torch.randint(0, 4, (256,)))
    else:
        sys.exit("step_torch.py: unknown model %r (mlp_wide or gpt)" % name)
    times = []
    for step in range(steps + 5):
        x, y = batch()
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step >= 5:
            times.append(1e3 * (time.perf_counter() - t0))
    print("%.3f" % statistics.median(times))


if __name__ == "__main__":
    main()
