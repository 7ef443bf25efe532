"""``qwengpu verify`` for a lean mount (:mod:`qwengpu.model.lean`): trust nothing that can be checked.

* the base part: every base tensor's stored bytes hashed and compared with the build's record
  (not only the files whose size or mtime moved, as a load does), every small file too; with
  ``--base``, every file byte for byte against the given base (a changed tensor is named);
* the machine part: the stored sparse bytes against their record, each tensor densified and its
  SHA-256 compared with the dense record, and (unless ``quick``) with the machine cache entry of
  the same compiler version, whose own recorded hashes :func:`qwengpu.model.mount.machine_entry`
  checks first (a missing or damaged entry is rebuilt from the circuit: a recompute).

``verify.py``'s ``cmd_verify`` should dispatch: ``if mount_format(args.model) == LEAN_FORMAT:
rep = verify_lean(args.model, args.base, progress, quick=args.quick)``; the report has the same
``ok``, ``problems``, ``tensors_hashed``, ``tensors_recomputed``, ``compiler_version``, ``seconds``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from qwengpu.model.lean import (
    MACHINE_DIR,
    MACHINE_FILE,
    LeanError,
    _file_sha,
    _sha,
    check_base,
    read_lean_sidecar,
    read_machine_tensors,
    tensor_shas,
)
from qwengpu.model.mount import Checkpoint, MountError


def verify_lean(model_dir: str | Path, base_dir: str | Path | None = None, progress=None,
                quick: bool = False) -> dict[str, Any]:
    """Check a lean mount (module doc); a report with ``ok`` and every ``problems`` line found."""
    t0 = time.perf_counter()
    path = Path(model_dir)
    rec = read_lean_sidecar(path)
    problems: list[str] = []
    hashed = recomputed = 0

    def note(msg: str) -> None:
        if progress is not None:
            progress(msg)

    note("hashing the base part")
    try:
        check_base(path, rec, deep=True)
    except LeanError as e:
        problems.append(str(e))
    hashed += len(rec["base_tensors"])
    if base_dir is not None:
        note("comparing the base part with --base")
        try:
            given = Checkpoint(base_dir)
            theirs = tensor_shas(given)
        except MountError as e:
            problems.append(str(e))
            theirs = {}
        for n, s in rec["base_tensors"].items():
            if theirs and theirs.get(n) != s:
                problems.append(f"base tensor {n}: differs from {base_dir}'s" if n in theirs
                                else f"base tensor {n}: missing from {base_dir}")
        for fn, info in rec["base_files"].items():
            f = Path(base_dir) / fn
            if "sha256" in info and (not f.is_file() or _file_sha(f) != info["sha256"]):
                problems.append(f"base file {fn}: differs from {base_dir}'s")
    note("checking the machine part")
    cache = None
    if not quick:
        from qwengpu.model.mount import machine_config_for, machine_entry, text_config_of

        try:
            _, text = text_config_of(Checkpoint(path).config)
            entry = machine_entry(machine_config_for(text), progress)
            if entry.name != rec["compiler_version"]:
                problems.append(f"the mount's machine is compiler version {rec['compiler_version']}, this "
                                f"qwengpu builds {entry.name}: rebuild the mount")
            else:
                cache = Checkpoint(entry)
        except MountError as e:
            problems.append(str(e))
    mfile = path / MACHINE_DIR / MACHINE_FILE
    if quick and mfile.is_file() and _file_sha(mfile) == rec.get("machine_file_sha256"):
        hashed += len(rec["machine"])  # the stored bytes as built (their dense hashes were checked then)
    else:
        hashed, recomputed = _machine(path, rec, cache, problems, hashed, recomputed)
    return {"ok": not problems, "problems": problems, "tensors_hashed": hashed,
            "tensors_recomputed": recomputed, "compiler_version": rec["compiler_version"],
            "format": rec["format"], "tokenizer": "the base's, verbatim",
            "seconds": round(time.perf_counter() - t0, 3)}


def _machine(path: Path, rec: dict[str, Any], cache: Checkpoint | None, problems: list[str], hashed: int,
             recomputed: int) -> tuple[int, int]:
    """Each machine tensor: stored parts, dense bytes and (``cache``) the compiled machine's."""
    try:
        for name, t in read_machine_tensors(path, rec):
            hashed += 1
            if _sha(t) != rec["machine"][name]["sha256"]:
                problems.append(f"machine tensor {name}: its dense bytes differ from the build's record")
            if cache is not None:
                recomputed += 1
                if _sha(cache.get(name)) != rec["machine"][name]["sha256"]:
                    problems.append(f"machine tensor {name}: differs from the machine this qwengpu "
                                    "compiles")
    except LeanError as e:
        problems.append(str(e))
    return hashed, recomputed


__all__ = ["verify_lean"]
