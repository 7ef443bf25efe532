"""Safetensors files written tensor by tensor, chunk by chunk: the header first (every shape is
known before any data), then each tensor's bytes as its producer yields them, hashed on the way.

Why: a 2B mount (~39 GB) and the 2B-shape machine (~9 GB) are float32 checkpoints larger than what
a build should hold in memory; both stream through :class:`ShardWriter` (the mount's shards,
``qwengpu.model.mount``; the machine's cache entry, ``qwengpu.model.machine_checkpoint``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from qwengpu.errors import CheckpointError

DT = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "F64": torch.float64,
      "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "I8": torch.int8, "BOOL": torch.bool}
DT_NAME = {v: k for k, v in DT.items()}
Progress = Callable[[str], None] | None


@dataclass
class OutTensor:
    """One tensor of a file being written: its name, shape, dtype, and how to produce its bytes."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    produce: Callable[[], Iterator[torch.Tensor]] | None  # None: the source is not at hand (verify)
    origin: str  # "machine", "base", "both" (embedding / lm_head / final norm), "copy"

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * torch.empty((), dtype=self.dtype).element_size()


class ShardWriter:
    """One safetensors file written tensor by tensor and chunk by chunk (header first: every
    shape is known), hashing each tensor's bytes on the way."""

    def __init__(self, path: Path, tensors: list[OutTensor]) -> None:
        header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
        off = 0
        for t in tensors:
            header[t.name] = {"dtype": DT_NAME[t.dtype], "shape": list(t.shape),
                              "data_offsets": [off, off + t.nbytes]}
            off += t.nbytes
        hb = json.dumps(header, separators=(",", ":")).encode()
        hb += b" " * (-len(hb) % 8)
        self.path, self.tensors = path, tensors
        self.f = open(path, "wb")
        self.f.write(struct.pack("<Q", len(hb)))
        self.f.write(hb)

    def write_all(self, progress: Progress = None) -> dict[str, str]:
        """Write every tensor; returns name -> sha256 of its bytes."""
        sums = {}
        try:
            for t in self.tensors:
                assert t.produce is not None
                h = hashlib.sha256()
                n = 0
                for chunk in t.produce():
                    if chunk.dtype != t.dtype:
                        raise CheckpointError(f"internal: {t.name} produced {chunk.dtype}, planned {t.dtype}")
                    b = tensor_bytes(chunk)
                    h.update(b)
                    self.f.write(b)
                    n += len(b)
                if n != t.nbytes:
                    raise CheckpointError(f"internal: {t.name} produced {n} bytes, planned {t.nbytes}")
                sums[t.name] = h.hexdigest()
            self.f.flush()
            os.fsync(self.f.fileno())
        finally:
            self.f.close()
        return sums


def tensor_bytes(t: torch.Tensor) -> memoryview:
    """The tensor's little-endian bytes without a copy (bf16 through an int16 view)."""
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return memoryview(t.numpy()).cast("B")


def tensor_sha(t: torch.Tensor) -> str:
    return hashlib.sha256(tensor_bytes(t)).hexdigest()
