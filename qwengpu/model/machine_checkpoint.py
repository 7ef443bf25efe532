"""The machine in the weights as a stock checkpoint, and an on-disk cache per compiler version.

Why: compiling the machine and writing its weights takes tens of seconds and gigabytes of memory
every time a process wants the model. :func:`build_checkpoint` writes it once as an ordinary
``Qwen3_5ForCausalLM`` folder (``config.json`` + ``*.safetensors``, no custom code; its vocabulary
is the machine's own 16-bit token space of ``protocol.py``), so ``AutoModelForCausalLM.
from_pretrained`` loads it and greedy ``generate`` runs a launch. :func:`load_or_build` keeps such
folders in ``$QWENGPU_CACHE/machine/<version>/`` (default ``~/.cache/qwengpu/machine/``).

``<version>`` (:func:`compiler_version`) hashes the source of every file of ``qwengpu/compiler/``,
of ``machine/circuit.py``, ``machine/protocol.py`` (and any machine module they import), the layer
config, the :class:`MachineShape` and the ``transformers`` version: any change to the compiler or
the circuit names a new entry, so a stale model is never loaded. Saving reuses
:func:`qwengpu.compiler.checkpoint.save_compiled` (temporary folder, then rename; SHA-256 of every
weight file in its sidecar) and loading reuses :func:`~qwengpu.compiler.checkpoint.load_compiled`
(hashes, loading report, norm weights). A corrupt or mismatching entry is rebuilt with a one-line
warning on stderr, never trusted.

What a caller gets back is the circuit's :class:`~qwengpu.compiler.schedule.CircuitIO` (where the
token's bits live, the residual layout, the fingerprint), not the full ``CompiledCircuit``: that
is all the engine and the runtimes read, and it is what the checkpoint's sidecar records.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import shutil
import struct
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwengpu.errors import CheckpointError, QwenGPUError
from qwengpu.machine.shape import MachineShape

if TYPE_CHECKING:
    import torch
from qwengpu.model.configs import shape_for, test_config

MACHINE_SIDECAR = "qwengpu_machine.json"
MACHINE_FORMAT = "qwengpu-machine/1"
VOCAB_SIZE = 1 << 16  # the machine's token space (protocol.py)
KEEP_ENTRIES = 3  # cache entries kept (most recently used first); each is several GB
STALE_SECONDS = 3600  # a temporary folder this old is the leftover of an interrupted build

_PKG = Path(__file__).resolve().parent.parent
_SOURCES = ("machine/circuit.py", "machine/protocol.py")

Progress = Callable[[str], None] | None
#: free disk a build needs beyond the entry's own bytes
DISK_MARGIN = 256 << 20


class DiskSpaceError(QwenGPUError):
    """Not enough free disk for a machine checkpoint or cache entry (exit 1: free space, or put the
    cache or the output folder elsewhere)."""


def check_disk(folder: Path, need: int, what: str = "the machine's cache entry") -> None:
    """Refuse a build that would not fit in ``folder``'s free disk, with the numbers and the remedy."""
    free = shutil.disk_usage(folder).free
    if free < need:
        raise DiskSpaceError(f"not enough free disk in {folder} for {what} ({need / 1e9:.2f} GB needed, "
                             f"{free / 1e9:.2f} GB free): free some space, or use a folder on another disk "
                             "(QWENGPU_CACHE moves the machine cache)")


def _note(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def _transformers_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformers")
    except PackageNotFoundError:  # pragma: no cover - a source checkout of transformers
        import transformers

        return transformers.__version__


def _config_dict(config) -> dict[str, Any]:
    d = config.to_dict()
    for k in ("transformers_version", "_name_or_path"):
        d.pop(k, None)
    return json.loads(json.dumps(d, sort_keys=True, default=str))


def _machine_sources() -> list[Path]:
    """``circuit.py``, ``protocol.py`` and every ``qwengpu.machine`` module they import (transitively),
    so a constant the circuit starts to take from another machine module still changes the version."""
    seen: list[Path] = []
    todo = [_PKG / s for s in _SOURCES]
    while todo:
        p = todo.pop(0)
        if p in seen or not p.is_file():
            continue
        seen.append(p)
        for node in ast.walk(ast.parse(p.read_text())):
            mods = []
            if isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            todo += [_PKG / "machine" / f"{m.split('.')[2]}.py" for m in mods
                     if m.startswith("qwengpu.machine.") and len(m.split(".")) == 3]
    return seen


def config_named(name: str | None = None):
    """The layer config the standalone machine is compiled into, by shape name (:mod:`qwengpu.shapes`):
    ``2b`` (Qwen3.5-2B's layers, the default) or ``test`` (small and fast); None: the default
    (``$QWENGPU_MACHINE_SHAPE``, else ``2b``)."""
    from qwengpu.shapes import resolve_shape_name

    if resolve_shape_name(name) == "2b":
        from qwengpu.model.configs import machine_2b_config

        return machine_2b_config()
    return test_config()


def compiler_version(config=None, shape: MachineShape | None = None) -> str:
    """A short hash of the compiler and circuit sources, ``config`` (None: the default machine's,
    :func:`config_named`) and ``shape``: the cache key."""
    config = config if config is not None else config_named()
    shape = shape if shape is not None else shape_for(config)
    h = hashlib.sha256(f"{MACHINE_FORMAT}\0transformers {_transformers_version()}".encode())
    files = sorted(p for p in (_PKG / "compiler").rglob("*") if p.is_file() and p.suffix in (".py", ".json"))
    files += _machine_sources()
    for p in files:
        data = p.read_bytes()
        h.update(f"{p.relative_to(_PKG).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    h.update(json.dumps(_config_dict(config), sort_keys=True).encode())
    h.update(json.dumps(dataclasses.asdict(shape), sort_keys=True).encode())
    return h.hexdigest()[:16]


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """Folder of the machine cache: ``cache_dir``, else :func:`qwengpu.paths.cache_home` / machine
    (``$QWENGPU_CACHE``, else ``$XDG_CACHE_HOME/qwengpu``, else ``~/.cache/qwengpu``); each entry is
    a subfolder named by :func:`compiler_version`."""
    if cache_dir is not None:
        return Path(cache_dir)
    from qwengpu.paths import cache_home

    return cache_home() / "machine"


# ---------------------------------------------------------------------------------------------
# build and write
# ---------------------------------------------------------------------------------------------
def _build(config, shape: MachineShape, progress: Progress = None):
    """Compile the machine circuit into ``config``'s shape and write the stock model's weights."""
    from qwengpu.compiler import build_model, compile_circuit
    from qwengpu.machine.circuit import build_machine, mlp_reserve

    _note(progress, "compiling the machine circuit")
    compiled = compile_circuit(build_machine(shape), config, mlp_reserve=mlp_reserve(shape))
    _note(progress, f"writing the weights ({compiled.n_layers} layers)")
    model = build_model(compiled)
    if int(model.config.vocab_size) != VOCAB_SIZE:  # pragma: no cover - protocol.py guarantees it
        raise CheckpointError(f"the machine model has vocab_size {model.config.vocab_size}, not {VOCAB_SIZE}")
    return compiled, model


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(model, compiled, out: Path, meta: dict[str, Any], overwrite: bool) -> Path:
    """``save_compiled`` into a temporary folder beside ``out``, add the machine record, rename."""
    from transformers.utils import logging as hf_logging

    from qwengpu.compiler.checkpoint import save_compiled

    def fill(tmp: Path) -> dict[str, Any]:
        save_compiled(model, compiled, tmp)
        return meta

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # the caller reports progress; no transformers bars
    try:
        return _publish(out, overwrite, fill)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def _umask_modes(folder: Path) -> None:
    """Give every file of ``folder`` the mode a plain ``open()`` would (0666 less the umask, 0644
    typically): the safetensors writer's temporary files are created 0600, and a cache or a
    checkpoint folder others should read must not stay private by accident."""
    mask = os.umask(0)
    os.umask(mask)
    for p in folder.iterdir():
        if p.is_file():
            os.chmod(p, 0o666 & ~mask)


def _publish(out: Path, overwrite: bool, fill: Callable[[Path], dict[str, Any]]) -> Path:
    """``fill(tmp)`` writes the checkpoint into a temporary folder beside ``out`` and returns the
    machine record; the record is added and the folder renamed to ``out`` (nothing half-written)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.build-{uuid.uuid4().hex}"
    try:
        meta = fill(tmp)
        _umask_modes(tmp)
        side = tmp / MACHINE_SIDECAR
        side.write_text(json.dumps(meta, indent=1))
        _fsync(side)
        _fsync(tmp)
        if out.exists():
            if not overwrite and any(out.iterdir()):
                raise CheckpointError(f"{out} exists and is not empty")
            old = out.parent / f".{out.name}.old-{uuid.uuid4().hex}"
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
        _fsync(out.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


class MachineTensors:
    """The machine compiled into ``config``'s layers, its stock weights produced by name, one decoder
    layer at a time (the previous one is dropped when the next is asked for): what the streamed
    checkpoint writer and the sparse cache entry (:mod:`qwengpu.model.machine_sparse`) read, so
    neither holds the whole float32 model (~9 GB on the 2B shape)."""

    def __init__(self, config, shape: MachineShape, progress: Progress = None) -> None:
        import torch
        from transformers import Qwen3_5ForCausalLM

        from qwengpu.compiler import compile_circuit
        from qwengpu.compiler.build import TokenIO, model_config
        from qwengpu.machine.circuit import build_machine, mlp_reserve

        _note(progress, "compiling the machine circuit")
        self.compiled = compile_circuit(build_machine(shape), config, mlp_reserve=mlp_reserve(shape))
        self.io = TokenIO.of(self.compiled)
        if self.io.vocab_size != VOCAB_SIZE:  # pragma: no cover - protocol.py guarantees it
            raise CheckpointError(f"the machine model has vocab_size {self.io.vocab_size}, not {VOCAB_SIZE}")
        self.cfg = model_config(self.compiled, self.io.vocab_size)
        self.cfg.dtype = torch.float32
        with torch.device("meta"):
            skeleton = Qwen3_5ForCausalLM(self.cfg)
        self.shapes = {name: tuple(t.shape) for name, t in skeleton.state_dict().items()}
        self.progress = progress
        self.held: dict[int, dict[str, torch.Tensor]] = {}

    def names(self) -> list[str]:
        """Every weight's name, in the stock model's ``state_dict`` order."""
        return list(self.shapes)

    def info(self, name: str) -> dict[str, Any]:
        """The safetensors header entry's fields a reader uses (dtype, shape)."""
        return {"dtype": "F32", "shape": list(self.shapes[name])}

    def _layer(self, i: int, leaf: str) -> torch.Tensor:
        from transformers.initialization import no_init_weights
        from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer

        from qwengpu.compiler.build import write_layer

        if i not in self.held:  # the next layer: build it, drop the previous one
            self.held.clear()
            with no_init_weights():
                layer = Qwen3_5DecoderLayer(self.cfg, i)
            write_layer(layer, self.compiled.layers[i], self.compiled, self.cfg)
            self.held[i] = {k: v.detach() for k, v in layer.state_dict().items()}
            _note(self.progress, f"layer {i + 1}/{self.compiled.n_layers} written")
        return self.held[i][leaf]

    def get(self, name: str) -> torch.Tensor:
        """The weight ``name`` as the stock model holds it (float32)."""
        import torch

        from qwengpu.compiler.build import embedding_rows, head_rows

        if name.startswith("model.layers."):
            _, _, i, leaf = name.split(".", 3)
            return self._layer(int(i), leaf)
        if name == "model.embed_tokens.weight":
            return embedding_rows(self.compiled, self.io)
        if name == "lm_head.weight":
            return head_rows(self.compiled, self.io)
        if name == "model.norm.weight":
            return torch.full(self.shapes[name], self.compiled.residual.norm_weight)
        raise CheckpointError(f"internal: unexpected machine parameter {name}")  # pragma: no cover

    def release(self) -> None:
        self.held.clear()


def stream_checkpoint(out: Path, config=None, shape: MachineShape | None = None, *, overwrite: bool = False,
                      progress: Progress = None) -> Path:
    """Compile the machine and write it to ``out`` one decoder layer at a time: the same tensors as
    :func:`build_checkpoint`'s in-memory model (a test compares them bit for bit), but never more
    than one layer (plus the embedding and head) in memory. Why: the 2B-shape machine is ~9 GB in
    float32, and a first ``qwengpu build`` of a 2B mount builds it; held whole, it set that build's
    peak memory (9.8 GiB measured) above the mount's own streaming (~2 GiB)."""
    import torch
    from transformers import GenerationConfig

    from qwengpu.compiler.checkpoint import write_sidecar
    from qwengpu.model.safetensors_stream import OutTensor, ShardWriter

    config = config if config is not None else config_named()
    shape = shape if shape is not None else shape_for(config)
    version = compiler_version(config, shape)
    t0 = time.perf_counter()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    check_disk(out.parent, DISK_MARGIN, what=f"the machine checkpoint {out}")  # before the compile
    src = MachineTensors(config, shape, progress)
    tensors = [OutTensor(name, src.shapes[name], torch.float32, (lambda name=name: iter([src.get(name)])),
                         "machine") for name in src.names()]
    check_disk(out.parent, sum(t.nbytes for t in tensors) + DISK_MARGIN, what=f"the machine checkpoint {out}")

    def fill(tmp: Path) -> dict[str, Any]:
        tmp.mkdir()
        sums = ShardWriter(tmp / "model.safetensors", tensors).write_all()
        src.release()
        src.cfg.save_pretrained(tmp)
        GenerationConfig.from_model_config(src.cfg).save_pretrained(tmp)
        write_sidecar(tmp, src.compiled, "float32")
        for p in tmp.iterdir():
            _fsync(p)
        meta = _meta(version, config, shape, time.perf_counter() - t0)
        meta[TENSOR_SUMS] = sums  # per tensor: a damaged entry is then refused by name (check_entry)
        return meta

    _note(progress, f"writing the weights ({src.compiled.n_layers} layers, one at a time)")
    try:
        return _publish(out, overwrite, fill)
    except OSError as e:  # a disk that filled meanwhile, a folder made read-only: no traceback
        raise CheckpointError(f"cannot write the machine checkpoint {out}: {e.strerror or e}") from None


def _meta(version: str, config, shape: MachineShape, build_seconds: float) -> dict[str, Any]:
    return {"format": MACHINE_FORMAT, "compiler_version": version, "shape": dataclasses.asdict(shape),
            "config": _config_dict(config), "vocab_size": VOCAB_SIZE,
            "build_seconds": round(build_seconds, 3), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def build_checkpoint(out_dir: str | Path, config=None, shape: MachineShape | None = None, *,
                     overwrite: bool = False, progress: Progress = None) -> Path:
    """Write the machine as a stock ``Qwen3_5ForCausalLM`` checkpoint into ``out_dir``; returns it.

    Nothing half-written: the folder appears by one rename. An existing non-empty ``out_dir`` is
    refused (:class:`CheckpointError`) unless ``overwrite``. ``progress(message)`` hears the stages.
    """
    out = check_out_folder(out_dir, overwrite)
    return stream_checkpoint(out, config, shape, overwrite=overwrite, progress=progress)


def check_out_folder(out_dir: str | Path, overwrite: bool = False) -> Path:
    """The folder a checkpoint will be written to, refused (:class:`CheckpointError`) when it is a
    file or a non-empty folder (unless ``overwrite``). Light: ``machine build`` asks before it
    imports the compiler, so a refusal comes at once."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CheckpointError(f"{out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise CheckpointError(f"{out} exists and is not empty; refusing to write the machine there "
                              "(overwrite=True / --overwrite replaces it)")
    return out


# ---------------------------------------------------------------------------------------------
# the cache
# ---------------------------------------------------------------------------------------------
def read_machine_sidecar(path: str | Path) -> dict[str, Any]:
    side = Path(path) / MACHINE_SIDECAR
    try:
        meta = json.loads(side.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{side}: missing or unreadable ({e})") from e
    if not isinstance(meta, dict) or meta.get("format") != MACHINE_FORMAT:
        raise CheckpointError(f"{side}: not a {MACHINE_FORMAT} record")
    return meta


TENSOR_SUMS = "tensor_sha256"  # the machine record's SHA-256 of every tensor's bytes
_CHECKED: set[tuple] = set()  # entries this process has checked (path, files' size/mtime/inode)


class MachineCacheError(CheckpointError):
    """A machine cache entry whose bytes differ from the SHA-256s recorded when it was written."""


def _remedy(entry: Path) -> str:
    return (f"clear it with `qwengpu machine cache --clear` (or delete {entry}) and rerun: the machine "
            "is then rebuilt from the circuit")


def _hash_file(path: Path, progress: Progress = None,
               recorded: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """(SHA-256 of the whole file, SHA-256 of each tensor's bytes) of a safetensors file, in one
    sequential pass (the per-tensor sums name a damaged tensor; the file's is what was recorded).
    A tensor whose sum differs from ``recorded`` stops the pass at once (refused by name)."""
    step = 1 << 26
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise MachineCacheError(f"{path}: truncated ({size} bytes)")
            (n,) = struct.unpack("<Q", head)
            hb = f.read(min(n, 1 << 30))
            try:
                header = json.loads(hb)
            except ValueError:
                raise MachineCacheError(f"{path}: its safetensors header is unreadable (damaged); "
                                        f"{_remedy(path.parent)}") from None
            whole = hashlib.sha256(head)
            whole.update(hb)
            spans = sorted((int(v["data_offsets"][0]), int(v["data_offsets"][1]), k)
                           for k, v in header.items() if k != "__metadata__")
            sums = {k: hashlib.sha256() for _, _, k in spans}
            pos, i, shown = 0, 0, 0
            while buf := f.read(step):
                whole.update(buf)
                view, end = memoryview(buf), pos + len(buf)
                while i < len(spans) and spans[i][0] < end:
                    lo, hi, k = spans[i]
                    a, b = max(lo, pos), min(hi, end)
                    if b > a:
                        sums[k].update(view[a - pos:b - pos])
                    if hi > end:
                        break
                    i += 1
                    if recorded and k in recorded and sums[k].hexdigest() != recorded[k]:
                        raise MachineCacheError(f"machine cache entry {path.parent} is damaged: tensor {k} "
                                                f"differs from its recorded SHA-256; {_remedy(path.parent)}")
                pos = end
                if progress is not None and pos - shown >= 1 << 30:
                    shown = pos
                    progress(f"checking the machine cache entry: {pos / 1e9:.1f} of {size / 1e9:.1f} GB "
                             "hashed")
    except OSError as e:
        raise MachineCacheError(f"{path}: cannot read ({e.strerror or e})") from None
    return whole.hexdigest(), {k: h.hexdigest() for k, h in sums.items()}


def check_entry(entry: str | Path, progress: Progress = None) -> dict[str, str]:
    """Check a machine cache entry's weight files against the SHA-256s recorded when it was
    written, before anything is built on it; returns each tensor's SHA-256.

    Why: a mount copies the machine's bytes and ``verify`` recomputes the mount from them; a
    damaged entry would otherwise be built in and then "recomputed bit for bit" from the same bad
    bytes. A mismatch raises :class:`MachineCacheError` naming the tensor (from the per-tensor
    record; an entry written before that record names the file) and the remedy. The per-tensor
    record of an older entry is filled in once its files match their recorded sums (one pass
    computes both). Checked once per process while the files' size, mtime and inode stay."""
    from qwengpu.compiler.checkpoint import read_sidecar

    entry = Path(entry)
    meta = read_machine_sidecar(entry)
    circuit = read_sidecar(entry)
    files: dict[str, str] = dict(circuit.get("files") or {})
    present = sorted(p.name for p in entry.iterdir() if p.suffix == ".safetensors")
    if not files or present != sorted(files):
        raise MachineCacheError(f"machine cache entry {entry}: weight files {present} are not the recorded "
                                f"{sorted(files)}; {_remedy(entry)}")
    recorded: dict[str, str] = dict(meta.get(TENSOR_SUMS) or {})
    try:
        stamp = tuple((fn, (st := (entry / fn).stat()).st_size, st.st_mtime_ns, st.st_ino) for fn in present)
    except OSError as e:
        raise MachineCacheError(f"machine cache entry {entry}: cannot read ({e.strerror or e})") from None
    key = (str(entry.resolve()), stamp, json.dumps(files, sort_keys=True),
           json.dumps(recorded, sort_keys=True))
    sums: dict[str, str] = {}
    if key in _CHECKED:
        return recorded
    for fn, want in sorted(files.items()):
        _note(progress, f"checking the machine cache entry {entry.name} ({fn}) against its recorded SHA-256")
        got, tsums = _hash_file(entry / fn, progress, recorded)
        bad = [n for n, s in tsums.items() if n in recorded and recorded[n] != s]
        if bad:
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise MachineCacheError(f"machine cache entry {entry} is damaged: tensor {bad[0]}{more} differs "
                                    f"from its recorded SHA-256; {_remedy(entry)}")
        if got != want:
            what = ("its header (names, shapes or offsets)" if recorded else
                    "(this entry predates the per-tensor record, so the tensor cannot be named)")
            raise MachineCacheError(f"machine cache entry {entry} is damaged: {fn} differs from its recorded "
                                    f"SHA-256 {what}; {_remedy(entry)}")
        sums.update(tsums)
    if recorded and set(recorded) != set(sums):
        odd = sorted(set(recorded) ^ set(sums))
        raise MachineCacheError(f"machine cache entry {entry}: tensor {odd[0]} is in only one of the weights "
                                f"and the per-tensor record; {_remedy(entry)}")
    if not recorded:  # an older entry: its files match, so these sums are its bytes; record them
        meta[TENSOR_SUMS] = sums
        side = entry / MACHINE_SIDECAR
        tmp = entry / f".{MACHINE_SIDECAR}.{uuid.uuid4().hex}"
        try:
            tmp.write_text(json.dumps(meta, indent=1))
            shutil.copymode(side, tmp)
            os.rename(tmp, side)
        except OSError:  # a read-only cache: the entry is still good, only unnamed on damage
            tmp.unlink(missing_ok=True)
        key = (key[0], stamp, key[2], json.dumps(sums, sort_keys=True))
    _CHECKED.add(key)
    return sums


def load_checkpoint(path: str | Path, version: str | None = None):
    """Load a machine checkpoint (verified); ``version``: the :func:`compiler_version` it must have.

    Returns ``(CircuitIO, model)``; raises :class:`CheckpointError` on any mismatch or damage."""
    path = Path(path)
    meta = read_machine_sidecar(path)
    if version is not None and meta.get("compiler_version") != version:
        raise CheckpointError(f"{path}: built by compiler version {meta.get('compiler_version')!r}, "
                              f"expected {version!r}")
    import torch
    from transformers.utils import logging as hf_logging

    from qwengpu.compiler.checkpoint import load_compiled

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # our own progress line, not transformers' bars
    try:
        model, io = load_compiled(path, dtype=torch.float32)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    if int(model.config.vocab_size) != VOCAB_SIZE:
        raise CheckpointError(f"{path}: vocab_size {model.config.vocab_size}, expected {VOCAB_SIZE}")
    return io, model


def load_or_build(config=None, shape: MachineShape | None = None, *, cache_dir: str | Path | None = None,
                  progress: Progress = None):
    """``(CircuitIO, stock model)`` of the machine: loaded from the cache when present and verified,
    otherwise built and saved there (atomically) for the next process.

    A damaged or mismatching entry is rebuilt, with one warning line on stderr. A cache that cannot
    be written (read-only, full disk) only costs the next process a rebuild: warned, not fatal."""
    config = config if config is not None else config_named()
    shape = shape if shape is not None else shape_for(config)
    version = compiler_version(config, shape)
    entry = cache_root(cache_dir) / version
    if (cached := _load_cached(entry, version, progress)) is not None:
        return cached
    with entry_lock(entry):
        # another process may have built it while this one waited for the lock
        if (cached := _load_cached(entry, version, progress)) is not None:
            return cached
        t0 = time.perf_counter()
        compiled, model = _build(config, shape, progress)
        seconds = time.perf_counter() - t0
        try:
            if not entry.exists():
                _note(progress, f"saving the machine to {entry}")
                _write(model, compiled, entry, _meta(version, config, shape, seconds), overwrite=False)
            prune(cache_dir, keep=KEEP_ENTRIES, protect=version)
        except (OSError, CheckpointError) as e:
            print(f"warning: could not save the machine to the cache ({e})", file=sys.stderr)
    return compiled.io, model


def _load_cached(entry: Path, version: str, progress: Progress):
    """``load_or_build``'s read of an existing entry: ``(CircuitIO, model)``, or None when there is
    none or it is unusable (then removed, with one warning line: it is rebuilt)."""
    if not entry.exists():
        return None
    try:
        _note(progress, f"loading the machine from {entry}")
        io, model = load_checkpoint(entry, version)
        os.utime(entry / MACHINE_SIDECAR)  # most recently used: kept longest
        return io, model
    except (CheckpointError, OSError) as e:
        reason = " ".join(str(e).split())  # one line, whatever the loader said
        print(f"warning: machine cache entry unusable, rebuilding: {reason}", file=sys.stderr)
        shutil.rmtree(entry, ignore_errors=True)
        return None


@contextmanager
def entry_lock(entry: Path) -> Iterator[None]:
    """Held while a process builds cache entry ``entry``: a second process that needs the same
    entry (two launches started together, the test session's two workers) waits for the first's
    build and loads it instead of compiling the machine again beside it. A cache folder where no
    lock file can be made (read-only) is built without one: ``_publish``'s rename keeps the entry
    whole either way."""
    from filelock import FileLock, Timeout

    lock = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(entry.parent / f".{entry.name}.lock"), timeout=3600)
        lock.acquire()
    except (OSError, Timeout):
        lock = None
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _shape_name(meta: dict[str, Any]) -> str:
    """``test`` or ``2b`` when the entry's layer config has a named machine shape's hidden and
    intermediate sizes (``configs.SHAPE_DIMS``, ``run --shape``), else ``custom``. By the sizes, not
    the whole config: building the named configs imports transformers and torch, which made
    ``machine cache`` take seconds (the listing prints the entry's sizes beside the name)."""
    from qwengpu.model.configs import SHAPE_DIMS

    want = meta.get("config")
    if not want:
        return "unknown"
    dims = (want.get("hidden_size"), want.get("intermediate_size"))
    return next((name for name, d in SHAPE_DIMS.items() if tuple(d) == dims), "custom")


def cache_entries(cache_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """Every entry of the cache, most recently used first: version, path, bytes, complete, shape
    (``test``/``2b``/``custom``), layer sizes, last use; leftovers of interrupted builds (hidden
    temporary folders) are listed as incomplete. A cache location that is not a folder is refused
    (:class:`qwengpu.paths.CacheLocationError`, an ``OSError`` too)."""
    from qwengpu.paths import check_folder

    root = cache_root(cache_dir)
    check_folder(root)
    if not root.is_dir():
        return []
    rows = []
    for p in root.iterdir():
        try:
            if not p.is_dir():
                continue
            try:
                meta = read_machine_sidecar(p)
                used = (p / MACHINE_SIDECAR).stat().st_mtime
            except CheckpointError:
                meta, used = {}, p.stat().st_mtime
            size = _size(p)
        except OSError:  # removed meanwhile (another process pruning or renaming)
            continue
        cfg = meta.get("config", {})
        rows.append({"version": p.name, "path": str(p), "bytes": size,
                     "complete": bool(meta) and not p.name.startswith("."),
                     "storage": meta.get("storage", "dense") if meta else None,
                     "shape": meta.get("shape"), "shape_name": _shape_name(meta),
                     "hidden_size": cfg.get("hidden_size"), "intermediate_size": cfg.get("intermediate_size"),
                     "layers": cfg.get("num_hidden_layers"),
                     "last_used": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(used)), "used_at": used})
    rows.sort(key=lambda r: -r["used_at"])
    return rows


def prune(cache_dir: str | Path | None = None, keep: int = KEEP_ENTRIES,
          protect: str | None = None) -> list[Path]:
    """Remove the entries of all but the ``keep`` most recently used compiler versions (a version's
    dense entry ``<v>`` and lean entry ``<v>.sparse`` count as one; never ``protect``'s), and
    temporary folders that interrupted builds left more than an hour ago."""

    def version_of(name: str) -> str:
        return name.removesuffix(".sparse")

    removed = []
    rows = cache_entries(cache_dir)
    complete = [r for r in rows if r["complete"]]
    kept: list[str] = []
    for r in complete:  # most recently used first
        if version_of(r["version"]) not in kept:
            kept.append(version_of(r["version"]))
    old = [r for r in complete if version_of(r["version"]) not in kept[:keep]]
    stale = [r for r in rows if not r["complete"] and r["version"].startswith(".")
             and time.time() - r["used_at"] > STALE_SECONDS]
    for r in old + stale:
        if protect is None or version_of(r["version"]) != version_of(protect):
            shutil.rmtree(r["path"], ignore_errors=True)
            removed.append(Path(r["path"]))
    return removed


def clear_cache(cache_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """Remove every entry (and leftover temporary folder); returns what was removed. The PTX cache
    is :func:`qwengpu.cuda.nvrtc.clear_ptx_cache` (``qwengpu machine cache --clear`` clears both)."""
    rows = cache_entries(cache_dir)
    for r in rows:
        shutil.rmtree(r["path"], ignore_errors=True)
    return rows
