"""step_jax.py MODEL MODE STEPS [--shape L,H,D,T,B] [--warmup W] — one training step of an ampx
model, written in JAX (jit) and run on the CPU, for tools/bench/cpu.sh. The same networks,
shapes (--shape as in step_torch.py), optimizers and batches as step_torch.py (see there).
Prints the median milliseconds per step after W warm-up steps (default 5; the first compiles);
a step is the jitted update of parameters and AdamW state from one batch, waited for with
block_until_ready. XLA sizes its thread pool from the CPUs the process may run on
(cpu_bench.py sets the affinity).

MODE is f32 or bf16. bf16 follows Flax's mixed precision (dtype=bfloat16, param_dtype=float32):
inputs and weights of every dense layer and attention product are cast to bf16 and its output
stays bf16; layernorm, softmax and the loss compute in f32; parameters, gradients and the
optimizer state stay f32. The dtypes are asserted while the step is traced (every dense
output, the attention scores' inputs and the head in the compute dtype) and after the first
step (parameters and optimizer state f32); a mismatch exits non-zero. Inputs are random."""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
import jax
import jax.numpy as jnp
import optax

T, D, H, L, V, B = 128, 128, 4, 4, 256, 16


def want(x, cd, what):
    """Trace-time check: x is of the compute dtype cd (a Python assert on the static dtype)."""
    if x.dtype != cd:
        sys.exit(f"step_jax.py: {what} is {x.dtype}, not {jnp.dtype(cd).name}")
    return x


def dense(p, x, cd):
    return want((x.astype(cd) @ p["w"].astype(cd)) + p["b"].astype(cd), cd, "a dense output")


def layernorm(p, x):
    x = x.astype(jnp.float32)
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * p["g"] + p["b"]


def gelu(x):
    return jax.nn.gelu(x, approximate=True)


def xent(logits, labels):
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.take_along_axis(logp, labels[..., None], axis=-1).mean()


def init_dense(key, n_in, n_out, std=None):
    std = std if std is not None else (1.0 / n_in) ** 0.5
    return {"w": std * jax.random.normal(key, (n_in, n_out), jnp.float32), "b": jnp.zeros((n_out,), jnp.float32)}


def init_ln(n):
    return {"g": jnp.ones((n,), jnp.float32), "b": jnp.zeros((n,), jnp.float32)}


def mlp_wide():
    k = jax.random.split(jax.random.PRNGKey(1), 4)
    params = {"fc1": init_dense(k[0], 16, 1024), "norm1": init_ln(1024), "fc2": init_dense(k[1], 1024, 1024),
              "fc3": init_dense(k[2], 1024, 1024), "logits": init_dense(k[3], 1024, 4)}

    def loss(p, x, y, cd):
        h = layernorm(p["norm1"], gelu(dense(p["fc1"], x, cd)))
        h = gelu(dense(p["fc3"], gelu(dense(p["fc2"], h, cd)), cd))
        return xent(dense(p["logits"], h, cd), y)

    def batch(key):
        a, b = jax.random.split(key)
        return jax.random.normal(a, (256, 16), jnp.float32), jax.random.randint(b, (256,), 0, 4)

    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(3e-3, weight_decay=0.01))
    return params, loss, batch, opt


def gpt():
    keys = iter(jax.random.split(jax.random.PRNGKey(1), 4 * L + 2))
    blocks = [{"ln1": init_ln(D), "qkv": init_dense(next(keys), D, 3 * D), "proj": init_dense(next(keys), D, D),
               "ln2": init_ln(D), "fc": init_dense(next(keys), D, 4 * D, 0.02),
               "out": init_dense(next(keys), 4 * D, D, 0.02)} for _ in range(L)]
    params = {"wte": 0.02 * jax.random.normal(next(keys), (V, D)), "wpe": 0.02 * jax.random.normal(next(keys), (T, D)),
              "blocks": blocks, "ln_f": init_ln(D)}
    mask = jnp.tril(jnp.ones((T, T), bool))

    def attention(p, x, cd):
        q, k, v = jnp.split(dense(p["qkv"], x, cd), 3, axis=-1)
        q, k, v = (t.reshape(B, T, H, D // H).transpose(0, 2, 1, 3) for t in (q, k, v))
        s = want(q @ k.transpose(0, 1, 3, 2), cd, "Q K^T").astype(jnp.float32) * (1.0 / (D // H) ** 0.5)
        s = jnp.where(mask, s, -jnp.inf)
        y = want(jax.nn.softmax(s, axis=-1).astype(cd) @ v, cd, "P V")
        return dense(p["proj"], y.transpose(0, 2, 1, 3).reshape(B, T, D), cd)

    def loss(p, x, y, cd):
        h = p["wte"][x] + p["wpe"][None]
        for b in p["blocks"]:
            h = h + attention(b, layernorm(b["ln1"], h), cd).astype(jnp.float32)
            h = h + dense(b["out"], gelu(dense(b["fc"], layernorm(b["ln2"], h), cd)), cd).astype(jnp.float32)
        logits = want(layernorm(p["ln_f"], h).astype(cd) @ p["wte"].astype(cd).T, cd, "the head")
        return xent(logits, y)

    def batch(key):
        d = jax.random.randint(key, (B, T + 1), 0, V)
        return d[:, :-1], d[:, 1:]

    decay = lambda p: jax.tree_util.tree_map(lambda a: a.ndim >= 2, p)
    opt = optax.chain(optax.clip_by_global_norm(1.0),
                      optax.adamw(1e-3, b1=0.9, b2=0.95, weight_decay=0.1, mask=decay))
    return params, loss, batch, opt


def all_f32(tree, what):
    bad = [str(x.dtype) for x in jax.tree_util.tree_leaves(tree)
           if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype != jnp.float32]
    if bad:
        sys.exit(f"step_jax.py: {what} not all f32: {sorted(set(bad))}")


def main():
    global L, H, D, T, B
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["mlp_wide", "gpt"])
    ap.add_argument("mode", choices=["f32", "bf16"])
    ap.add_argument("steps", type=int)
    ap.add_argument("--shape", default="4,4,128,128,16", help="L,H,D,T,B of gpt")
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    if a.warmup < 1:
        sys.exit("step_jax.py: --warmup must be 1 or more (the first step compiles)")
    L, H, D, T, B = (int(x) for x in a.shape.split(","))
    name, steps = a.model, a.steps
    params, loss, batch, opt = (mlp_wide if name == "mlp_wide" else gpt)()
    cd = jnp.bfloat16 if a.mode == "bf16" else jnp.float32
    state = opt.init(params)

    @jax.jit
    def step(params, state, x, y):
        l, g = jax.value_and_grad(loss)(params, x, y, cd)
        upd, state = opt.update(g, state, params)
        return optax.apply_updates(params, upd), state, l

    key = jax.random.PRNGKey(2)
    data = [batch(k) for k in jax.random.split(key, steps + a.warmup)]
    times = []
    for i, (x, y) in enumerate(data):
        t0 = time.perf_counter()
        params, state, l = step(params, state, x, y)
        l.block_until_ready()
        if i == 0:
            all_f32(params, "parameters")
            all_f32(state, "the optimizer state")
        if i >= a.warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    print("%.3f" % statistics.median(times))


if __name__ == "__main__":
    main()
