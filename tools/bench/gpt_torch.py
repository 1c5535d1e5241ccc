"""gpt_torch.py MODE STEPS — the training step of models/gpt.json in PyTorch on the CPU, for
tools/bench/gpt_step.sh: the same network (byte-level, context 128, 4 pre-layernorm blocks of
4-head causal attention and a 4x tanh-GELU MLP, d_model 128, learned positions, tied embedding
and head, biases), AdamW (betas 0.9/0.95, weight decay 0.1 on 2-D weights), clipping at 1.0,
batch 16, on random byte windows. MODE is f32 or bf16 (torch.autocast on the CPU). Prints the
median milliseconds per step after 5 warm-up steps."""
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


mode, steps = sys.argv[1], int(sys.argv[2])
model = GPT()
decay = [p for p in model.parameters() if p.dim() >= 2]
rest = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                        lr=1e-3, betas=(0.9, 0.95))
times = []
for step in range(steps + 5):
    data = torch.randint(0, V, (B, T + 1))
    t0 = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
        loss = model(data[:, :-1], data[:, 1:])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if step >= 5:
        times.append(1e3 * (time.perf_counter() - t0))
print("%.3f" % statistics.median(times))
