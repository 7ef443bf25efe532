"""The mount: the machine's layers in front of a user's Qwen3.5, as one stock checkpoint.

Why a wider hidden: the base's embeddings fill all of its dims, so the machine cannot share them
exactly (``docs/mount.md``). The mounted hidden ``H'`` holds the base in dims ``0..H-1`` and the
machine's used dims above it, with zeros elsewhere; then on text every machine weight reads exact
zeros and on a launch every base weight does, so each side adds exactly nothing to the other.

The transform, tensor by tensor (``c = sqrt(H'/H)``, every value float32):

* **base**: embedding rows ``x c``, output projections (``o_proj``, ``linear_attn.out_proj``,
  ``mlp.down_proj``) ``x c``, so the residual is ``c`` times the base's and every RMSNorm (whose
  mean runs over ``H' = c^2 H`` dims) computes the base's factor; the normed vector is then ``c``
  times the base's, so every *reading* projection (``in_proj_*``, ``q/k/v_proj``, ``gate/up_proj``)
  and the base's ``lm_head`` rows are divided by ``c``. Norm weights are not touched (a
  zero-centred ``(1 + w) / c - 1`` loses bits; a power-of-two ``c`` on the weights is exact, so at
  ``H' = 4^k H`` text logits are bit-identical to the base's).
* **machine**: every tensor moved to its dims (its all-zero dims and old filler dims dropped);
  new fillers so that ``sum(x^2) == 64 H'`` on every machine token (every machine RMSNorm still
  scales by exactly 1/8: the machine computes bit for bit as standalone).
* **flag dim f** (fresh): base token embeddings hold ``ALPHA`` there (its square vanishes in every
  norm), machine embeddings 0; nobody writes f. The final norm's ``(1 + w_f) = FLAG_GAIN`` and the
  machine's ``lm_head`` rows hold ``FLAG_WEIGHT`` in f: on text a machine token scores about
  ``-2^40 r`` (its softmax weight underflows to 0), on a launch f is 0 and the machine's logits are
  its standalone logits. The machine checkpoint is *untied* (its head reads 16 output bits, its
  embedding writes 1,682 input dims), so the mount is untied too; then no swap neuron is needed.
* **vocabulary** ``V' = V + 65536``: machine token ``t`` is id ``V + t``.

Streaming: tensors are read with ``safetensors.safe_open`` and written row-chunk by row-chunk by
:class:`_ShardWriter` (the safetensors format: 8-byte header length, JSON header, raw data), so a
2B mount never sits in memory; the sha256 of every tensor is computed on the way.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from qwengpu.errors import CheckpointError
from qwengpu.model.safetensors_stream import DT as _DT
from qwengpu.model.safetensors_stream import OutTensor
from qwengpu.model.safetensors_stream import ShardWriter as _ShardWriter

MOUNT_SIDECAR = "qwengpu_mount.json"
MOUNT_FORMAT = "qwengpu-mount/1"
MACHINE_VOCAB = 1 << 16
ALPHA = 2.0 ** -40  # base tokens' value in the flag dim: alpha^2 = 2^-80 vanishes in every RMSNorm
FLAG_GAIN = 2.0 ** 80  # (1 + w) of the final norm in the flag dim
FLAG_WEIGHT = -1.0  # the machine lm_head rows' weight in the flag dim
SHARD_BYTES = 1 << 30  # about this many bytes per output shard (a larger tensor gets its own)
CHUNK_ROWS = 8192  # embedding / lm_head rows transformed at a time

READ = ("in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b", "q_proj", "k_proj", "v_proj",
        "gate_proj", "up_proj")
WRITE = ("out_proj", "o_proj", "down_proj")
NORMS = ("input_layernorm", "post_attention_layernorm")
LAYER_FIELDS = ("intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                "linear_value_head_dim", "linear_conv_kernel_dim", "rms_norm_eps", "hidden_act")
WEIGHT_FILES = ("config.json", "model.safetensors.index.json")
Progress = Callable[[str], None] | None


class MountError(CheckpointError):
    """A base that cannot be mounted, or a mount that cannot be written (the message says why)."""


def _note(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


# ---------------------------------------------------------------------------------------------
# reading checkpoints
# ---------------------------------------------------------------------------------------------
def read_header(path: Path) -> tuple[int, dict[str, Any]]:
    """(data start, header) of a safetensors file; a truncated or malformed file is a clear error."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise MountError(f"{path}: truncated safetensors file ({size} bytes)")
            (n,) = struct.unpack("<Q", head)
            if n > min(size, 1 << 30):
                raise MountError(f"{path}: not a safetensors file (header length {n})")
            header = json.loads(f.read(n))
    except OSError as e:
        raise MountError(f"{path}: cannot read ({e.strerror})") from None
    except ValueError:
        raise MountError(f"{path}: not a safetensors file (unreadable header)") from None
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    if size < 8 + n + end:
        raise MountError(f"{path}: truncated shard: {size:,} bytes, its header describes {8 + n + end:,}")
    return 8 + n, header


class Checkpoint:
    """A local safetensors checkpoint folder (one file or shards with an index), read lazily."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise MountError(f"{self.path}: no such checkpoint folder")
        cfg = self.path / "config.json"
        if not cfg.is_file():
            raise MountError(f"{self.path}: not a checkpoint folder (no config.json)")
        try:
            self.config = json.loads(cfg.read_text())
        except ValueError as e:
            raise MountError(f"{cfg}: not valid JSON ({e})") from None
        index = self.path / "model.safetensors.index.json"
        if index.is_file():
            try:
                wmap = json.loads(index.read_text())["weight_map"]
            except (ValueError, KeyError, TypeError) as e:
                raise MountError(f"{index}: not a safetensors index ({e})") from None
        elif (self.path / "model.safetensors").is_file():
            wmap = None
        else:
            raise MountError(f"{self.path}: no model.safetensors or model.safetensors.index.json")
        files = sorted(set(wmap.values())) if wmap is not None else ["model.safetensors"]
        for fn in files:
            if not (self.path / fn).is_file():
                raise MountError(f"{index}: names {fn}, which is missing")
        self.headers: dict[str, tuple[int, dict]] = {fn: read_header(self.path / fn) for fn in files}
        self.where: dict[str, str] = {}
        for fn, (_, h) in self.headers.items():
            for k in h:
                if k != "__metadata__":
                    self.where[k] = fn
        if wmap is not None:
            for k, fn in wmap.items():
                if self.where.get(k) != fn:
                    raise MountError(f"{index}: names {k} in {fn}, which does not hold it")

    def names(self) -> list[str]:
        return list(self.where)

    def info(self, name: str) -> dict[str, Any]:
        return self.headers[self.where[name]][1][name]

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.info(name)["shape"])

    def get(self, name: str) -> torch.Tensor:
        """The whole tensor, read with plain file reads (no memory map: a streamed build keeps
        only what it transforms in memory)."""
        if name not in self.where:
            raise MountError(f"{self.path}: tensor {name} is missing")
        info = self.info(name)
        return self._tensor(self.raw(name), info["dtype"], info["shape"])

    def rows(self, name: str, a: int, b: int) -> torch.Tensor:
        """Rows ``a..b`` of a tensor (contiguous bytes on disk)."""
        info = self.info(name)
        shape = list(info["shape"])
        row = math.prod(shape[1:]) * torch.empty((), dtype=_DT[info["dtype"]]).element_size()
        b = min(b, shape[0])
        return self._tensor(self.raw(name, a * row, (b - a) * row), info["dtype"], [b - a, *shape[1:]])

    @staticmethod
    def _tensor(data: bytes, dtype: str, shape: list[int]) -> torch.Tensor:
        if dtype not in _DT:
            raise MountError(f"unsupported tensor dtype {dtype}")
        if not data:
            return torch.zeros(shape, dtype=_DT[dtype])
        return torch.frombuffer(bytearray(data), dtype=_DT[dtype]).reshape(shape)

    def raw(self, name: str, skip: int = 0, length: int | None = None) -> bytes:
        """The tensor's bytes exactly as stored (or ``length`` of them from ``skip``)."""
        fn = self.where[name]
        start, h = self.headers[fn]
        lo, hi = h[name]["data_offsets"]
        n = hi - lo - skip if length is None else length
        with open(self.path / fn, "rb") as f:
            f.seek(start + lo + skip)
            data = f.read(n)
        if len(data) != n:
            raise MountError(f"{self.path / fn}: truncated while reading {name}")
        return data

    def close(self) -> None:
        """Nothing stays open between reads."""


def text_config_of(cfg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(layout, text config dict) of a Qwen3.5 config.json; anything else is refused by name."""
    mt = cfg.get("model_type")
    if mt == "qwen3_5_text":
        return "causal", cfg
    if mt == "qwen3_5":
        tc = cfg.get("text_config")
        if not isinstance(tc, dict):
            raise MountError("config.json: model_type qwen3_5 without a text_config")
        return "conditional", tc
    raise MountError(f"config.json: model_type {mt!r} is not Qwen3.5 (qwen3_5 or qwen3_5_text)")


# ---------------------------------------------------------------------------------------------
# the machine
# ---------------------------------------------------------------------------------------------
def machine_config_for(text: dict[str, Any]):
    """The machine's compile config for a base's layer shape (the base's layer fields; hidden 2048,
    or ``configs.MACHINE_WIDTH_2B`` for the 2B's).

    The test shape and the 2B shape are the exact configs the rest of qwengpu compiles for (one
    cache entry each); any other layer shape is the test config with the base's fields."""
    from qwengpu.model.configs import machine_2b_config, test_config

    for cand in (test_config(), machine_2b_config()):
        if all(getattr(cand, k) == text.get(k, getattr(cand, k)) for k in LAYER_FIELDS):
            return cand
    cfg = test_config()
    for k in LAYER_FIELDS:
        if k in text:
            setattr(cfg, k, text[k])
    return cfg


def machine_entry(mcfg, progress: Progress = None) -> Path:
    """The machine's cache folder for ``mcfg``: built and cached first when absent or unreadable;
    an existing entry is checked against its recorded SHA-256s before anyone builds on it (a
    damaged one is refused, :class:`~qwengpu.model.machine_checkpoint.MachineCacheError`, naming
    the tensor and the remedy)."""
    from qwengpu.model.machine_checkpoint import (
        MACHINE_SIDECAR,
        cache_root,
        check_entry,
        compiler_version,
        entry_lock,
    )

    version = compiler_version(mcfg)
    entry = cache_root() / version

    def whole() -> bool:
        if not ((entry / MACHINE_SIDECAR).is_file() and (entry / "qwengpu_circuit.json").is_file()):
            return False
        try:
            rec = json.loads((entry / "qwengpu_circuit.json").read_text())
            for fn in rec.get("files", {}):
                read_header(entry / fn)
        except (MountError, ValueError, OSError):
            return False
        return True

    if not whole():
        with entry_lock(entry):  # another process may be building it: wait, then look again
            if not whole():
                _build_entry(entry, mcfg, version, progress)
    check_entry(entry, progress)  # a fresh build too: its bytes are what its record says
    return entry


def _build_entry(entry: Path, mcfg, version: str, progress: Progress) -> None:
    """``machine_entry``'s build: the machine streamed into the cache folder ``entry``."""
    from qwengpu.compiler import FitError
    from qwengpu.model.machine_checkpoint import KEEP_ENTRIES, prune, stream_checkpoint

    _note(progress, "building the machine for the base's layer shape (cached afterwards)")
    try:  # streamed one layer at a time: the 2B-shape machine alone is ~9 GB in float32
        stream_checkpoint(entry, mcfg, overwrite=True, progress=progress)
        prune(keep=KEEP_ENTRIES, protect=version)
    except FitError as e:
        from qwengpu.model.configs import test_config

        tc = test_config()
        diff = ", ".join(f"{k} = {getattr(mcfg, k)!r}" for k in LAYER_FIELDS
                         if getattr(mcfg, k) != getattr(tc, k))
        raise MountError(f"config.json: the layer shape ({diff or 'as given'}) cannot host the machine: "
                         f"{' '.join(str(e).split())}") from None


@dataclass
class MachineInfo:
    """What the mount needs from the standalone machine checkpoint."""

    path: Path
    ckpt: Checkpoint
    config: dict[str, Any]
    compiler_version: str
    hidden: int
    layers: int
    layer_types: list[str]
    used: list[int]  # machine dims moved into the mount (ascending; old fillers excluded)
    one_dim: int
    old_fillers: list[int]
    row_mass: int  # sum of squares of a machine embedding row over ``used``
    norm_fill: float
    fingerprint: str
    shape: dict[str, Any]  # the MachineShape it was compiled with (the multiplier: MachineShape.multiplier)


_INSPECTED: dict[tuple[str, int], MachineInfo] = {}


def inspect_machine(entry: Path) -> MachineInfo:
    """:func:`inspect_machine_uncached`, once per process and cache entry (a pass over ~5 GB)."""
    stamp = tuple(sorted((p.name, p.stat().st_mtime_ns) for p in Path(entry).glob("*.safetensors")))
    key = (str(Path(entry).resolve()), hash(stamp))
    if key not in _INSPECTED:
        _INSPECTED.clear()
        _INSPECTED[key] = inspect_machine_uncached(Path(entry))
    return _INSPECTED[key]


def inspect_machine_uncached(entry: Path) -> MachineInfo:
    """Find the machine's used dims (every dim a weight, embedding row or head column touches) and
    check what the mount relies on: old filler dims are touched by the embedding alone, every
    embedding row has the same mass on the used dims, no weight touches an unused dim."""
    from qwengpu.model.machine_checkpoint import read_machine_sidecar

    meta = read_machine_sidecar(entry)
    rec = json.loads((entry / "qwengpu_circuit.json").read_text())
    res = rec["io"]["residual"]
    ck = Checkpoint(entry)
    cfg = ck.config
    hm = int(cfg["hidden_size"])
    touched = torch.zeros(hm, dtype=torch.bool)
    weights = torch.zeros(hm, dtype=torch.bool)
    for name in ck.names():
        parts = name.split(".")
        if name in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"):
            continue
        t = ck.get(name)
        leaf = parts[-2] if parts[-1] in ("weight", "bias") else parts[-1]
        if leaf in READ and parts[-1] == "weight":
            weights |= t.ne(0).any(0)
        elif leaf in WRITE:
            weights |= t.ne(0).any(1) if t.dim() == 2 else t.ne(0)
    emb = ck.get("model.embed_tokens.weight")
    ecols = emb.ne(0).any(0)
    hcols = ck.get("lm_head.weight").ne(0).any(0)
    touched = weights | ecols | hcols
    fillers = [int(d) for d in res["filler_dims"]]
    if weights[fillers].any() or hcols[fillers].any():
        raise MountError(f"{entry}: a machine weight touches a filler dim; cannot re-plan the fillers")
    used_mask = touched.clone()
    used_mask[fillers] = False
    used = torch.nonzero(used_mask).flatten().tolist()
    mass = emb[:, used].double().pow(2).sum(1)
    if not bool((mass == mass[0]).all()) or float(mass[0]) != int(mass[0]):
        raise MountError(f"{entry}: machine embedding rows differ in mass on their used dims")
    del emb
    norm = ck.get("model.layers.0.input_layernorm.weight")
    return MachineInfo(entry, ck, cfg, meta["compiler_version"], hm, int(cfg["num_hidden_layers"]),
                       list(cfg["layer_types"]), used, int(res["one_dim"]), fillers, int(mass[0]),
                       float(norm[used[0]]), rec["io"].get("fingerprint", ""), dict(meta.get("shape", {})))


# ---------------------------------------------------------------------------------------------
# the plan: every output tensor and how to produce it
# ---------------------------------------------------------------------------------------------
@dataclass
class Plan:
    layout: str
    H: int
    Hp: int
    V: int
    Lm: int
    Lb: int
    c: float
    mdims: list[int]  # mount dim of each machine dim in ``machine.used``
    filler_dims: list[int]
    filler_values: list[int]
    flag_dim: int
    one_dim: int
    tensors: list[OutTensor] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def default_width(H: int, need: int, hm: int) -> int:
    """``H * 4^k`` when one fits in ``[need, H + hm]`` (text logits bit-identical: c a power of two),
    else ``H + hm`` (e.g. 4096 for the 2B); never below ``need``."""
    w = H
    while w < need:
        w *= 4
    if w <= H + hm:
        return w
    return max(need, H + hm)


def _prefix(layout: str) -> str:
    return "model." if layout == "causal" else "model.language_model."


def check_layer_shape(text: dict[str, Any], mcfg) -> None:
    """The machine layers share the base's layer shape (one value per field in Qwen3.5); fields
    the machine's exactness rests on are refused at once, by name."""
    if text.get("hidden_act", "silu") != "silu":
        raise MountError(f"config.json: hidden_act = {text['hidden_act']!r} cannot host the machine "
                         "(its MLPs are exact through SiLU)")
    eps = text.get("rms_norm_eps", 1e-6)
    if not isinstance(eps, (int, float)) or not 0 <= eps < 2.0 ** -18:
        raise MountError(f"config.json: rms_norm_eps = {eps!r} cannot host the machine (every machine "
                         "RMSNorm must scale by exactly 1/8: eps must vanish against 64, i.e. < 2^-18)")
    for k in LAYER_FIELDS:
        want = getattr(mcfg, k)
        have = text.get(k, want)
        if have != want:
            raise MountError(f"config.json: {k} = {have!r} cannot host the machine (compiled for {want!r}; "
                             "the machine layers must use the base's layer shape)")
    for k in ("hidden_size", "num_hidden_layers", "vocab_size"):
        if not isinstance(text.get(k), int) or text[k] < 1:
            raise MountError(f"config.json: {k} missing or not a positive integer")


def make_plan(base: Checkpoint | None, base_config: dict[str, Any], machine: MachineInfo,
              width: int | None = None) -> Plan:
    """Every output tensor of the mount, with a producer per tensor.

    ``base=None`` (verify without the base): the embedding, final norm and head are planned without
    a producer, and the base's layers, vision tower and ``mtp.*`` are *not planned at all* (their
    names and shapes live in the base's files), so ``total_bytes`` is then not the mount's size."""
    layout, text = text_config_of(base_config)
    H, V, Lb = int(text["hidden_size"]), int(text["vocab_size"]), int(text["num_hidden_layers"])
    hm = machine.hidden
    nsq = lambda hp: 64 * hp - machine.row_mass  # noqa: E731 - the fillers' total mass
    from qwengpu.compiler.residual import MAX_FILLER, sum_of_squares

    k_est = -(-nsq(H + len(machine.used) + 24) // (MAX_FILLER * MAX_FILLER)) + 2  # fillers, at most
    Hp = default_width(H, H + len(machine.used) + k_est + 1, hm) if width is None else int(width)
    if nsq(Hp) <= 0 or Hp <= H + len(machine.used):
        raise MountError(f"--width {Hp} is too narrow: the base needs {H} dims and the machine "
                         f"{len(machine.used)} + fillers + 1 flag dim")
    fill = sum_of_squares(nsq(Hp), MAX_FILLER, max_terms=max(16, k_est + 4))
    need = H + len(machine.used) + len(fill) + 1
    if Hp < need:
        raise MountError(f"--width {Hp} is too narrow: the base needs {H} dims and the machine "
                         f"{len(machine.used)} + {len(fill)} fillers + 1 flag dim ({need} in all)")
    mdims = list(range(H, H + len(machine.used)))
    filler_dims = list(range(H + len(machine.used), H + len(machine.used) + len(fill)))
    flag = filler_dims[-1] + 1 if filler_dims else H + len(machine.used)
    one_dim = mdims[machine.used.index(machine.one_dim)]
    c = math.sqrt(Hp / H)
    plan = Plan(layout, H, Hp, V, machine.layers, Lb, c, mdims, filler_dims, list(fill), flag, one_dim)
    _add_tensors(plan, base, machine, text)
    return plan


def _f32(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float32)


def _add_tensors(plan: Plan, base: Checkpoint | None, m: MachineInfo, text: dict[str, Any]) -> None:
    P = _prefix(plan.layout)
    H, Hp, V = plan.H, plan.Hp, plan.V
    c32 = torch.tensor(plan.c, dtype=torch.float32)
    used = torch.tensor(m.used)
    mdims = torch.tensor(plan.mdims)
    out = plan.tensors
    f32 = torch.float32

    def one(fn: Callable[[], torch.Tensor]) -> Callable[[], Iterator[torch.Tensor]]:
        return lambda: iter([fn().contiguous()])

    # -- machine layers: moved into the machine dims
    for name in m.ckpt.names():
        mm = re.match(r"model\.layers\.(\d+)\.(.+)$", name)
        if not mm:
            continue
        rest = mm.group(2)
        parts = rest.split(".")
        leaf = parts[-2] if parts[-1] in ("weight", "bias") else parts[-1]
        shape = m.ckpt.shape(name)
        new = f"{P}layers.{mm.group(1)}.{rest}"

        def produce(name=name, leaf=leaf, parts=parts, shape=shape) -> torch.Tensor:
            t = _f32(m.ckpt.get(name))
            if leaf in READ and parts[-1] == "weight":
                o = torch.zeros(shape[0], Hp)
                o[:, mdims] = t[:, used]
                return o
            if leaf in WRITE:
                o = torch.zeros((Hp, *shape[1:]))
                o[mdims] = t[used]
                return o
            if leaf in NORMS:
                o = torch.full((Hp,), m.norm_fill)
                o[mdims] = t[used]
                return o
            return t

        if leaf in READ and parts[-1] == "weight":
            nshape: tuple[int, ...] = (shape[0], Hp)
        elif leaf in WRITE or leaf in NORMS:
            nshape = (Hp, *shape[1:])
        else:
            nshape = shape
        out.append(OutTensor(new, nshape, f32, one(produce), "machine"))

    # -- base layers: after the machine's, scaled by c
    btext = text
    base_names = base.names() if base is not None else None
    lb_names = _base_layer_names(base_names, P, plan.Lb, btext) if base_names is not None else None
    for i in range(plan.Lb):
        names = lb_names[i] if lb_names is not None else None
        if names is None:
            continue
        for name in names:
            rest = name[len(f"{P}layers.{i}."):]
            parts = rest.split(".")
            leaf = parts[-2] if parts[-1] in ("weight", "bias") else parts[-1]
            shape = base.shape(name)  # type: ignore[union-attr]
            new = f"{P}layers.{plan.Lm + i}.{rest}"

            def produce(name=name, leaf=leaf, parts=parts, shape=shape) -> torch.Tensor:
                t = _f32(base.get(name))  # type: ignore[union-attr]
                if leaf in READ and parts[-1] == "weight":
                    o = torch.zeros(shape[0], Hp)
                    o[:, :H] = t / c32
                    return o
                if leaf in WRITE:
                    o = torch.zeros((Hp, *shape[1:]))
                    o[:H] = t * c32
                    return o
                if leaf in NORMS:
                    o = torch.zeros(Hp)
                    o[:H] = t
                    return o
                return t

            if leaf in READ and parts[-1] == "weight":
                nshape = (shape[0], Hp)
            elif leaf in WRITE or leaf in NORMS:
                nshape = (Hp, *shape[1:])
            else:
                nshape = shape
            out.append(OutTensor(new, nshape, f32, one(produce), "base"))

    # -- embedding, final norm, lm_head: base rows then machine rows
    emb_name = f"{P}embed_tokens.weight"
    tied = bool(text.get("tie_word_embeddings", False))
    head_name = emb_name if (tied or (base is not None and "lm_head.weight" not in base.where)) \
        else "lm_head.weight"
    fdims = torch.tensor(plan.filler_dims, dtype=torch.long)
    fvals = torch.tensor(plan.filler_values, dtype=f32)

    def embed() -> Iterator[torch.Tensor]:
        for a in range(0, V, CHUNK_ROWS):
            b = min(V, a + CHUNK_ROWS)
            o = torch.zeros(b - a, Hp)
            o[:, :H] = _f32(base.rows(emb_name, a, b)) * c32  # type: ignore[union-attr]
            o[:, plan.flag_dim] = ALPHA
            yield o
        for a in range(0, MACHINE_VOCAB, CHUNK_ROWS):
            b = min(MACHINE_VOCAB, a + CHUNK_ROWS)
            o = torch.zeros(b - a, Hp)
            o[:, mdims] = _f32(m.ckpt.rows("model.embed_tokens.weight", a, b))[:, used]
            o[:, fdims] = fvals
            yield o

    def head() -> Iterator[torch.Tensor]:
        for a in range(0, V, CHUNK_ROWS):
            b = min(V, a + CHUNK_ROWS)
            o = torch.zeros(b - a, Hp)
            o[:, :H] = _f32(base.rows(head_name, a, b)) / c32  # type: ignore[union-attr]
            yield o
        for a in range(0, MACHINE_VOCAB, CHUNK_ROWS):
            b = min(MACHINE_VOCAB, a + CHUNK_ROWS)
            o = torch.zeros(b - a, Hp)
            o[:, mdims] = _f32(m.ckpt.rows("lm_head.weight", a, b))[:, used]
            o[:, plan.flag_dim] = FLAG_WEIGHT
            yield o

    def final_norm() -> torch.Tensor:
        o = torch.zeros(Hp)
        o[:H] = _f32(base.get(f"{P}norm.weight"))  # type: ignore[union-attr]
        o[mdims] = _f32(m.ckpt.get("model.norm.weight"))[used]
        o[plan.flag_dim] = FLAG_GAIN - 1.0
        return o

    have = base is not None
    Vp = V + MACHINE_VOCAB
    out.append(OutTensor(emb_name, (Vp, Hp), f32, embed if have else None, "both"))
    out.append(OutTensor(f"{P}norm.weight", (Hp,), f32, one(final_norm) if have else None, "both"))
    out.append(OutTensor("lm_head.weight", (Vp, Hp), f32, head if have else None, "both"))

    # -- everything else of the base: vision tower (merger output padded, x c), mtp.* verbatim
    if base is None:
        return
    known = {t.name for t in out} | {n for names in (lb_names or []) for n in names}
    known |= {emb_name, f"{P}norm.weight", "lm_head.weight"}
    for name in base.names():
        if name in known or name.startswith(f"{P}layers."):
            continue
        shape = base.shape(name)
        if name.startswith("model.visual.") and ".merger.linear_fc2." in name and ".deepstack" not in name:
            def produce(name=name, shape=shape) -> torch.Tensor:
                t = _f32(base.get(name))
                o = torch.zeros((Hp, *shape[1:]))
                o[:H] = t * c32
                return o
            out.append(OutTensor(name, (Hp, *shape[1:]), f32, one(produce), "base"))
        elif name.startswith("model.visual."):
            out.append(OutTensor(name, shape, f32, one(lambda name=name: _f32(base.get(name))), "base"))
        else:  # mtp.* and anything transformers ignores: byte for byte
            dt = _DT[base.info(name)["dtype"]]
            out.append(OutTensor(name, shape, dt, one(lambda name=name: base.get(name)), "copy"))


def _base_layer_names(names: list[str], P: str, Lb: int, text: dict[str, Any]) -> list[list[str]]:
    by: list[list[str]] = [[] for _ in range(Lb)]
    for n in names:
        mm = re.match(re.escape(P) + r"layers\.(\d+)\.", n)
        if mm:
            i = int(mm.group(1))
            if i >= Lb:
                raise MountError(f"tensor {n}: layer {i} beyond num_hidden_layers = {Lb}")
            by[i].append(n)
    for i, b in enumerate(by):
        if not b:
            raise MountError(f"the base has no tensors for layer {i} (num_hidden_layers = {Lb})")
    return by


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------
def _shards(tensors: list[OutTensor]) -> list[list[OutTensor]]:
    groups: list[list[OutTensor]] = [[]]
    size = 0
    for t in tensors:
        if groups[-1] and size + t.nbytes > SHARD_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(t)
        size += t.nbytes
    return groups


def mount_config(base_config: dict[str, Any], plan: Plan, machine: MachineInfo) -> dict[str, Any]:
    """The mounted config.json: the base's, with the mounted hidden, layers, vocabulary, untied,
    float32 (the vision tower's output sized to the mounted hidden)."""
    cfg = json.loads(json.dumps(base_config))
    text = cfg if plan.layout == "causal" else cfg["text_config"]
    btypes = text.get("layer_types")
    if not btypes:
        interval = int(text.get("full_attention_interval", 4))
        btypes = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(plan.Lb)]
    text.update(hidden_size=plan.Hp, num_hidden_layers=plan.Lm + plan.Lb,
                layer_types=list(machine.layer_types) + list(btypes), vocab_size=plan.V + MACHINE_VOCAB,
                tie_word_embeddings=False, dtype="float32")
    text.pop("torch_dtype", None)
    if plan.layout == "conditional":
        cfg["tie_word_embeddings"] = False
        cfg["dtype"] = "float32"
        cfg.pop("torch_dtype", None)
        if isinstance(cfg.get("vision_config"), dict):
            cfg["vision_config"]["out_hidden_size"] = plan.Hp
    return cfg


def machine_token(t: int) -> str:
    return f"<|gpu_{t:04x}|>"


def extend_tokenizer(src: Path, dst: Path, V: int) -> bool:
    """Copy the tokenizer files, adding the 65,536 machine tokens as special tokens at ids
    ``V..V+65535`` (base ids and the chat template unchanged). False if the base has no tokenizer.json."""
    tj = src / "tokenizer.json"
    if not tj.is_file():
        return False
    tok = json.loads(tj.read_text())
    added = tok.setdefault("added_tokens", [])
    top = max([a["id"] for a in added] + list(tok.get("model", {}).get("vocab", {}).values()) + [-1])
    if top >= V:
        raise MountError(f"{tj}: token id {top} is not below vocab_size {V}")
    vocab = tok.get("model", {}).get("vocab")
    if not isinstance(vocab, dict):
        raise MountError(f"{tj}: tokenizer model {tok.get('model', {}).get('type')!r} has no vocab map "
                         "(a Qwen BPE tokenizer is expected)")
    for a in added:  # the base's added tokens get explicit ids too (``tokenizers`` numbers added
        if vocab.setdefault(a["content"], a["id"]) != a["id"]:  # tokens absent from the vocab by count)
            raise MountError(f"{tj}: added token {a['content']!r} has id {a['id']} but the vocab says "
                             f"{vocab[a['content']]}")
    for t in range(MACHINE_VOCAB):
        # in the model's vocab too: ``tokenizers`` numbers added tokens after the last id it knows,
        # but keeps the id of one the model already has, so the ids land at V + t despite any gap
        vocab[machine_token(t)] = V + t
        added.append({"id": V + t, "content": machine_token(t), "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    (dst / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    tc = src / "tokenizer_config.json"
    if tc.is_file():
        conf = json.loads(tc.read_text())
        dec = conf.get("added_tokens_decoder")
        if isinstance(dec, dict):
            for t in range(MACHINE_VOCAB):
                dec[str(V + t)] = {"content": machine_token(t), "lstrip": False, "normalized": False,
                                   "rstrip": False, "single_word": False, "special": True}
        (dst / "tokenizer_config.json").write_text(json.dumps(conf, indent=1, ensure_ascii=False))
    return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 24), b""):
            h.update(b)
    return h.hexdigest()


def config_hash(cfg: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()


def build_mount(base_dir: str | Path, out_dir: str | Path, *, width: int | None = None,
                overwrite: bool = False, progress: Progress = None) -> dict[str, Any]:
    """Write the mount of the machine on ``base_dir`` into ``out_dir``; returns its sidecar record.

    Nothing half-written: everything goes into a temporary folder beside ``out_dir``, renamed at
    the end. Refused (``MountError``, a clear message) before anything is written: a missing or
    non-checkpoint base, another model type, a layer shape that cannot host the machine, a
    truncated shard or an index naming a missing file, an existing non-empty ``out_dir`` (unless
    ``overwrite``), too little free disk for the estimated output."""
    t0 = time.perf_counter()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise MountError(f"{out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise MountError(f"{out} exists and is not empty (--overwrite replaces it)")
    base = Checkpoint(base_dir)
    if out.resolve() == base.path.resolve():
        raise MountError("--out must not be the base folder")
    layout, text = text_config_of(base.config)
    from qwengpu.model.machine_checkpoint import compiler_version

    mcfg = machine_config_for(text)
    check_layer_shape(text, mcfg)
    P = _prefix(layout)
    for need in (f"{P}embed_tokens.weight", f"{P}norm.weight"):
        if need not in base.where:
            raise MountError(f"{base.path}: tensor {need} is missing (layout {layout})")
    emb_shape = base.shape(f"{P}embed_tokens.weight")
    if emb_shape != (text["vocab_size"], text["hidden_size"]):
        raise MountError(f"{base.path}: {P}embed_tokens.weight has shape {list(emb_shape)}, config says "
                         f"vocab_size {text['vocab_size']} x hidden_size {text['hidden_size']}")
    if not text.get("tie_word_embeddings", False) and "lm_head.weight" not in base.where:
        raise MountError(f"{base.path}: untied config (tie_word_embeddings false) but no lm_head.weight")
    _note(progress, "reading the machine")
    machine = inspect_machine(machine_entry(mcfg, progress))
    version = compiler_version(mcfg)
    if machine.compiler_version != version:  # pragma: no cover - machine_entry builds the current one
        raise MountError(f"machine cache entry {machine.path} is version {machine.compiler_version}")
    plan = make_plan(base, base.config, machine, width)
    total = plan.total_bytes
    out.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(out.parent).free
    if free < total * 1.02 + (64 << 20):
        raise MountError(f"not enough free disk in {out.parent}: the mount needs about {total / 1e9:.2f} GB, "
                         f"{free / 1e9:.2f} GB are free")
    tmp = out.parent / f".{out.name}.build-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        groups = _shards(plan.tensors)
        n = len(groups)
        sums: dict[str, str] = {}
        wmap: dict[str, str] = {}
        for i, g in enumerate(groups, 1):
            fn = f"model-{i:05d}-of-{n:05d}.safetensors"
            _note(progress, f"writing {fn} ({sum(t.nbytes for t in g) / 1e9:.2f} GB, {len(g)} tensors)")
            sums.update(_ShardWriter(tmp / fn, g).write_all())
            wmap.update({t.name: fn for t in g})
        (tmp / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": total}, "weight_map": wmap}, indent=1))
        cfg = mount_config(base.config, plan, machine)
        (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
        for p in base.path.iterdir():
            if p.is_file() and p.name not in WEIGHT_FILES and not p.name.endswith(".safetensors") \
                    and p.name not in ("tokenizer.json", "tokenizer_config.json", MOUNT_SIDECAR) \
                    and not p.name.endswith((".bin", ".pt", ".pth", ".pkl")):
                shutil.copy2(p, tmp / p.name)
        has_tok = extend_tokenizer(base.path, tmp, plan.V)
        if not has_tok and (base.path / "tokenizer_config.json").is_file():
            shutil.copy2(base.path / "tokenizer_config.json", tmp / "tokenizer_config.json")
        record = {
            "format": MOUNT_FORMAT, "compiler_version": version, "machine_fingerprint": machine.fingerprint,
            "machine_shape": machine.shape, "layout": layout, "base_config_sha256": config_hash(base.config),
            "hidden": plan.H, "mounted_hidden": plan.Hp, "c": plan.c, "machine_hidden": machine.hidden,
            "layers": {"machine": [0, plan.Lm], "base": [plan.Lm, plan.Lm + plan.Lb]},
            "token_offset": plan.V, "machine_vocab": MACHINE_VOCAB, "base_vocab": plan.V,
            "dims": {"base": [0, plan.H], "machine_from": machine.used, "machine_to": plan.mdims,
                     "fillers": plan.filler_dims, "filler_values": plan.filler_values,
                     "flag": plan.flag_dim, "one_dim": plan.one_dim},
            "flag": {"alpha": ALPHA, "final_norm_gain": FLAG_GAIN, "machine_head_weight": FLAG_WEIGHT},
            "tokenizer_extended": has_tok,
            "tensors": sums, "tensor_origin": {t.name: t.origin for t in plan.tensors},
            "total_bytes": total, "build_seconds": round(time.perf_counter() - t0, 3),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        side = tmp / MOUNT_SIDECAR
        side.write_text(json.dumps(record, indent=1))
        _fsync_dir(tmp)
        if out.exists():
            if any(out.iterdir()) and not overwrite:
                raise MountError(f"{out} exists and is not empty (--overwrite replaces it)")
            old = out.parent / f".{out.name}.old-{uuid.uuid4().hex}"
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
        _fsync_dir(out.parent)
    except OSError as e:
        raise MountError(f"cannot write the mount to {out}: {e.strerror or e}") from None
    finally:
        base.close()
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    record["seconds"] = round(time.perf_counter() - t0, 3)
    return record


def read_mount_sidecar(path: str | Path) -> dict[str, Any]:
    side = Path(path) / MOUNT_SIDECAR
    try:
        rec = json.loads(side.read_text())
    except (OSError, ValueError) as e:
        raise MountError(f"{side}: missing or unreadable: not a qwengpu mount ({e})") from None
    if isinstance(rec, dict) and rec.get("format") == "qwengpu-lean/1":  # qwengpu.model.lean.LEAN_FORMAT
        raise MountError(f"{path} is a lean mount (the default build: the base's files + the machine "
                         f"sparse); this reads the stock single checkpoint ({MOUNT_FORMAT}, qwengpu build "
                         "--stock)")
    if not isinstance(rec, dict) or rec.get("format") != MOUNT_FORMAT:
        raise MountError(f"{side}: not a {MOUNT_FORMAT} record")
    return rec


def peak_rss_bytes() -> int:
    """This process's peak resident memory (``ru_maxrss`` is in KiB on Linux)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


__all__ = ["build_mount", "read_mount_sidecar", "MountError", "make_plan", "inspect_machine",
           "Checkpoint", "machine_config_for", "machine_entry"]


# ---------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------
def cmd_build(args) -> int:
    """``qwengpu build --stock``: the stock single float32 checkpoint (the default, the lean mount,
    is :func:`qwengpu.model.lean.cmd_build_lean`)."""
    import sys

    t0 = time.perf_counter()

    def note(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:6.1f} s] {msg}", file=sys.stderr, flush=True)

    rec = build_mount(args.base, args.out, width=args.width, overwrite=args.overwrite, progress=note)
    info = {k: rec[k] for k in ("layout", "hidden", "mounted_hidden", "c", "layers", "token_offset",
                                "compiler_version", "total_bytes", "seconds")}
    info["path"] = str(args.out)
    info["peak_rss_bytes"] = peak_rss_bytes()
    if args.json:
        print(json.dumps(info))
    else:
        lm, lb = rec["layers"]["machine"][1], rec["layers"]["base"][1] - rec["layers"]["base"][0]
        print(f"wrote {args.out}: {lm} machine layers + {lb} base layers, hidden {rec['hidden']} -> "
              f"{rec['mounted_hidden']} (c = {rec['c']:.6g}), vocabulary {rec['token_offset']:,} + "
              f"{MACHINE_VOCAB:,}, {rec['total_bytes'] / 1e9:.2f} GB float32, in {rec['seconds']:.1f} s "
              f"(peak memory {info['peak_rss_bytes'] / 2**30:.2f} GiB)")
        print("load it with transformers.AutoModelForCausalLM.from_pretrained(OUT) (no custom code); "
              "launches: qwengpu run K.cu --engine model --model OUT")
    return 0
