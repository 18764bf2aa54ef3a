"""The re-pin command every output prints: ``pytest --compile-pin-update`` and the tests.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

MAX_CELLS_IN_COMMAND = 3


def repin_command(cells: Iterable[str], arguments: Iterable[str] = ()) -> str:
    """``pytest --compile-pin-update ...``: the session's re-pin `arguments` (its gates, as
    given: `Outcome.repin_arguments`), then the tests; their files when there are many; the
    files' directories when there are many files; their common directory at most."""
    unique = sorted(set(cells))
    if len(unique) > MAX_CELLS_IN_COMMAND:
        unique = sorted({cell.split("::", 1)[0] for cell in unique})
    if len(unique) > MAX_CELLS_IN_COMMAND:
        unique = sorted({posixpath.dirname(path) or "." for path in unique})
    if len(unique) > MAX_CELLS_IN_COMMAND:
        unique = [posixpath.commonpath(unique) or "."]
    options = list(dict.fromkeys(arguments))
    quoted = " ".join(_shell_word(word) for word in [*options, *unique])
    return f"pytest --compile-pin-update {quoted}".rstrip()


def _shell_word(word: str) -> str:
    if word and all(char.isalnum() or char in "/._-:=+@%,^" for char in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"
