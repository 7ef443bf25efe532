"""How much memory loading a mount needs, and whether it fits, before anything is loaded.

Why: a float32 mount of Qwen3.5-2B is tens of GB; loading it into a machine that cannot hold it
ends in the kernel's OOM killer (no message) or in swap for an hour. The estimate comes from the
safetensors headers alone; the free memory from ``/proc/meminfo`` (``MemAvailable``), from
``os.sysconf`` where there is no ``/proc``, and from ``torch.cuda.mem_get_info`` for CUDA.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from qwengpu.errors import ExitCode, QwenGPUError

OVERHEAD = 1 << 30  # Python, torch, transformers and the activations of one forward (about)
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


class MemoryLimitError(QwenGPUError):
    """The load would not fit; the message carries the estimate and what is free."""

    exit_code = ExitCode.MEMORY


def available_bytes(device: str = "cpu") -> int:
    """Memory free for a new load on ``device`` (``mps`` shares the system memory)."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise QwenGPUError("--device cuda: no CUDA device is available")
        free, _ = torch.cuda.mem_get_info()
        return int(free)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - no way to know: assume it fits
        return 1 << 62


def checkpoint_numel(path: str | Path) -> dict[str, int]:
    """Parameters of a checkpoint by role, from its headers: ``total``, ``machine_layers``, the
    ``largest`` layer tensor, and (for a mount) the machine's dims and the mounted hidden."""
    from qwengpu.model.mount import Checkpoint, read_mount_sidecar

    ck = Checkpoint(path)
    total = largest = machine = 0
    try:
        rec = read_mount_sidecar(path)
        lm = int(rec["layers"]["machine"][1])
        pre = "model.language_model." if ck.config.get("model_type") == "qwen3_5" else "model."
    except QwenGPUError:
        rec, lm, pre = None, 0, "model."
    for name in ck.names():
        n = math.prod(ck.shape(name))
        total += n
        if name.startswith(f"{pre}layers."):  # (embedding and head are read in row chunks)
            largest = max(largest, n)
            if int(name[len(f"{pre}layers."):].split(".")[0]) < lm:
                machine += n
    return {"total": total, "machine_layers": machine, "largest": largest,
            "machine_dims": len(rec["dims"]["machine_to"]) + len(rec["dims"]["fillers"]) if rec else 0,
            "mounted_hidden": int(rec["mounted_hidden"]) if rec else 0}


def estimate_bytes(path: str | Path, runtime: str = "stock", dtype: str = "float32") -> int:
    """Bytes a load needs: ``stock`` every parameter in ``dtype`` plus overhead; ``fast`` the
    machine layers gathered one at a time on the machine dims (the largest layer tensor, twice)
    plus the machine's embedding and head rows on those dims, plus the kept sparse maps (bounded
    by the machine layers on those dims) and overhead."""
    if dtype not in DTYPE_BYTES:
        raise QwenGPUError(f"unknown dtype {dtype!r} (float32, bfloat16, float16)")
    n = checkpoint_numel(path)
    if runtime == "stock":
        return n["total"] * DTYPE_BYTES[dtype] + OVERHEAD
    frac = n["machine_dims"] / max(1, n["mounted_hidden"])
    rows = 2 * (1 << 16) * n["machine_dims"] * 4
    return int(2 * n["largest"] * 4 + rows + 0.25 * n["machine_layers"] * frac * 4 + OVERHEAD)


def check_fits(path: str | Path, runtime: str = "stock", device: str = "cpu", dtype: str = "float32") -> int:
    """Raise :class:`MemoryLimitError` with the numbers when the load will not fit; else the estimate."""
    need = estimate_bytes(path, runtime, dtype)
    free = available_bytes("cpu" if runtime == "fast" else device)
    if need > free:
        raise MemoryLimitError(
            f"loading {path} ({runtime} runtime, {dtype}, {device}) needs about {need / 2**30:.1f} GiB; "
            f"{free / 2**30:.1f} GiB are available"
            + ("; the fast runtime (--runtime fast) needs far less" if runtime == "stock" else ""))
    return need
