"""Notes beside a verdict: what changed in the module since its pin (ops, fingerprint),
which parts of JAX's cache key changed, and which versions.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pytest_jaxcompile._numbers import percent
from pytest_jaxcompile.gate.pins import Pin
from pytest_jaxcompile.gate.sources import source_growth, sources_text
from pytest_jaxcompile.records import CompileRecord


def same_module(fingerprint: str | None, pinned: str | None) -> bool | None:
    """Whether two fingerprints say the module is unchanged; None when one is missing or
    they are of different kinds (``sha256:`` of a fixture's module text, a census row's
    ``computation:`` key part, or the whole ``cachekey:`` pinned by earlier releases)."""
    if not fingerprint or not pinned:
        return None
    if fingerprint.partition(":")[0] != pinned.partition(":")[0]:
        return None
    return fingerprint == pinned


def key_change(record: CompileRecord, pin: Pin) -> str | None:
    """Which parts of JAX's persistent-cache key differ from the pin's, and for XLA flags
    which flags; None when nothing differs. A part not captured on either side (census
    rows, pins of earlier releases, a jax that logs no parts) is never guessed."""
    from pytest_jaxcompile.backends import backend_of

    backend = backend_of(record)
    differing_parts, flag_changes = backend.differing_parts, backend.flag_changes

    parts = differing_parts(record.cache_key_parts, pin.key_parts)
    if not parts:
        return None
    named = []
    for part in parts:
        if part == "XLA flags":
            flags = flag_changes(record.cache_key_flags, pin.key_flags)
            named.append(
                f"the XLA flags part ({', '.join(flags)})" if flags else "the XLA flags part"
            )
        else:
            named.append(f"the {part} part")
    return ", ".join(named)


# What a row's versions are named in notes: record/pin field, words.
_CACHE_KEY_VERSIONS = (("jaxlib_version", "jaxlib"), ("platform_version", "platform version"))


def version_differences(record: CompileRecord, pin: Pin) -> list[str]:
    """The versions JAX hashes into its cache keys that differ between a row and its pin,
    each as "name old -> new"; a version unknown on either side is not a difference."""
    differences = []
    for name, words in _CACHE_KEY_VERSIONS:
        new, old = getattr(record, name), getattr(pin, name)
        if new and old and new != old:
            differences.append(f"{words} {_one_line(old)} -> {_one_line(new)}")
    return differences


def _one_line(text: str) -> str:
    return " ".join(text.split())


def versions_note(record: CompileRecord, pin: Pin | None) -> str | None:
    """Beside a time verdict: the versions that changed since the pin (a recompile)."""
    changed = [] if pin is None else version_differences(record, pin)
    if not changed:
        return None
    return (
        f"{', '.join(changed)} since pinning: another compiler build (JAX's cache keys "
        "include these versions)"
    )


TOP_OP_CHANGES = 5  # operations named in a note: the largest changes in count


def op_changes(record: CompileRecord, pin: Pin) -> list[str]:
    """``stablehlo.tanh +36``: what changed in the module since its pin, largest first."""
    if not record.op_histogram or not pin.ops:
        return []
    names = set(record.op_histogram) | set(pin.ops)
    deltas = {name: record.op_histogram.get(name, 0) - pin.ops.get(name, 0) for name in names}
    changed = sorted((d for d in deltas.items() if d[1]), key=lambda item: (-abs(item[1]), item[0]))
    return [f"{name} {delta:+d}" for name, delta in changed]


def what_changed(record: CompileRecord, pin: Pin, growth: float | None = None) -> str | None:
    """The deterministic explanation beside a time verdict: did the module change?"""
    unchanged = same_module(record.fingerprint, pin.fingerprint)
    if record.op_count is not None and pin.op_count is not None:
        if record.op_count != pin.op_count:
            direction = "grew" if record.op_count > pin.op_count else "shrank"
            change = f"module {direction}: {pin.op_count} -> {record.op_count} ops"
            if pin.op_count:
                change += f" ({record.op_count / pin.op_count - 1:+.0%}"
                change += f", limit +{percent(growth)})" if growth is not None else ")"
            changes = op_changes(record, pin)
            if changes:
                change += ": " + ", ".join(changes[:TOP_OP_CHANGES])
            grown = sources_text(source_growth(record, pin)) if direction == "grew" else None
            return change if grown is None else f"{change}; {grown}"
        if unchanged is False:
            changes = op_changes(record, pin)
            return f"module changed with the same op count ({record.op_count} ops)" + (
                ": " + ", ".join(changes[:TOP_OP_CHANGES]) if changes else ""
            )
    if unchanged is None or record.fingerprint is None:
        return None
    if record.fingerprint.startswith("cachekey:"):  # the whole key: module, flags, options
        if unchanged:
            return "cache key unchanged: look at the environment (host load)"
        return "cache key changed since pinning (module, XLA flags or compile options)"
    if unchanged:
        cause = key_change(record, pin)
        if cause:
            return f"module unchanged since pinning, but its cache key changed: {cause}"
        return (
            "module unchanged since pinning: look at the environment "
            "(XLA flags, cache settings, host load)"
        )
    return "module changed since pinning (different fingerprint)"
