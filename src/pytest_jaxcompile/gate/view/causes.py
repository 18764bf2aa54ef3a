"""A verdict's note as a team reads it: one short line of cause, and its parts for ``-v``.

The gate's note is its parts joined by ``; `` (what changed in the module, the pairs, the
load, the compile profile). `brief` keeps, of each part, what a reader acts on (``module
grew: 62 -> 97 ops (+56%): stablehlo.reshape +12, ...``: the operations that changed most,
as many as the line holds; the pairs' interval, not their file), and drops what only a
closer look needs (the passes that grew most): those stay in the parts, shown one per line
under ``-v``, in the JSON report and in the step summary.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re

BRIEF_CHARS = 160  # the most a row's line of cause holds
NOTE_SEPARATOR = "; "

# A change of the module with its op histogram after ": " (notes.what_changed).
_MODULE_CHANGE = re.compile(r"^(module (?:grew|shrank|changed)[^(]*\([^)]*\))(?:: (.*))?$")
OP_SEPARATOR = ", "
# Where in the user's code a grown module grew (gate.sources.sources_text), after it.
_SOURCES = re.compile(r"^\+[\d,]+ ops at ")
# The pairs' note (gate.paired.PairedComparison.describe): who with (its key may hold
# parentheses: "Intel(R) Xeon(R)"), then the figures.
_PAIRED = re.compile(
    r"^(?P<status>DRIFT )?paired with \S+ \((?P<key>.*?)\): (?P<pairs>\d+) pairs\b.*?"
    r"\((?P<confidence>[\d.]+%) (?:sequential )?interval (?P<interval>[\d.]+x-[\d.]+x)"
)
# An instruction count's verdict, with its instrument's identity after the tolerance.
_INSTRUCTIONS = re.compile(r"^(.*compile instructions .*?\([^;)]*, tolerance [\d.]+%); [^)]*\)")
_UNCHANGED = "module unchanged since pinning: look at "
# A cache hit judged on its twin, compiled with the cache bypassed (gate.twins.twin_note).
_TWIN = re.compile(
    r"^module changed since its pin: judged on a compile .*\(its (\w+ hit: [\d.]+ s)\)$"
)
# An expected-warm MISS, and the cache key's part that changed (gate/judging.py).
_MISS = re.compile(
    r"^expected a persistent-cache hit: the module is unchanged since its warm pin"
    r"( \([^)]*\))?, yet it compiled cold$"
)
_KEY_CHANGED = "Its cache key changed: "
_KEY_CHANGED_BRIEF = "cache key changed: "
# Parts a reader needs only on a closer look: the compile profile's passes and phases.
_DETAIL_ONLY = (
    "grew most of XLA's HLO passes",
    "shrank most of XLA's HLO passes",
    "longest of XLA's HLO passes",
    "phases",
    "all HLO passes",
)


def note_parts(note: str | None) -> tuple[str, ...]:
    """The note's parts, split at ``; `` outside parentheses."""
    if not note:
        return ()
    parts, depth, start = [], 0, 0
    for index, char in enumerate(note):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(depth - 1, 0)
        elif depth == 0 and note.startswith(NOTE_SEPARATOR, index):
            parts.append(note[start:index])
            start = index + len(NOTE_SEPARATOR)
    parts.append(note[start:])
    return tuple(part for part in parts if part)


def brief_part(part: str) -> str | None:
    """What of one part the short line keeps; None: the part is a detail (``-v``)."""
    if part.startswith(_DETAIL_ONLY):
        return None
    miss = _MISS.match(part)
    if miss:
        return f"compiled cold, its module unchanged since its warm pin{miss.group(1) or ''}"
    if _KEY_CHANGED in part:  # which part of the cache key: what a reader fixes
        return _KEY_CHANGED_BRIEF + part.split(_KEY_CHANGED, 1)[1]
    if part.startswith(_UNCHANGED):  # where to look is the reader's next step, under -v
        return _UNCHANGED.split(":", 1)[0]
    twin = _TWIN.match(part)
    if twin:
        return f"module changed: compiled afresh ({twin.group(1)})"
    counted = _INSTRUCTIONS.match(part)
    if counted:
        return counted.group(1) + ")"
    module = _MODULE_CHANGE.match(part)
    if module:  # the operations are added by `brief`, as many as the line holds
        return module.group(1)
    paired = _PAIRED.match(part)
    if paired:
        return (
            f"{paired.group('pairs')} pairs beside {_pin_named(paired.group('key'))}: "
            f"{paired.group('confidence')} interval {paired.group('interval')}"
        )
    return part


# A pin's cache state as a reader names the pin.
_PIN_OF_STATE = {
    "cold": "cold pin",
    "warm": "warm pin",
    "none": "pin without a persistent cache",
    "unknown": "pin of unknown cache state",
}


def _pin_named(key: str) -> str:
    """``the pinned module of laptop, jax 0.10.2 (cold pin)``: which pin a row was paired
    with, from its key as described (``laptop | jax 0.10.2 | full precision | cold``)."""
    parts = key.split(" | ")
    if len(parts) < 3:
        return f"{parts[0]}'s pinned module"
    state = _PIN_OF_STATE.get(parts[-1], f"{parts[-1]} pin")
    return f"the pinned module of {parts[0]}, {parts[1]} ({state})"


def brief(note: str | None) -> str | None:
    """One line of cause: the parts' briefs that fit in `BRIEF_CHARS`, in order; the first
    one whole even where it alone is longer (an output wraps it rather than lose its end,
    which names what changed), and a MISS's changed cache key part whatever the length (it
    is what the reader fixes), and so a changed module's part (what changed in the program)
    and where in the user's code it grew.

    A changed module's part then names the operations that changed most, with their counts
    (``: stablehlo.add +108, stablehlo.dot_general +108``), as many as the room left holds
    and at least the first: the cause a reviewer acts on (`-v` lists the note's five)."""
    kept: list[str] = []
    operations: dict[int, list[str]] = {}  # a kept module part's index: its operations
    for part in note_parts(note):
        short = brief_part(part)
        if short is None:
            continue
        fits = len(NOTE_SEPARATOR.join([*kept, short])) <= BRIEF_CHARS
        module = _MODULE_CHANGE.match(part)
        grew_at = _SOURCES.match(part) is not None  # where in the code: always said
        if not kept or fits or short.startswith(_KEY_CHANGED_BRIEF) or module or grew_at:
            if module and module.group(2):
                operations[len(kept)] = module.group(2).split(OP_SEPARATOR)
            kept.append(short)
    for index, names in operations.items():
        room = BRIEF_CHARS - len(NOTE_SEPARATOR.join(kept))
        shown = names[:1]
        for name in names[1:]:
            if len(": " + OP_SEPARATOR.join([*shown, name])) > room:
                break
            shown.append(name)
        kept[index] += ": " + OP_SEPARATOR.join(shown)
    return NOTE_SEPARATOR.join(kept) or None
