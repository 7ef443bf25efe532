"""The machine cache's lean entry: the machine's weights stored sparse, what ``qwengpu run`` loads.

Why: the fast runtime (:mod:`qwengpu.runtime.fast`) keeps only the non-zero parts of the machine's
stock weights, and the machine is ~9 % non-zero. The dense cache entry
(:mod:`qwengpu.model.machine_checkpoint`, a stock float32 checkpoint: ~9 GB on the 2B shape, ~5 GB
on the test shape) made a user's first ``qwengpu run`` write, and every run read, the whole dense
model (peak memory ~9 GB on the 2B shape). The lean entry holds the same tensors as the lean mount
stores its machine (:mod:`qwengpu.model.lean`: per tensor a bit mask of the non-zero bit patterns
and the values; ~0.8 GB on the 2B shape), and is built one decoder layer at a time.

The entry, ``$QWENGPU_CACHE/machine/<version>.sparse/`` (``<version>``: the dense entry's
:func:`~qwengpu.model.machine_checkpoint.compiler_version`):

* ``qwengpu_machine.json``: the machine record (format ``qwengpu-machine/1``, compiler version,
  shape, layer config, as a dense entry's) with ``"storage": "sparse"``, every tensor's shape,
  dtype, non-zero count and the SHA-256 of its **dense** bytes (equal to the dense entry's
  ``tensor_sha256`` record: tests/runtime/test_lean_cache.py), and the SHA-256 of every stored part;
* ``qwengpu_machine/``: the machine model's ``config.json`` and ``machine.safetensors`` (the parts),
  laid out as a lean mount's machine folder, so :func:`qwengpu.runtime.lean.fast_from_lean` gathers
  the fast runtime's model from it, checking every stored part's SHA-256 before its tensor is used.

Built from the dense entry when that one is present and checks out against its recorded hashes
(:func:`~qwengpu.model.machine_checkpoint.check_entry`; seconds), else by compiling the circuit and
writing the weights layer by layer (:class:`~qwengpu.model.machine_checkpoint.MachineTensors`); each
tensor's sparse round trip is checked bit for bit before it is written. Written into a temporary
folder and renamed (nothing half-written); refused before the build when the disk is short. The
stock checkpoint (``--runtime stock``, ``--replay``, ``qwengpu machine build``, mounts) is still the
dense entry, built on demand.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from qwengpu.errors import CheckpointError
from qwengpu.machine.circuit import MachineShape
from qwengpu.model import machine_checkpoint as C
from qwengpu.model.configs import shape_for

SUFFIX = ".sparse"
STORAGE = "sparse"
MACHINE_DIR = "qwengpu_machine"  # as a lean mount's (qwengpu.model.lean.MACHINE_DIR)
MACHINE_FILE = "machine.safetensors"
DISK_MARGIN = C.DISK_MARGIN
DiskSpaceError = C.DiskSpaceError
check_disk = C.check_disk


def entry_path(version: str, cache_dir: str | Path | None = None) -> Path:
    """The lean entry's folder for ``version`` (beside the dense entry ``<version>``)."""
    return C.cache_root(cache_dir) / f"{version}{SUFFIX}"


def _dense_bytes(src) -> int:
    """The float32 bytes of the machine's stock model, from a tensor source's shapes."""
    return sum(4 * math.prod(src.info(n)["shape"]) for n in src.names())


def read_record(entry: Path, version: str) -> dict[str, Any]:
    """The lean entry's record, checked (format, storage, version, the parts' record); a
    :class:`CheckpointError` names what is wrong."""
    meta = C.read_machine_sidecar(entry)
    if meta.get("storage") != STORAGE or not isinstance(meta.get("machine"), dict) or \
            not isinstance(meta.get("machine_stored"), dict):
        raise CheckpointError(f"{entry}: not a sparse machine cache entry (no record of the sparse parts)")
    if meta.get("compiler_version") != version:
        raise CheckpointError(f"{entry}: built by compiler version {meta.get('compiler_version')!r}, "
                              f"expected {version!r}")
    for fn in ("config.json", MACHINE_FILE):
        if not (entry / MACHINE_DIR / fn).is_file():
            raise CheckpointError(f"{entry}: {MACHINE_DIR}/{fn} is missing")
    return meta


def _dense_source(config, shape: MachineShape, cache_dir, progress: C.Progress):
    """The dense entry of this version as a tensor source, when present and whole (checked against
    its recorded SHA-256s), else None."""
    from qwengpu.model.mount import Checkpoint

    dense = C.cache_root(cache_dir) / C.compiler_version(config, shape)
    if not (dense / C.MACHINE_SIDECAR).is_file():
        return None
    try:
        C.check_entry(dense, progress)
        return Checkpoint(dense)
    except (CheckpointError, OSError) as e:
        print(f"warning: dense machine cache entry not used for the sparse one: {' '.join(str(e).split())}",
              file=sys.stderr)
        return None


def build_entry(config, shape: MachineShape | None = None, *, cache_dir: str | Path | None = None,
                progress: C.Progress = None) -> Path:
    """Write the lean entry for ``config``/``shape`` (module doc); returns its folder."""
    from qwengpu.model.lean import _write_sparse_machine
    from qwengpu.paths import check_folder

    shape = shape if shape is not None else shape_for(config)
    version = C.compiler_version(config, shape)
    entry = entry_path(version, cache_dir)
    root = entry.parent
    check_folder(root)
    root.mkdir(parents=True, exist_ok=True)
    check_disk(root, DISK_MARGIN)  # before minutes of compiling: the entry is at least this
    t0 = time.perf_counter()
    src = _dense_source(config, shape, cache_dir, progress)
    origin = "dense entry"
    if src is None:
        src, origin = C.MachineTensors(config, shape, progress), "compiled"
    dense = _dense_bytes(src)
    check_disk(root, dense // 8 + DISK_MARGIN)  # measured: 8.5-9 % of the dense bytes

    def fill(tmp: Path) -> dict[str, Any]:
        mdir = tmp / MACHINE_DIR
        mdir.mkdir(parents=True)
        machine, stored = _write_sparse_machine(_Sorted(src), mdir / MACHINE_FILE, dense, progress)
        if origin == "compiled":
            src.release()
            src.cfg.save_pretrained(mdir)
        else:
            shutil.copy2(src.path / "config.json", mdir / "config.json")
        for p in mdir.iterdir():
            C._fsync(p)
        C._fsync(mdir)
        meta = C._meta(version, config, shape, time.perf_counter() - t0)
        meta.update(storage=STORAGE, origin=origin, machine=machine, machine_stored=stored,
                    machine_bytes=(mdir / MACHINE_FILE).stat().st_size, machine_dense_bytes=dense)
        return meta

    _note(progress, f"writing the machine sparse to {entry}")
    try:
        out = C._publish(entry, True, fill)
    except OSError as e:
        raise CheckpointError(f"cannot write the machine cache entry {entry}: {e.strerror or e}") from None
    C.prune(cache_dir, keep=C.KEEP_ENTRIES, protect=entry.name)
    return out


class _Sorted:
    """A tensor source (``names``/``get``/``info``) whose names come sorted: the parts file is then
    the same whichever source wrote it, and each decoder layer's names stay together."""

    def __init__(self, src) -> None:
        self.src = src

    def names(self) -> list[str]:
        return sorted(self.src.names())

    def get(self, name: str):
        return self.src.get(name)

    def info(self, name: str) -> dict[str, Any]:
        return self.src.info(name)


def _note(progress: C.Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def entry_or_build(config, shape: MachineShape | None = None, *, cache_dir: str | Path | None = None,
                   progress: C.Progress = None, rebuild: bool = False) -> tuple[Path, dict[str, Any]]:
    """``(folder, record)`` of the lean entry: the cached one when its record checks out, else built
    (``rebuild``: built again, the old one dropped; a damaged part is found when the runtime reads
    it, :func:`qwengpu.runtime.engine.machine_fast`, which then asks for a rebuild)."""
    shape = shape if shape is not None else shape_for(config)
    version = C.compiler_version(config, shape)
    entry = entry_path(version, cache_dir)
    if entry.exists() and not rebuild:
        try:
            rec = read_record(entry, version)
            os.utime(entry / C.MACHINE_SIDECAR)  # most recently used: kept longest
            return entry, rec
        except (CheckpointError, OSError) as e:
            print(f"warning: machine cache entry unusable, rebuilding: {' '.join(str(e).split())}",
                  file=sys.stderr)
    if entry.exists():
        shutil.rmtree(entry, ignore_errors=True)
    build_entry(config, shape, cache_dir=cache_dir, progress=progress)
    return entry, read_record(entry, version)


def records_match_dense(entry: Path, dense: Path) -> list[str]:
    """Tensors whose dense SHA-256 in the lean entry's record differs from the dense entry's record
    (empty: the lean entry decodes to the stock checkpoint's bytes)."""
    a = json.loads((entry / C.MACHINE_SIDECAR).read_text())["machine"]
    b = C.read_machine_sidecar(dense).get(C.TENSOR_SUMS) or {}
    return sorted(n for n in set(a) | set(b) if a.get(n, {}).get("sha256") != b.get(n))
