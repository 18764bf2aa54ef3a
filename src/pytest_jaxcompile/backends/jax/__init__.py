"""The JAX backend: JAX's compile events, cache_state classification, the fixture, census.

`BACKEND` (`backend.JaxBackend`) is what the session and the gate reach of JAX, through the
`Backend` protocol; importing this package imports no JAX.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pytest_jaxcompile.backends.jax.backend import BACKEND

__all__ = ["BACKEND"]
