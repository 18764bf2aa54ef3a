"""XLA_FLAGS as XLA read them: the value when JAX's backend started.

XLA parses ``XLA_FLAGS`` once per process, when JAX starts its first backend (the first
array, device query or compile); a value set later is what the environment shows, not what
XLA compiles with. JAX's persistent-cache key, by contrast, hashes the environment's
``XLA_FLAGS`` anew for every compile. The settings guard judges required flags on the value
XLA read, captured here:

- JAX imported, no backend started: a backend-initialisation hook (JAX's
  ``register_backend_initialization_hook``) reads ``XLA_FLAGS`` as the backend starts.
- JAX not imported yet: an import hook registers that hook as soon as JAX's ``xla_bridge``
  module has loaded, before anything can start a backend. Nothing here imports JAX.
- A backend already started when watching began (a plugin or ``conftest.py`` created
  arrays): the value at that moment, the best available, marked ``session_start``.

The capture is process-wide, as XLA's parse is: the first backend start counts. It is kept
on the hook object in JAX's own hook list, so a second session in the same process (or this
module imported afresh) finds it instead of starting over.

What the backend-start value is compared with is `FlagsWatch.at_load`: ``XLA_FLAGS`` as the
process started, where that is known (``activation.xla_flags_baseline``), else when the
plugin's hooks first ran; either way before any ``conftest.py`` was imported. The watch notes, per
pytest session, each module (a ``conftest.py``, a plugin, a test module) or test phase after
which the variable had a new value, so a clobber can name where it happened.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_jaxcompile._constants import XLA_FLAGS_AT_LOAD_KEY, XLA_FLAGS_SINCE_PLUGIN_LOAD
from pytest_jaxcompile._constants import XLA_FLAGS_ENV as XLA_FLAGS_ENV  # re-exported

XLA_BRIDGE = "jax._src.xla_bridge"
CAPTURED_AT_BACKEND_START = "backend_start"
CAPTURED_AT_SESSION_START = "session_start"
_MARKER = "_pytest_jaxcompile_backend_start"  # found by name: survives re-imports of this module


@dataclass(frozen=True)
class BackendStart:
    """``XLA_FLAGS`` (None: unset) when XLA read it, and how that moment was known."""

    xla_flags: str | None
    captured_at: str  # CAPTURED_AT_BACKEND_START or CAPTURED_AT_SESSION_START
    # CAPTURED_AT_SESSION_START: XLA_FLAGS before any conftest.py (the session's baseline,
    # where the watch knew it): the flags known to have been there when XLA read them
    baseline: str | None = None


class _Capture:
    """The hook JAX calls with every backend it starts; keeps the first start's value."""

    def __init__(self) -> None:
        setattr(self, _MARKER, True)
        self.value: BackendStart | None = None
        self.registering = False  # JAX calls the hook at once for backends already started
        self.baseline: str | None = None  # the session's baseline, while registering

    def __call__(self, backend: Any) -> None:
        if self.value is None:
            now = os.environ.get(XLA_FLAGS_ENV)
            self.value = (
                BackendStart(now, CAPTURED_AT_SESSION_START, self.baseline)
                if self.registering
                else BackendStart(now, CAPTURED_AT_BACKEND_START)
            )


def _capture_in(bridge: ModuleType) -> Any | None:
    """Our hook in JAX's hook list, or None (not registered; or a JAX without the list)."""
    hooks = getattr(bridge, "_backend_initialization_hooks", None)
    if not isinstance(hooks, list):
        return None
    return next((hook for hook in hooks if getattr(hook, _MARKER, False)), None)


def _register(bridge: ModuleType, baseline: str | None = None) -> None:
    register = getattr(bridge, "register_backend_initialization_hook", None)
    if register is None or _capture_in(bridge) is not None:
        return
    capture = _Capture()
    capture.baseline = baseline
    capture.registering = True
    try:
        register(capture)
    finally:
        capture.registering = False


class _AfterExec(importlib.abc.Loader):
    """Runs the real loader, puts it back on the module, then registers the hook."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        _register(module)


class _WatchImport(importlib.abc.MetaPathFinder):
    """Waits for JAX's xla_bridge module to be imported; never imports anything itself."""

    def __init__(self) -> None:
        setattr(self, _MARKER, True)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != XLA_BRIDGE:
            return None
        _unwatch_imports()
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(fullname, path, target) if find_spec is not None else None
            if isinstance(spec, importlib.machinery.ModuleSpec):
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _AfterExec(spec.loader)
                return spec
        return None


def _unwatch_imports() -> None:
    sys.meta_path[:] = [finder for finder in sys.meta_path if not getattr(finder, _MARKER, False)]


@dataclass(frozen=True)
class FlagsChange:
    """``XLA_FLAGS`` had a new `value` (None: unset) once `where` had run."""

    where: str  # "conftest.py", "test_models.py", "test_models.py::test_b (call)"
    value: str | None


class FlagsWatch:
    """``XLA_FLAGS`` from the plugin's load on: the value before any ``conftest.py`` ran,
    and each module or test phase after which it had changed (a pytest plugin, registered
    by `watch`; it reads the environment only)."""

    def __init__(self, rootpath: Path, at_load: str | None, since: str = "") -> None:
        self.at_load = at_load
        self.since = since or XLA_FLAGS_SINCE_PLUGIN_LOAD  # when `at_load` was taken
        self.changes: list[FlagsChange] = []
        self._rootpath = rootpath
        self._last = self.at_load

    def note(self, where: str) -> None:
        """Note the variable's value now, after `where` ran."""
        self.noted(where, os.environ.get(XLA_FLAGS_ENV))

    def noted(self, where: str, value: str | None) -> None:
        """Note that the variable had `value` after `where` ran, if that is a change."""
        if value != self._last:
            self.changes.append(FlagsChange(where, value))
            self._last = value

    def changed_by(self, value: str | None) -> str | None:
        """Where ``XLA_FLAGS`` was first seen set to `value`; None when not seen."""
        return next((change.where for change in self.changes if change.value == value), None)

    def pytest_plugin_registered(self, plugin: object) -> None:
        # a conftest.py or plugin module is registered right after its import
        file = getattr(plugin, "__file__", None)
        if isinstance(plugin, ModuleType) and isinstance(file, str):
            path = Path(file)
            try:
                self.note(path.relative_to(self._rootpath).as_posix())
            except ValueError:
                self.note(plugin.__name__)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.note(report.nodeid or "collection")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.note(f"{report.nodeid} ({report.when})")


FLAGS_WATCH_KEY = pytest.StashKey[FlagsWatch]()
FLAGS_WATCH_PLUGIN = "jaxcompile-xla-flags"


def watch(config: pytest.Config | None = None) -> None:
    """Start capturing XLA_FLAGS at JAX's backend start; idempotent, imports no JAX.

    With `config` (before any conftest.py is loaded): also keep ``XLA_FLAGS`` as it is now,
    the baseline, and watch where it changes (`FlagsWatch`, in `config.stash`).
    """
    if config is not None and FLAGS_WATCH_KEY not in config.stash:
        # The baseline from before any plugin where known (plugin.py), with the changes
        # plugins made before this watch; a session that started after its conftest.py
        # files loaded notes a change since, its module unknown.
        now = os.environ.get(XLA_FLAGS_ENV)
        kept, since, early = config.stash.get(
            XLA_FLAGS_AT_LOAD_KEY, (now, XLA_FLAGS_SINCE_PLUGIN_LOAD, ())
        )
        flags_watch = FlagsWatch(config.rootpath, kept, since)
        for where, value in early:
            flags_watch.noted(where, value)
        flags_watch.note("a conftest.py or plugin, before the session started")
        config.stash[FLAGS_WATCH_KEY] = flags_watch
        config.pluginmanager.register(flags_watch, FLAGS_WATCH_PLUGIN)
    bridge = sys.modules.get(XLA_BRIDGE)
    if bridge is not None:
        watched = None if config is None else config.stash.get(FLAGS_WATCH_KEY, None)
        _register(bridge, None if watched is None else watched.at_load)
    elif not any(getattr(finder, _MARKER, False) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WatchImport())


def at_backend_start() -> BackendStart | None:
    """XLA_FLAGS as XLA read them, or None when unknown (no backend started while watched)."""
    bridge = sys.modules.get(XLA_BRIDGE)
    capture = _capture_in(bridge) if bridge is not None else None
    value = getattr(capture, "value", None)
    if value is None:
        return None
    # Read by attribute: the capture may come from an earlier import of this module.
    return BackendStart(value.xla_flags, value.captured_at, getattr(value, "baseline", None))
