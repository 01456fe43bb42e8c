#!/usr/bin/env python3
"""A JAX training step (jax.jit, XLA's kernels): another framework, nothing
PyTorch-specific. Prints the loss of each step to the last bit.

Expected under `gpurr record` (README.md): output unchanged; XLA's launches
recorded; two recordings identical with XLA_FLAGS=--xla_gpu_deterministic_ops=true
(the check sets it)."""
import sys

from common import arguments, bits

args = arguments(__doc__)
try:
    import jax
    import jax.numpy as jnp
except ImportError as e:
    print(f"no JAX ({e}): skipped")
    sys.exit(77)
if args.device == "cuda" and not any(d.platform == "gpu" for d in jax.devices()):
    print("JAX sees no GPU: skipped")
    sys.exit(77)
device = jax.devices("gpu" if args.device == "cuda" else "cpu")[0]

k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
params = {"w1": jax.random.normal(k1, (64, 128)) * 0.1, "w2": jax.random.normal(k2, (128, 10)) * 0.1}
x = jax.random.normal(k3, (256, 64))
y = jnp.arange(256) % 10
params, x, y = jax.device_put((params, x, y), device)


def loss_fn(p, x, y):
    logits = jnp.tanh(x @ p["w1"]) @ p["w2"]
    return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(y.shape[0]), y])


@jax.jit
def step(p, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
    return jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads), loss


for i in range(args.steps):
    params, loss = step(params, x, y)
    print(f"step {i} loss {bits(loss)}")
