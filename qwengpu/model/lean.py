"""The lean mount: the base's own files, verbatim, beside the machine stored sparse.

Why: the stock single checkpoint (``qwengpu build --stock``, :mod:`qwengpu.model.mount`) proves that
one stock model computes both the base's text and the machine's launches, but it is float32 at a
wider hidden (38.8 GB for Qwen3.5-2B) and its text is exact only against a float32 base. On text the
mounted model's machine layers add exact zeros and its base layers compute the base's function
(``docs/mount.md``), so a runtime that runs the base's own tensors with stock ``transformers``
computes the mounted model's text function at the base's own width and dtype; a launch is its own
sequence, on which the base layers add exact zeros, so it is the standalone machine's.

The folder (``qwengpu build --base B --out M``, the default):

* every file of ``B`` at its top level, byte for byte (a hard link on the same filesystem, else a
  copy): ``config.json``, the safetensors shards and index, the tokenizer, ``generation_config.json``.
  ``AutoModelForCausalLM.from_pretrained(M)`` therefore loads exactly the base;
* ``qwengpu_machine/``: the standalone machine (its ``config.json``, ``qwengpu_circuit.json``,
  ``qwengpu_machine.json``) with its tensors **sparse** in ``machine.safetensors``: per tensor ``T``
  a bit mask ``T.mask`` (uint8, the non-zero *bit patterns*, so ``-0.0`` is kept) and the values
  ``T.values``. The machine is ~8.5 % non-zero: 0.6 GB instead of 5.3 GB on the test layer shape.
  Stored rather than recomputed at load because compiling the circuit takes minutes and a cache
  entry can be pruned; the dense bytes' SHA-256 of every tensor is recorded (equal to the cache's
  bytes, checked at build by a round trip) and the stored bytes' SHA-256s are checked at each load;
* ``qwengpu_mount.json`` (format ``qwengpu-lean/1``): compiler version, machine shape, layout, the
  base's files (size, mtime, SHA-256) and every base tensor's SHA-256, the machine tensors' dense
  and stored SHA-256s.

A base file that changed after the build (size or mtime differ, then its tensors are hashed) is
named by tensor at load; ``verify_lean`` (:mod:`qwengpu.model.lean_verify`) hashes everything.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qwengpu.model.mount import (
    MOUNT_SIDECAR,
    Checkpoint,
    MountError,
    Progress,
    _fsync_dir,
    _note,
    check_layer_shape,
    machine_config_for,
    machine_entry,
    text_config_of,
)
from qwengpu.model.safetensors_stream import DT, OutTensor, ShardWriter, tensor_bytes

LEAN_FORMAT = "qwengpu-lean/1"
MACHINE_DIR = "qwengpu_machine"
MACHINE_FILE = "machine.safetensors"
MACHINE_META = ("config.json", "generation_config.json", "qwengpu_circuit.json", "qwengpu_machine.json")
_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class LeanError(MountError):
    """A lean mount that cannot be built or trusted (the message names the file or tensor)."""


# ---------------------------------------------------------------------------------------------
# sparse tensors: a bit mask of the non-zero bit patterns and the values
# ---------------------------------------------------------------------------------------------
def to_sparse(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed mask, values) of ``t``: every element whose bits are not all zero (``-0.0`` kept)."""
    flat = t.contiguous().reshape(-1)
    nz = flat.view(_INT_VIEW[flat.element_size()]).ne(0)
    mask = torch.from_numpy(np.packbits(nz.numpy()))
    return mask, flat[nz].clone()


def from_sparse(mask: torch.Tensor, values: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The dense tensor of :func:`to_sparse`'s parts (zeros elsewhere), bit for bit."""
    n = math.prod(shape)
    nz = np.unpackbits(mask.numpy(), count=n).view(np.bool_)
    count = int(np.count_nonzero(nz))  # numpy: a torch sum over the bools took 8 s of a 2B load
    if count != values.numel():
        raise LeanError(f"the sparse machine tensor's mask has {count} entries, its values {values.numel()}")
    iv = _INT_VIEW[values.element_size()]  # placed as integers: every bit pattern kept as it is
    out = torch.zeros(n, dtype=iv)
    out.numpy()[nz] = values.contiguous().view(iv).numpy()
    return out.view(values.dtype).reshape(shape)


def _sha(t: torch.Tensor) -> str:
    return hashlib.sha256(tensor_bytes(t)).hexdigest()


# ---------------------------------------------------------------------------------------------
# the base's files
# ---------------------------------------------------------------------------------------------
def tensor_shas(ck: Checkpoint, names: list[str] | None = None) -> dict[str, str]:
    """SHA-256 of every tensor's stored bytes (read in 64 MB pieces)."""
    out = {}
    for name in names if names is not None else ck.names():
        lo, hi = ck.info(name)["data_offsets"]
        h = hashlib.sha256()
        for a in range(0, hi - lo, 1 << 26):
            h.update(ck.raw(name, a, min(1 << 26, hi - lo - a)))
        out[name] = h.hexdigest()
    return out


def _file_sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 24), b""):
            h.update(b)
    return h.hexdigest()


def _place(src: Path, dst: Path) -> str:
    """Hard link ``src`` at ``dst`` (same filesystem), else copy it with its mtime; returns how."""
    try:
        os.link(src, dst)
        return "link"
    except OSError:
        shutil.copy2(src, dst)
        return "copy"


def check_base(path: str | Path, rec: dict[str, Any], deep: bool = False) -> None:
    """Refuse a mount whose base part changed after the build, naming the file or tensor.

    Cheap by default: the small files are hashed, a safetensors file only when its size or mtime
    differ from the build's record (then every tensor of it, and the first changed one is named);
    ``deep`` hashes every tensor."""
    p = Path(path)
    files = rec["base_files"]
    changed: list[str] = []
    for fn, info in files.items():
        f = p / fn
        if not f.is_file():
            raise LeanError(f"{f}: the base file is missing from the mount (it was there at the build)")
        st = f.stat()
        if fn.endswith(".safetensors"):
            if deep or st.st_size != info["size"] or st.st_mtime_ns != info["mtime_ns"]:
                changed.append(fn)
        elif _file_sha(f) != info["sha256"]:
            raise LeanError(f"{f}: the base file changed after the build (its SHA-256 differs from the "
                            "record)")
    if not changed:
        return
    ck = Checkpoint(p)
    for fn in changed:
        names = [n for n, w in ck.where.items() if w == fn]
        want = {n: s for n, s in rec["base_tensors"].items() if rec["base_where"].get(n) == fn}
        for n in sorted(set(want) - set(names)):
            raise LeanError(f"{p / fn}: base tensor {n} is missing (the base changed after the build)")
        have = tensor_shas(ck, sorted(want))
        for n in sorted(want):
            if have[n] != want[n]:
                raise LeanError(f"{p / fn}: base tensor {n} changed after the build (its SHA-256 differs "
                                "from the record); rebuild the mount from the base")


# ---------------------------------------------------------------------------------------------
# the build
# ---------------------------------------------------------------------------------------------
_LAST_MACHINE: dict[tuple, tuple[Path, dict, dict, str]] = {}  # the last build's sparse machine file


def _write_sparse_machine(mck: Checkpoint, dst: Path, dense: int,
                          progress: Progress) -> tuple[dict[str, Any], dict[str, str]]:
    """Write the machine's tensors sparse into ``dst``; (per-tensor record, stored parts' SHA-256s).
    Each tensor's sparse round trip is checked bit for bit against the cache's bytes first."""
    parts: list[OutTensor] = []
    machine: dict[str, Any] = {}
    for name in mck.names():
        t = mck.get(name)
        mask, vals = to_sparse(t)
        iv = _INT_VIEW[t.element_size()]
        if not torch.equal(from_sparse(mask, vals, tuple(t.shape)).view(iv), t.view(iv)):  # pragma: no cover
            raise LeanError(f"internal: the sparse round trip of machine tensor {name} is not exact")
        machine[name] = {"shape": list(t.shape), "dtype": mck.info(name)["dtype"], "nnz": vals.numel(),
                         "sha256": _sha(t)}
        parts.append(OutTensor(f"{name}.mask", tuple(mask.shape), torch.uint8, lambda m=mask: iter([m]),
                               "machine"))
        parts.append(OutTensor(f"{name}.values", tuple(vals.shape), vals.dtype, lambda v=vals: iter([v]),
                               "machine"))
        del t
    _note(progress, f"writing the machine sparse ({sum(t.nbytes for t in parts) / 1e9:.2f} GB, "
                    f"dense {dense / 1e9:.2f} GB)")
    return machine, ShardWriter(dst, parts).write_all()


def build_lean(base_dir: str | Path, out_dir: str | Path, *, overwrite: bool = False,
               progress: Progress = None) -> dict[str, Any]:
    """Write the lean mount of ``base_dir`` into ``out_dir`` (module doc); returns its sidecar record.

    Refused (``MountError``) before anything is written: what ``build_mount`` refuses (a missing or
    non-checkpoint base, another model type, a layer shape that cannot host the machine, an existing
    non-empty ``out_dir`` unless ``overwrite``, too little disk). Written into a temporary folder
    beside ``out_dir`` and renamed at the end: nothing half-written."""
    from qwengpu.model.machine_checkpoint import compiler_version, read_machine_sidecar

    t0 = time.perf_counter()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise LeanError(f"{out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise LeanError(f"{out} exists and is not empty (--overwrite replaces it)")
    base = Checkpoint(base_dir)
    if out.resolve() == base.path.resolve():
        raise LeanError("--out must not be the base folder")
    if (base.path / MOUNT_SIDECAR).is_file():
        raise LeanError(f"{base.path} is itself a mount (it has {MOUNT_SIDECAR}); give the plain base")
    layout, text = text_config_of(base.config)
    mcfg = machine_config_for(text)
    check_layer_shape(text, mcfg)
    _note(progress, "reading the machine")
    entry = machine_entry(mcfg, progress)
    version = compiler_version(mcfg)
    meta = read_machine_sidecar(entry)
    mck = Checkpoint(entry)
    dense = sum(math.prod(mck.shape(n)) * DT[mck.info(n)["dtype"]].itemsize for n in mck.names())
    files = sorted(p for p in base.path.iterdir() if p.is_file())
    out.parent.mkdir(parents=True, exist_ok=True)
    same_fs = os.stat(base.path).st_dev == os.stat(out.parent).st_dev
    need = (0 if same_fs else sum(p.stat().st_size for p in files)) + dense // 4
    free = shutil.disk_usage(out.parent).free
    if free < need + (64 << 20):
        raise LeanError(f"not enough free disk in {out.parent}: the lean mount needs about "
                        f"{need / 1e9:.2f} GB, {free / 1e9:.2f} GB are free")
    tmp = out.parent / f".{out.name}.build-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        _note(progress, f"placing the base's {len(files)} files ({'hard links' if same_fs else 'copies'})")
        how = {p.name: _place(p, tmp / p.name) for p in files}
        placed = Checkpoint(tmp)
        base_files = {}
        for p in files:
            st = (tmp / p.name).stat()
            info: dict[str, Any] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "placed": how[p.name]}
            if not p.name.endswith(".safetensors"):
                info["sha256"] = _file_sha(tmp / p.name)
            base_files[p.name] = info
        _note(progress, "hashing the base's tensors")
        base_tensors = tensor_shas(placed)
        # -- the machine, sparse
        mdir = tmp / MACHINE_DIR
        mdir.mkdir()
        for fn in MACHINE_META:
            if (entry / fn).is_file():
                shutil.copy2(entry / fn, mdir / fn)
        key = (str(entry.resolve()),
               tuple(sorted((q.name, q.stat().st_mtime_ns) for q in entry.glob("*.safetensors"))))
        prev = _LAST_MACHINE.get(key)
        if prev is not None and prev[0].is_file() and _file_sha(prev[0]) == prev[3]:
            _note(progress, "the machine's sparse part: the same as the last build's (linked)")
            _place(prev[0], mdir / MACHINE_FILE)
            machine, stored = prev[1], prev[2]
        else:
            machine, stored = _write_sparse_machine(mck, mdir / MACHINE_FILE, dense, progress)
            _LAST_MACHINE.clear()
        machine_sha = _file_sha(mdir / MACHINE_FILE)
        record = {
            "format": LEAN_FORMAT, "compiler_version": version, "machine_shape": dict(meta.get("shape", {})),
            "machine_fingerprint": json.loads((entry / "qwengpu_circuit.json").read_text())["io"].get(
                "fingerprint", ""),
            "layout": layout, "hidden": int(text["hidden_size"]), "base_vocab": int(text["vocab_size"]),
            "base_layers": int(text["num_hidden_layers"]), "base_dtype": str(text.get("dtype") or text.get(
                "torch_dtype") or base.config.get("dtype") or base.config.get("torch_dtype") or "float32"),
            "machine_layers": int(mck.config["num_hidden_layers"]),
            "machine_hidden": int(mck.config["hidden_size"]),
            "machine_vocab": int(mck.config["vocab_size"]),
            "base_source": str(base.path.resolve()), "base_files": base_files, "base_tensors": base_tensors,
            "base_where": dict(placed.where),
            "machine": machine, "machine_stored": stored, "machine_file_sha256": machine_sha,
            "base_bytes": sum(p.stat().st_size for p in files),
            "machine_bytes": (mdir / MACHINE_FILE).stat().st_size, "machine_dense_bytes": dense,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        record["build_seconds"] = round(time.perf_counter() - t0, 3)
        (tmp / MOUNT_SIDECAR).write_text(json.dumps(record, indent=1))
        _fsync_dir(mdir)
        _fsync_dir(tmp)
        if out.exists():
            if any(out.iterdir()) and not overwrite:
                raise LeanError(f"{out} exists and is not empty (--overwrite replaces it)")
            old = out.parent / f".{out.name}.old-{uuid.uuid4().hex}"
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
        _fsync_dir(out.parent)
        _LAST_MACHINE[key] = (out / MACHINE_DIR / MACHINE_FILE, machine, stored, machine_sha)
    except OSError as e:
        raise LeanError(f"cannot write the mount to {out}: {e.strerror or e}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    record["seconds"] = round(time.perf_counter() - t0, 3)
    return record


def mount_format(path: str | Path) -> str | None:
    """The sidecar's format (``qwengpu-mount/1`` stock, ``qwengpu-lean/1`` lean), None if no mount."""
    side = Path(path) / MOUNT_SIDECAR
    try:
        rec = json.loads(side.read_text())
    except (OSError, ValueError):
        return None
    return rec.get("format") if isinstance(rec, dict) else None


def read_lean_sidecar(path: str | Path) -> dict[str, Any]:
    """The lean mount's record; a clear error for anything else."""
    side = Path(path) / MOUNT_SIDECAR
    try:
        rec = json.loads(side.read_text())
    except (OSError, ValueError) as e:
        raise LeanError(f"{side}: missing or unreadable: not a qwengpu mount ({e})") from None
    if not isinstance(rec, dict) or rec.get("format") != LEAN_FORMAT:
        raise LeanError(f"{side}: not a {LEAN_FORMAT} record")
    return rec


def read_machine_tensors(path: str | Path, rec: dict[str, Any], names: list[str] | None = None,
                         check: bool = True):
    """Yield ``(name, dense tensor)`` of the lean mount's machine, its stored bytes' SHA-256s checked
    against the record first (``check``): a damaged byte is named, never run."""
    from safetensors import safe_open

    f_path = Path(path) / MACHINE_DIR / MACHINE_FILE
    if not f_path.is_file():
        raise LeanError(f"{f_path}: the machine part of the mount is missing")
    stored = rec["machine_stored"]
    with safe_open(str(f_path), framework="pt") as f:
        for name in names if names is not None else list(rec["machine"]):
            info = rec["machine"][name]
            try:
                mask, vals = f.get_tensor(f"{name}.mask"), f.get_tensor(f"{name}.values")
            except Exception as e:  # safetensors raises its own error types
                raise LeanError(f"{f_path}: machine tensor {name} is unreadable ({e})") from None
            if check:
                for part, t in (("mask", mask), ("values", vals)):
                    if _sha(t) != stored.get(f"{name}.{part}"):
                        raise LeanError(f"{f_path}: machine tensor {name} ({part}) is damaged: its SHA-256 "
                                        "differs from the build's record")
            yield name, from_sparse(mask, vals, tuple(info["shape"]))


def cmd_build_lean(args) -> int:
    """``qwengpu build`` (default, lean): the summary line or JSON."""
    import sys

    from qwengpu.model.mount import peak_rss_bytes

    if getattr(args, "width", None) is not None:
        raise LeanError("--width sets the stock checkpoint's mounted hidden: pass it with --stock (the "
                        "default lean mount keeps the base's own width)")
    t0 = time.perf_counter()

    def note(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:6.1f} s] {msg}", file=sys.stderr, flush=True)

    rec = build_lean(args.base, args.out, overwrite=args.overwrite, progress=note)
    info = {"format": rec["format"], "layout": rec["layout"], "hidden": rec["hidden"],
            "compiler_version": rec["compiler_version"], "base_bytes": rec["base_bytes"],
            "machine_bytes": rec["machine_bytes"], "machine_dense_bytes": rec["machine_dense_bytes"],
            "seconds": rec["seconds"], "path": str(args.out), "peak_rss_bytes": peak_rss_bytes()}
    if args.json:
        print(json.dumps(info))
    else:
        print(f"wrote {args.out}: the base's files verbatim ({rec['base_bytes'] / 1e9:.2f} GB, "
              f"{rec['base_layers']} layers, {rec['base_dtype']}) + the machine sparse "
              f"({rec['machine_layers']} layers, {rec['machine_bytes'] / 1e9:.2f} GB; dense "
              f"{rec['machine_dense_bytes'] / 1e9:.2f} GB) in {rec['seconds']:.1f} s")
        print("text: qwengpu chat --model OUT (the base's own layers and dtype); launches: qwengpu run K.cu "
              "--engine model --model OUT; the stock single checkpoint: qwengpu build --stock")
    return 0


__all__ = ["LEAN_FORMAT", "LeanError", "build_lean", "check_base", "from_sparse", "mount_format",
           "read_lean_sidecar", "read_machine_tensors", "to_sparse"]
