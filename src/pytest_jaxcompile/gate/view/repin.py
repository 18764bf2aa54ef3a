"""The re-pin command every output prints: ``pytest --compile-pin-update`` and the tests.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

MAX_CELLS_IN_COMMAND = 3
MAX_TESTS_CHARS = 100  # of the tests named in a command: longer, their files instead


def repin_command(cells: Iterable[str], arguments: Iterable[str] = ()) -> str:
    """``pytest --compile-pin-update ...``: the session's re-pin `arguments` (its gates, as
    given: `Outcome.repin_arguments`), then the tests; their files when there are many or
    their node ids run long; the files' directories when those are many or long; their
    common directory at most. Every output prints this one command."""
    unique = sorted(set(cells))
    if _too_many(unique):
        unique = sorted({cell.split("::", 1)[0] for cell in unique})
    if _too_many(unique):
        unique = sorted({posixpath.dirname(path) or "." for path in unique})
    if _too_many(unique):
        unique = [posixpath.commonpath(unique) or "."]
    options = list(dict.fromkeys(arguments))
    quoted = " ".join(_shell_word(word) for word in [*options, *unique])
    return f"pytest --compile-pin-update {quoted}".rstrip()


def _too_many(words: list[str]) -> bool:
    """More than a reader copies at a glance: many, or one line's worth of characters."""
    if len(words) > MAX_CELLS_IN_COMMAND:
        return True
    return len(words) > 1 and len(" ".join(words)) > MAX_TESTS_CHARS


def _shell_word(word: str) -> str:
    if word and all(char.isalnum() or char in "/._-:=+@%,^" for char in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"
