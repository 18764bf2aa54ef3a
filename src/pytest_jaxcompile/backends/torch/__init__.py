"""The torch backend: ``torch.compile`` frames from torch's own compilation metrics.

`BACKEND` (`backend.TorchBackend`) is what the session and the gate reach of torch, through
the `Backend` protocol; importing this package imports no torch.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pytest_jaxcompile.backends.torch.backend import BACKEND

__all__ = ["BACKEND"]
