"""Where qwengpu keeps its caches: one rule for the PTX cache and the machine cache.

``$QWENGPU_CACHE`` if set, else ``$XDG_CACHE_HOME/qwengpu``, else ``~/.cache/qwengpu`` (the XDG
base-directory convention, so a user who moves their caches moves ours too).
"""

from __future__ import annotations

import os
from pathlib import Path

from qwengpu.errors import QwenGPUError


class CacheLocationError(QwenGPUError, NotADirectoryError):
    """The cache location is not a folder (``QWENGPU_CACHE`` names a file, say). An ``OSError`` too,
    so code that treats an unwritable cache as a warning keeps doing so."""


def cache_home() -> Path:
    """The qwengpu cache folder (it need not exist yet)."""
    root = os.environ.get("QWENGPU_CACHE")
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the spec: a relative XDG path is invalid and ignored
        return Path(xdg) / "qwengpu"
    return Path(os.path.expanduser("~")) / ".cache" / "qwengpu"


def check_folder(path: Path) -> None:
    """Refuse a cache location whose path runs through something that is not a folder."""
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                var = "QWENGPU_CACHE" if os.environ.get("QWENGPU_CACHE") else "the cache location"
                raise CacheLocationError(f"{p} is not a folder ({var} must name a folder): cannot use {path}")
            return
