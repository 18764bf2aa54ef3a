"""The embedded example suite: an MLP and an attention block under jit, grad and vmap.

Each test measures its transforms with the ``jax_compile`` fixture and keeps using the
compiled executables, as a real test would.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxmodels import (
    attention_apply,
    attention_example_args,
    attention_loss,
    mlp_apply,
    mlp_example_args,
    mlp_loss,
)

from pytest_jaxcompile import JaxCompile


def test_mlp(jax_compile: JaxCompile) -> None:
    params, x, y = mlp_example_args()
    forward = jax_compile(mlp_apply, params, x, transform="jit")
    value_and_grad = jax_compile(jax.value_and_grad(mlp_loss), params, x, y, transform="vag")
    batched = jax_compile(
        jax.vmap(mlp_loss, in_axes=(None, 0, 0)),
        params,
        x[:, None],
        y[:, None],
        transform="vmap",
    )
    loss, grads = value_and_grad(params, x, y)
    assert forward(params, x).shape == y.shape
    assert batched(params, x[:, None], y[:, None]).shape == (x.shape[0],)
    assert jnp.isfinite(loss) and len(grads) == len(params)


def test_attention(jax_compile: JaxCompile) -> None:
    params, x = attention_example_args()
    forward = jax_compile(attention_apply, params, x, transform="jit")
    value_and_grad = jax_compile(jax.value_and_grad(attention_loss), params, x, transform="vag")
    loss, grads = value_and_grad(params, x)
    assert forward(params, x).shape == x.shape
    assert jnp.isfinite(loss) and set(grads) == set(params)
