"""Which parts went into a compile's persistent-cache key, from JAX's own log records.

`jax/_src/cache_key.py` builds the key from named parts (the computation, the jaxlib
version, the backend version, the XLA flags, the compile options, the accelerator config,
the compression, a custom hook) and, when its logger is at DEBUG, logs the hash of each part
("get_cache_key hash of serialized XLA flags: <hex>") and every XLA flag it includes. At DEBUG
JAX hashes each part a second time to log it: about +20 ms on a 1 MiB module, a few percent
of a persistent-cache hit, and nothing when the persistent cache is off (JAX computes no key);
+0.8 ms with the computation hashed once (below; benchmarks/key_parts_cost.py).
`CompileMonitor.capture(key_parts=True)` reads the records, around a compile the
`jax_compile` fixture measures and around a census'd test: the logger is lowered to DEBUG
while a capture is open, and its filter takes the records of the capturing thread and lets
through to the user's handlers exactly what would have reached them anyway, so their
captured log output does not change. Between the lowering of a module of JAX's eager
dispatch and its backend compile the logger is back at its own level: nothing reads those
keys, and on a suite of short tests eager dispatch is most of the compiles (815 of 955 on
flax's `nnx` transform tests).

The computation is the part that costs: logging its hash serializes the module a second time.
It is the key's first part, so its own hash is the running hash after it: while key parts are
read, `ComputationHashedOnce` has JAX log that one without the second serialization (the
same records, the same values), once the first key of the process showed the two equal (the
part's own hash taken from the bytes JAX hashed, so that the check serializes nothing either).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

LOGGER = "jax._src.cache_key"
_PART = "get_cache_key hash of serialized %s: %s"  # the part's own hash, not the cumulative
_RUNNING = "get_cache_key hash after serializing %s: %s"  # the cumulative hash
_FLAG = "Including XLA flag in cache key: %s"


COMPUTATION_PART = "computation"  # the module itself, canonicalised: its fingerprint


@dataclass
class KeyParts:
    """One compile's cache-key parts (name -> sha256 hex) and the XLA flags in the key."""

    parts: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)

    def record_fields(self) -> dict[str, object]:
        """The record's ``cache_key_parts`` and ``cache_key_flags`` (None: nothing logged)."""
        return {
            "cache_key_parts": dict(self.parts) or None,
            # each flag once: JAX logs the key's flags again for every key it computes
            "cache_key_flags": sorted(set(self.flags)) if self.parts else None,
        }

    def take(self, template: object, args: tuple[object, ...]) -> None:
        """Keep what one of the cache_key logger's records says, if it is a key record."""
        if not is_key_record(template, args):
            return
        if template == _PART:
            self.parts.setdefault(str(args[0]), str(args[1]))
        else:
            self.flags.append(str(args[0]))


_ARGS = {_PART: 2, _FLAG: 1}  # each key record's template -> its number of arguments


class _Tee:
    """A hash object that feeds a second one beside it: the computation's own hash, taken
    from the bytes JAX hashes into the key (everything else is the key's hash object's)."""

    def __init__(self, running: Any, own: Any) -> None:
        self._running, self._own = running, own

    def update(self, data: Any) -> None:
        self._running.update(data)
        self._own.update(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._running, name)


class ComputationHashedOnce:
    """While installed: JAX's ``cache_key._log_cache_key_hash(hash_obj, name, hashfn)``
    logs the computation's hash as the running hash after it (the key's first part),
    without hashing the module again; checked against the computation's own hash on the
    first key this object sees (one per process: `CompileMonitor`). That hash is taken from
    the bytes JAX hashed into the key (its ``_hash_computation`` handed a `_Tee` until the
    check is made), not by serializing the module again, which on a module of several MB of
    constants cost tens of milliseconds; where that function is not there, the module is
    hashed again, JAX's way. Where JAX has no ``_log_cache_key_hash``, installing changes
    nothing."""

    def __init__(self) -> None:
        self.checked: bool | None = None  # None: not yet; False: they differed, JAX's way
        self._cache_key: Any = None
        self._original: Callable[..., None] | None = None
        self._hash_computation: Callable[..., None] | None = None  # JAX's, while teed
        self._own: dict[int, str] = {}  # id(key's hash object) -> the computation's own hash

    def install(self) -> None:
        from jax._src import cache_key

        original = getattr(cache_key, "_log_cache_key_hash", None)
        if original is None or isinstance(original, ComputationHashedOnce):
            return
        self._cache_key, self._original = cache_key, original
        cache_key._log_cache_key_hash = self
        hashing = getattr(cache_key, "_hash_computation", None)
        if self.checked is None and callable(hashing):
            self._hash_computation = hashing
            cache_key._hash_computation = self._teed

    def uninstall(self) -> None:
        # JAX's function and module are kept: a key computed on another thread may have
        # looked this object up just before, and still calls it.
        if self._cache_key is not None and self._cache_key._log_cache_key_hash is self:
            self._cache_key._log_cache_key_hash = self._original
        teed = self._hash_computation is not None and self._cache_key is not None
        if teed and self._cache_key._hash_computation == self._teed:
            self._cache_key._hash_computation = self._hash_computation

    def _teed(self, hash_obj: Any, *args: Any, **kwargs: Any) -> None:
        """JAX's ``_hash_computation``, noting the computation's own hash until checked."""
        hashing = self._hash_computation
        assert hashing is not None, "called only once installed"
        if self.checked is not None:
            hashing(hash_obj, *args, **kwargs)
            return
        own = hashlib.sha256()
        hashing(_Tee(hash_obj, own), *args, **kwargs)
        self._own[id(hash_obj)] = own.digest().hex()

    def __call__(self, hash_obj: Any, last_serialized: str, hashfn: Callable[..., Any]) -> None:
        original, logger = self._original, self._cache_key.logger
        assert original is not None, "called only once installed"
        if (
            last_serialized != COMPUTATION_PART
            or self.checked is False
            or not logger.isEnabledFor(logging.DEBUG)
        ):
            original(hash_obj, last_serialized, hashfn)
            return
        running = hash_obj.digest().hex()
        if self.checked is None:  # once: the part's own hash against the running one
            own = self._own.pop(id(hash_obj), None)
            if own is None:  # not teed: the module hashed again, as JAX logs it
                fresh = hashlib.sha256()
                hashfn(fresh)
                own = fresh.digest().hex()
            self._own.clear()
            self.checked = own == running
            if not self.checked:
                original(hash_obj, last_serialized, hashfn)
                return
        logger.debug(_PART, last_serialized, running)
        logger.debug(_RUNNING, last_serialized, running)


def is_key_record(template: object, args: tuple[object, ...]) -> bool:
    """Whether a cache_key log record names a key part's hash or an XLA flag in the key."""
    return isinstance(template, str) and _ARGS.get(template) == len(args)


def differing_parts(now: dict[str, str] | None, then: dict[str, str] | None) -> list[str] | None:
    """Names of the key parts whose hash differs; None when either side was not captured."""
    if not now or not then:
        return None
    return [name for name in now if name in then and now[name] != then[name]] + [
        name for name in now if name not in then
    ]


def flag_changes(now: list[str] | None, then: list[str] | None) -> list[str]:
    """XLA flags added (+), removed (-) or changed (old -> new) since the pin."""
    if now is None or then is None:
        return []
    current = dict(_split(flag) for flag in now)
    pinned = dict(_split(flag) for flag in then)
    changes = []
    for name in sorted(set(current) | set(pinned)):
        if name not in pinned:
            changes.append(f"+{_join(name, current[name])}")
        elif name not in current:
            changes.append(f"-{_join(name, pinned[name])}")
        elif current[name] != pinned[name]:
            changes.append(f"{name}: {pinned[name]} -> {current[name]}")
    return changes


def _split(flag: str) -> tuple[str, str | None]:
    name, separator, value = flag.partition("=")
    return name, value if separator else None


def _join(name: str, value: str | None) -> str:
    return name if value is None else f"{name}={value}"


# XLA flags JAX leaves out of the key, beside its own list where JAX has loaded it
# (`_flags_left_out`): they change what is dumped, where files are or how many host devices
# there are, not the program.
_NOT_IN_KEY = (
    "--xla_dump_",
    "--xla_force_host_platform_device_count",
    "--xla_gpu_cuda_data_dir",
    "--xla_tpu_sdc_checker_",
    "--xla_gpu_experimental_autotune_cache_mode",
)


def _flags_left_out() -> tuple[set[str], tuple[str, ...]]:
    """JAX's own list of flags it leaves out of the key, when JAX has loaded it (a process
    that compiles has); never imported from here, so naming a variant never loads jaxlib."""
    module = sys.modules.get("jax._src.cache_key")
    listed = getattr(module, "xla_flags_to_exclude_from_cache_key", None)
    if not isinstance(listed, (list, tuple, set)):
        return set(), _NOT_IN_KEY
    return {str(flag) for flag in listed}, _NOT_IN_KEY


_KEY_ENV = ("XLA_FLAGS", "LIBTPU_INIT_ARGS")  # the variables whose flags JAX hashes


def flags_in_key(environ: Mapping[str, str] | None = None) -> list[str]:
    """The XLA flags JAX hashes into the persistent-cache key, as it reads them (from
    ``XLA_FLAGS`` and ``LIBTPU_INIT_ARGS``, less those it leaves out): known whether or not
    a persistent cache is on."""
    environ = os.environ if environ is None else environ
    flags = " ".join(environ.get(name, "") for name in _KEY_ENV)
    if not flags.strip():
        return []  # the usual case, before JAX's list of left-out flags is made a set
    exact, prefixes = _flags_left_out()
    return sorted(
        flag
        for flag in flags.split()
        if flag.split("=")[0] not in exact and not flag.startswith(prefixes)
    )


def flags_in_force() -> list[str]:
    """`flags_in_key` of the XLA flags XLA compiles with: ``XLA_FLAGS`` as XLA read them when
    its backend started, where known (`backendstart`), else as they are now. A flag set
    after the backend started is not in force and names no variant.

    Where the backend had started before the plugin began watching (a session activated
    late), the value then is not what XLA read: only the flags also in the session's
    baseline (``XLA_FLAGS`` before any conftest.py) are known to be in force, and only
    those name a variant; a flag whose force is unknown names none."""
    from pytest_jaxcompile.backends.jax.backendstart import (
        CAPTURED_AT_SESSION_START,
        XLA_FLAGS_ENV,
        at_backend_start,
    )

    started = at_backend_start()
    if started is None:
        return flags_in_key()
    environ = {name: value for name in _KEY_ENV if (value := os.environ.get(name)) is not None}
    environ.pop(XLA_FLAGS_ENV, None)
    if started.xla_flags is not None:
        environ[XLA_FLAGS_ENV] = started.xla_flags
    flags = flags_in_key(environ)
    if started.captured_at == CAPTURED_AT_SESSION_START:
        known = set(flags_in_key({**environ, XLA_FLAGS_ENV: started.baseline or ""}))
        flags = [flag for flag in flags if flag in known]
    return flags


def compiler_options_of(lowered: object) -> dict[str, object]:
    """The compile options a jitted function carries (``jax.jit(f, compiler_options=...)``),
    which JAX hashes into the key as part of the compile options; {} where none or unknown."""
    options = getattr(getattr(lowered, "_lowering", None), "_compiler_options_kvs", None)
    try:
        return dict(options or ())
    except (TypeError, ValueError):
        return {}


VARIANT_NAMED_UP_TO = 1  # settings a variant's name spells out; more are named by a hash


def variant_of(flags: Iterable[str], options: Mapping[str, object] | None = None) -> str:
    """A row's variant: the settings in its cache key that change the compiled program.

    One setting is named ``name=value`` (``xla_gpu_autotune_level=0``; XLA flags without
    their ``--``); more are named by their count and a short stable hash of them, sorted
    (``3-settings-1a2b3c4d``), so that a row's name does not carry a library's whole flag
    list (the flags are in the record's settings and the pin's ``key_flags``). "" for the
    default settings."""
    named = [flag.removeprefix("--") for flag in flags]
    named += [f"{name}={_option_text(value)}" for name, value in (options or {}).items()]
    settings = sorted(set(named))
    spelled = ",".join(settings)
    if len(settings) <= VARIANT_NAMED_UP_TO:
        return spelled
    digest = hashlib.sha256(spelled.encode()).hexdigest()[:8]
    return f"{len(settings)}-settings-{digest}"


def _option_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
