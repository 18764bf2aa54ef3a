"""Small example JAX models used by the demo and by the plugin's own tests.

The models are pure ``jax.numpy``. Their parameters and example inputs are
drawn with NumPy and placed with ``jax.device_put``, so building them compiles
nothing: every compile a test sees is one of its own. Importing this module
only defines functions: no arrays are created until a function is called.

The MLP depth (number of hidden layers) used by :func:`mlp_example_args` is
read from the ``JAXMODELS_DEPTH`` environment variable (default 2). Because
the layer loop is a Python loop, it unrolls into the XLA module, so a larger
depth gives a proportionally larger module and a longer compile. The demo
uses this to inject a compile-time regression.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "ATTENTION_DIM",
    "ATTENTION_SEQ",
    "BATCH",
    "DEFAULT_DEPTH",
    "DEPTH_ENV_VAR",
    "HIDDEN_WIDTH",
    "IN_WIDTH",
    "MAX_DEPTH",
    "OUT_WIDTH",
    "AttentionParams",
    "MLPParams",
    "attention_apply",
    "attention_example_args",
    "attention_init",
    "attention_loss",
    "example_inputs",
    "mlp_apply",
    "mlp_example_args",
    "mlp_init",
    "mlp_loss",
    "mlp_widths",
    "model_depth",
]

DEPTH_ENV_VAR = "JAXMODELS_DEPTH"
DEFAULT_DEPTH = 2
MAX_DEPTH = 1024

BATCH = 8
IN_WIDTH = 16
HIDDEN_WIDTH = 32
OUT_WIDTH = 4
ATTENTION_SEQ = 8
ATTENTION_DIM = 16

MLPParams = list[tuple[jax.Array, jax.Array]]
"""MLP parameters: one ``(weight, bias)`` pair per layer."""

AttentionParams = dict[str, jax.Array]
"""Attention parameters: ``wq``, ``wk``, ``wv``, ``wo``, each ``(dim, dim)``."""


def model_depth() -> int:
    """Return the MLP hidden-layer count from ``JAXMODELS_DEPTH`` (default 2).

    An unset or blank variable gives :data:`DEFAULT_DEPTH`. Anything other
    than an integer in ``1..MAX_DEPTH`` raises :class:`ValueError`.
    """
    raw = os.environ.get(DEPTH_ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_DEPTH
    try:
        depth = int(raw)
    except ValueError:
        msg = f"{DEPTH_ENV_VAR} must be an integer, got {raw!r}"
        raise ValueError(msg) from None
    if not 1 <= depth <= MAX_DEPTH:
        msg = f"{DEPTH_ENV_VAR} must be between 1 and {MAX_DEPTH}, got {depth}"
        raise ValueError(msg)
    return depth


def mlp_widths(depth: int | None = None) -> list[int]:
    """Return the layer widths ``[in, hidden * depth, out]`` of the example MLP.

    ``depth`` defaults to :func:`model_depth`.
    """
    if depth is None:
        depth = model_depth()
    if depth < 1:
        msg = f"depth must be at least 1, got {depth}"
        raise ValueError(msg)
    return [IN_WIDTH, *([HIDDEN_WIDTH] * depth), OUT_WIDTH]


def _normal(rng: np.random.Generator, shape: Sequence[int], scale: float = 1.0) -> jax.Array:
    """A float32 normal array on the default device, without compiling anything."""
    return jax.device_put((scale * rng.standard_normal(tuple(shape))).astype(np.float32))


def _dense_init(rng: np.random.Generator, fan_in: int, fan_out: int) -> jax.Array:
    """Return a ``(fan_in, fan_out)`` weight with variance ``1 / fan_in``."""
    return _normal(rng, (fan_in, fan_out), 1.0 / math.sqrt(fan_in))


def mlp_init(seed: int, widths: Sequence[int]) -> MLPParams:
    """Initialise (deterministically from ``seed``) an MLP whose layer sizes are ``widths``
    (input first)."""
    if len(widths) < 2:
        msg = f"widths needs at least an input and an output size, got {widths!r}"
        raise ValueError(msg)
    rng = np.random.default_rng(seed)
    return [
        (_dense_init(rng, fan_in, fan_out), jax.device_put(np.zeros((fan_out,), np.float32)))
        for fan_in, fan_out in itertools.pairwise(widths)
    ]


def mlp_apply(params: MLPParams, x: jax.Array) -> jax.Array:
    """Apply the MLP to ``x`` of shape ``(..., in)``; tanh on hidden layers."""
    *hidden, (w_out, b_out) = params
    for w, b in hidden:
        x = jnp.tanh(x @ w + b)
    return x @ w_out + b_out


def mlp_loss(params: MLPParams, x: jax.Array, y: jax.Array) -> jax.Array:
    """Return the mean squared error of ``mlp_apply(params, x)`` against ``y``."""
    return jnp.mean((mlp_apply(params, x) - y) ** 2)


def attention_init(seed: int, dim: int) -> AttentionParams:
    """Initialise (deterministically from ``seed``) a single-head self-attention block of
    width ``dim``."""
    rng = np.random.default_rng(seed)
    return {name: _dense_init(rng, dim, dim) for name in ("wq", "wk", "wv", "wo")}


def _softmax(logits: jax.Array) -> jax.Array:
    """Numerically stable softmax over the last axis."""
    shifted = logits - jnp.max(logits, axis=-1, keepdims=True)
    weights = jnp.exp(shifted)
    return weights / jnp.sum(weights, axis=-1, keepdims=True)


def attention_apply(params: AttentionParams, x: jax.Array) -> jax.Array:
    """Apply residual self-attention to ``x`` of shape ``(..., seq, dim)``."""
    q = x @ params["wq"]
    k = x @ params["wk"]
    v = x @ params["wv"]
    scores = (q @ jnp.swapaxes(k, -1, -2)) / math.sqrt(x.shape[-1])
    return x + (_softmax(scores) @ v) @ params["wo"]


def attention_loss(params: AttentionParams, x: jax.Array) -> jax.Array:
    """Return the mean squared activation of ``attention_apply(params, x)``."""
    return jnp.mean(attention_apply(params, x) ** 2)


def example_inputs(shape: Sequence[int], *, seed: int = 0) -> jax.Array:
    """Return a deterministic standard-normal float32 array of ``shape``."""
    return _normal(np.random.default_rng(seed), shape)


@functools.cache
def _mlp_example_arrays(depth: int) -> tuple[MLPParams, jax.Array, jax.Array]:
    """Build (once per process and depth) the arrays behind :func:`mlp_example_args`."""
    params = mlp_init(0, mlp_widths(depth))
    x = example_inputs((BATCH, IN_WIDTH), seed=1)
    y = example_inputs((BATCH, OUT_WIDTH), seed=2)
    return params, x, y


@functools.cache
def _attention_example_arrays() -> tuple[AttentionParams, jax.Array]:
    """Build (once per process) the arrays behind :func:`attention_example_args`."""
    params = attention_init(3, ATTENTION_DIM)
    x = example_inputs((BATCH, ATTENTION_SEQ, ATTENTION_DIM), seed=4)
    return params, x


def mlp_example_args(
    depth: int | None = None,
) -> tuple[MLPParams, jax.Array, jax.Array]:
    """Return ``(params, x, y)`` for :func:`mlp_loss`; depth from the env by default.

    ``x`` is ``(BATCH, IN_WIDTH)`` and ``y`` is ``(BATCH, OUT_WIDTH)``. The
    arrays are built once per process and depth, and building them compiles
    nothing.
    """
    if depth is None:
        depth = model_depth()
    params, x, y = _mlp_example_arrays(depth)
    return list(params), x, y


def attention_example_args() -> tuple[AttentionParams, jax.Array]:
    """Return ``(params, x)`` for :func:`attention_loss`.

    ``x`` is ``(BATCH, ATTENTION_SEQ, ATTENTION_DIM)``, built once per process.
    """
    params, x = _attention_example_arrays()
    return dict(params), x
