"""A changed module is judged on its compile, whatever the cache held; a re-pin accepts it in
every cache state at once.

A row's **accepted module** is the module of its newest pin under its own hardware name,
whatever that pin's cache state (`accepted_pin`); with none there, the nearest key's that
differs only in the hardware name (`PinStore.judging`). A row whose module differs from it
(the fingerprint) was changed since it was accepted.

A cache hit (warm, memory) measures no compile: a changed module that hit the cache is
compiled once more in the session with the persistent cache bypassed, its **twin**
(`twin_wanted`; the fixture compiles it, `CompileRecord.twin`), and judged on that compile
against the cold pin (gate/judging.py), or paired (gate/paired.py). A pin update pins
both: a changed row that hit the cache pins its twin cold beside its warm pin, and a cold
row whose warm pin holds another module compiles again from the cache to pin it warm.
Census rows keep no module to compile, and a twin compile may raise: `no_twin_note` says
so on the row.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pytest_jaxcompile.backends import PinnedModule
from pytest_jaxcompile.gate.pins import OTHER_HARDWARE, OWN_KEY, Candidate, Pin, PinStore
from pytest_jaxcompile.records import CENSUS_SOURCE, CompileRecord

# Pins under a row's own hardware name whose module may be its accepted one (ties: the
# row's own cache state first, then this order).
PINNED_MODULE_STATES = ("cold", "none", "warm", "memory")
CACHE_HITS = ("warm", "memory")  # rows whose compile the persistent or in-process cache served
TWIN_UNCACHED = "cold"  # the twin of a cache hit: "none" where no cache is configured
TWIN_CACHED = "warm"  # a pin update's cold row, compiled again from the cache


def pinned_modules(
    store: PinStore, framework: str, version: str, module_part: str
) -> dict[str, PinnedModule]:
    """The modules the pins of this framework version hold, by the hash JAX's cache key took of
    each (its `module_part`): a row whose key has an equal one compiled the same module,
    whose fingerprint, op count and ops are then the pin's, nothing printed or hashed again.
    Pins without that hash (no persistent cache when pinned), a fingerprint or an op count
    are not there. Nor is a hash whose pins are not what the plugin writes: an op count other
    than its ops' sum, or pins of the hash that disagree on the module (a hand-edited pin):
    such a row reads its own module."""
    found: dict[str, PinnedModule | None] = {}  # None: its pins cannot be trusted
    for group in store.groups():
        if group.key.framework != framework or group.key.framework_version != version:
            continue
        for pins in (group.pins, *group.variants.values()):
            for pin in pins.values():
                digest = (pin.key_parts or {}).get(module_part)
                if not digest or pin.fingerprint is None or pin.op_count is None:
                    continue
                module: PinnedModule | None = PinnedModule(pin.fingerprint, pin.op_count, pin.ops)
                if pin.ops is not None and sum(pin.ops.values()) != pin.op_count:
                    module = None
                if digest in found:
                    module = _agreed(found[digest], module)
                found[digest] = module
    return {digest: module for digest, module in found.items() if module is not None}


def _agreed(first: PinnedModule | None, second: PinnedModule | None) -> PinnedModule | None:
    """The module two pins of one hash agree on (the one with ops), None where they differ."""
    if first is None or second is None:
        return None
    if (first.fingerprint, first.op_count) != (second.fingerprint, second.op_count):
        return None
    if first.ops is not None and second.ops is not None and first.ops != second.ops:
        return None
    return first if first.ops is not None else second


def own_pin(record: CompileRecord, store: PinStore, cache_state: str) -> Pin | None:
    """The row's pin under its own key but in `cache_state`, where it may judge the row."""
    own = store.judging(record, cache_state=cache_state).own
    return None if own is None else own.pin


def accepted_pin(record: CompileRecord, store: PinStore) -> Candidate | None:
    """The pin of the row's accepted module: its newest pin under its own hardware name in
    any cache state (the row's own state first among equals); else the nearest key's that
    differs only in the hardware name, on the same platform and device kind. None where
    neither (or where the nearest pin is an upgrade's or another settings': a version or
    settings change is not the module's)."""
    states = (record.cache_state, *(s for s in PINNED_MODULE_STATES if s != record.cache_state))
    own: list[tuple[str, int, Candidate]] = []
    for rank, state in enumerate(states):
        candidate = store.judging(record, cache_state=state).own
        if candidate is not None:
            own.append((candidate.pin.pinned_at or "", -rank, candidate))
    if own:
        return max(own, key=lambda item: item[:2])[2]
    for state in states:
        nearest = next(iter(store.judging(record, cache_state=state).candidates), None)
        if nearest is not None:
            return nearest if nearest.relation == OTHER_HARDWARE else None
    return None


def changed_since_accepted(record: CompileRecord, store: PinStore) -> bool:
    """Whether the row's module differs from its accepted module (both fingerprinted)."""
    accepted = accepted_pin(record, store)
    return (
        accepted is not None
        and accepted.relation in (OWN_KEY, OTHER_HARDWARE)
        and record.fingerprint is not None
        and accepted.pin.fingerprint is not None
        and accepted.pin.fingerprint != record.fingerprint
    )


def twin_wanted(record: CompileRecord, store: PinStore, pin_update: bool) -> str | None:
    """Which twin a fixture row needs (`TWIN_UNCACHED`, `TWIN_CACHED`), or None.

    A cache hit whose module changed since its accepted module: its compile with the
    persistent cache bypassed, which the gate judges (and a pin update pins cold). In a pin
    update also a cache hit whose cold pin holds another module; and a cold row whose warm
    pin holds another module: its compile from the cache, pinned warm. Unchanged modules:
    None (nothing more is compiled).
    """
    if record.source == CENSUS_SOURCE or record.fingerprint is None or record.error is not None:
        return None
    if record.cache_state in CACHE_HITS:
        if changed_since_accepted(record, store):
            return TWIN_UNCACHED
        cold = own_pin(record, store, "cold") if pin_update else None
        return (
            TWIN_UNCACHED if cold is not None and cold.fingerprint != record.fingerprint else None
        )
    if record.cache_state == "cold" and pin_update:
        warm = own_pin(record, store, TWIN_CACHED)
        if warm is not None and warm.fingerprint != record.fingerprint:
            return TWIN_CACHED
    return None


def no_twin_note(record: CompileRecord, store: PinStore) -> str | None:
    """Why a row that hit the cache though its module changed is judged on its cache hit
    (said on the row, never silently): a census row keeps no module to compile afresh; a
    fixture row's compile afresh raised (`CompileRecord.added_compile_error`, which the
    row keeps). None for any other row."""
    if record.cache_state not in CACHE_HITS or record.twin() is not None:
        return None
    census = record.source == CENSUS_SOURCE
    if not census and record.added_compile_error is None:
        return None
    if not changed_since_accepted(record, store):
        return None
    why = (
        "the census keeps no module to compile afresh (measure it with the jax_compile fixture)"
        if census
        else f"{record.added_compile_error}"
    )
    return (
        f"its module changed since its pin, yet it was judged on its {record.cache_state} "
        f"cache hit: {why}"
    )


def twin_note(record: CompileRecord) -> str:
    """Which compile a row's verdict judged, said first on the row."""
    assert record.compile_s is not None
    return (
        "module changed since its pin: judged on a compile with the persistent cache "
        f"bypassed (its {record.cache_state} hit: {record.compile_s:.3f} s)"
    )
