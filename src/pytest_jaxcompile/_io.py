"""The three things every layer shares: the input-error type, atomic writes, relative paths.

Bad input anywhere (a pin file, a report, a records corpus) is an `InputError` that names
the file and, where known, the position in it; files are only ever replaced whole.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class InputError(Exception):
    """Input that cannot be used; the message names the file and, where known, the position.

    ``position`` is a line number (pin files, reports) or a text such as ``"12"`` or
    ``"records[3]"``; it is written after the path, ``path:position: message``.
    """

    def __init__(self, path: Path, message: str, position: int | str | None = None) -> None:
        self.path = path
        self.position = position
        self.message = message
        where = f"{path}:{position}" if position not in (None, "") else str(path)
        super().__init__(f"{where}: {message}")

    @property
    def line(self) -> int | None:
        """The line number, where the position is one."""
        return self.position if isinstance(self.position, int) else None


def read_text(path: Path, error: type[InputError] = InputError) -> str:
    """A file's UTF-8 text, line endings as they are; any failure is `error` naming it."""
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise error(path, "no such file") from None
    except UnicodeDecodeError as problem:
        raise error(path, f"not UTF-8 text: {problem}") from None
    except OSError as problem:
        raise error(path, f"cannot read it: {problem.strerror or problem}") from None


def atomic_write_text(path: Path, text: str) -> bool:
    """Replace `path` with `text` via a temp file + rename; False if already identical."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> bool:
    """Replace `path` with `data` via a temp file + rename; False if already identical."""
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(path)
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(data)
            temp.flush()
            if hasattr(os, "fchmod"):  # not on Windows, where modes barely apply
                os.fchmod(temp.fileno(), mode)
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    return True


def _mode_for(path: Path) -> int:
    """The permissions the written file gets: the old file's, else what open() would give.

    `mkstemp` creates its file readable by its owner only; without this, every rewrite
    would make a shared pin file, README or results file private.
    """
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask


def relative(path: Path, root: Path) -> str:
    """`path` relative to `root` where it is below it, else as it is."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
