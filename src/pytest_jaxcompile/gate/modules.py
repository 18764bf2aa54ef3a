"""The module store: what it takes to compile a pinned row's module again, by fingerprint.

``--compile-paired`` compares a changed row with its pin by compiling both modules again,
side by side (docs/paired.md). The pin file keeps only the module's fingerprint (sha256 of
its text), so a pin file stays a few reviewable lines; the module itself lives in the
module store, by default ``pins/modules/``, one file per fingerprint::

    pins/modules/sha256-3f1c...e2.module.gz

Each file is gzip of one JSON header line (``format``, ``fingerprint``, ``devices``,
``platform``, ``options``: the serialized compile options in base64) and then the module's
text. A file is written whole or not at all (temp file and rename), is read only through
`ModuleStore.read`, which checks the text against its fingerprint, and is removed once no
pin names its fingerprint (`ModuleStore.prune`). A missing or damaged file is a
`StoredModuleProblem` that the row's note names; never a crash, never a silent pass.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_jaxcompile._io import atomic_write_bytes, relative
from pytest_jaxcompile.backends import StagedModule, fingerprint_of

FORMAT = 1
SUFFIX = ".module.gz"
_NAME = re.compile(r"^sha256-([0-9a-f]{64})" + re.escape(SUFFIX) + "$")
COMPRESSION_LEVEL = 6  # gzip's default speed/size trade-off


class StoredModuleProblem(Exception):
    """A stored module that is missing or cannot be used; the message names the file."""


@dataclass(frozen=True)
class ModuleStore:
    directory: Path
    root: Path | None = None  # messages name files relative to it (the rootdir)

    def _named(self, path: Path) -> str:
        return str(path) if self.root is None else relative(path, self.root)

    def path_for(self, fingerprint: str) -> Path:
        """``<dir>/sha256-<hex>.module.gz`` for a fingerprint ``sha256:<hex>``."""
        algorithm, _, digest = fingerprint.partition(":")
        return self.directory / f"{algorithm}-{digest}{SUFFIX}"

    def read(self, fingerprint: str) -> StagedModule:
        """The stored module of this fingerprint, or StoredModuleProblem naming the file."""
        path = self.path_for(fingerprint)
        try:
            data = gzip.decompress(path.read_bytes())
        except FileNotFoundError:
            raise StoredModuleProblem(
                f"its pin's module is not stored ({self._named(path)})"
            ) from None
        except (OSError, EOFError, zlib.error) as error:
            raise StoredModuleProblem(f"{self._named(path)} cannot be read: {error}") from None
        header_line, _, body = data.partition(b"\n")
        try:
            header = json.loads(header_line)
            options = base64.b64decode(header["options"], validate=True)
            devices, platform = int(header["devices"]), str(header["platform"])
            if header["format"] != FORMAT:
                raise ValueError(f"format {header['format']!r}, this release reads {FORMAT}")
            text = body.decode("utf-8")
        except (ValueError, KeyError, TypeError, binascii.Error) as error:
            raise StoredModuleProblem(f"{self._named(path)} is damaged: {error}") from None
        if fingerprint_of(text) != fingerprint:
            raise StoredModuleProblem(
                f"{self._named(path)} is damaged: its text does not match {fingerprint}"
            )
        return StagedModule(text, options, devices, platform)

    def write(self, fingerprint: str, module: StagedModule) -> Path | None:
        """Store a module under its fingerprint; the path, or None when it was stored."""
        if fingerprint_of(module.text) != fingerprint:
            raise ValueError(f"the module's text does not match {fingerprint}")
        header = {
            "format": FORMAT,
            "fingerprint": fingerprint,
            "devices": module.devices,
            "platform": module.platform,
            "options": base64.b64encode(module.options).decode("ascii"),
        }
        data = json.dumps(header, sort_keys=True).encode() + b"\n" + module.text.encode("utf-8")
        # mtime=0: the same module gives the same bytes, so re-pinning rewrites nothing
        packed = gzip.compress(data, compresslevel=COMPRESSION_LEVEL, mtime=0)
        path = self.path_for(fingerprint)
        return path if atomic_write_bytes(path, packed) else None

    def write_all(self, modules: Mapping[str, StagedModule]) -> list[Path]:
        """Store each module by fingerprint; the files written (new or changed)."""
        written = [self.write(fingerprint, module) for fingerprint, module in modules.items()]
        return [path for path in written if path is not None]

    def stored(self) -> dict[str, Path]:
        """Every stored module's file by fingerprint."""
        if not self.directory.is_dir():
            return {}
        found = {}
        for path in self.directory.iterdir():
            match = _NAME.match(path.name)
            if match:
                found[f"sha256:{match.group(1)}"] = path
        return found

    def prune(self, pinned: Iterable[str]) -> list[Path]:
        """Remove the stored modules no pin names (by fingerprint); the files removed."""
        keep = set(pinned)
        removed = []
        for fingerprint, path in sorted(self.stored().items()):
            if fingerprint not in keep:
                path.unlink(missing_ok=True)
                removed.append(path)
        return removed
