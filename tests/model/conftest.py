"""Shared fixtures of the model tests: a small synthetic Qwen3.5 base and its mount, built once per
session (the mount holds the whole machine: ~5.5 GB on disk, about two minutes to write)."""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

import pytest
import torch

KERNELS = Path(__file__).resolve().parent.parent / "machine_weights" / "kernels"


@pytest.fixture(scope="session")
def small_base(tmp_path_factory) -> Path:
    """A text-only Qwen3.5 base (bf16 on disk, tied, sharded) on the machine's test layer shape,
    hidden 128: the default mounted width is then 2048 = 16 H (c = 4, a power of two)."""
    from qwengpu.model.synthetic import make_synthetic_base

    out = tmp_path_factory.mktemp("bases") / "base128"
    return make_synthetic_base(out, hidden=128, vocab=1024, layers=2, dtype="bfloat16", tied=True)


@pytest.fixture(scope="session")
def small_mount(small_base, tmp_path_factory) -> Path:
    """``qwengpu build`` of :func:`small_base` (default width); removed at the end of the session."""
    from qwengpu.model.mount import build_mount

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    out = tmp_path_factory.mktemp("mounts") / "m128"
    build_mount(small_base, out)
    yield out
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="session")
def mounted_fast(small_mount):
    """The mount loaded once with our runtime (load-time checks included)."""
    from qwengpu.runtime.mounted import MountedModel

    return MountedModel.load(small_mount)


@pytest.fixture(scope="session")
def standalone_vadd():
    """The standalone machine's vadd launch (prompt, trace, outputs), run in a child process so its
    ~5 GB model is gone before the mount's tests load theirs."""
    import json
    import subprocess
    import sys
    from types import SimpleNamespace

    code = (
        "import json, sys, torch; torch.set_num_threads(1)\n"
        "from qwengpu.runtime.engine import run_machine\n"
        f"r = run_machine({str(KERNELS / 'vadd.cu')!r})\n"
        "out = [int(x) for x in r.outputs['out']]\n"
        "json.dump({'prompt': r.prompt, 'trace': r.trace, 'out': out}, sys.stdout)"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return SimpleNamespace(**json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def stock_mount(small_mount):
    """The whole mount through stock ``AutoModelForCausalLM.from_pretrained`` (float32)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(small_mount), dtype=torch.float32).eval()
    yield model
    del model
    gc.collect()


@pytest.fixture
def damaged_copy():
    """:func:`make_damaged_copy`."""
    return make_damaged_copy


def make_damaged_copy(src: Path, dst: Path, tensor: str, element: int = 0) -> Path:
    """A copy of a mount (symlinks; the one shard holding ``tensor`` copied) with the sign bit of
    ``tensor``'s ``element``-th non-zero value flipped on disk."""
    import json
    import struct

    import numpy as np

    dst.mkdir(parents=True)
    index = json.loads((src / "model.safetensors.index.json").read_text())
    shard = index["weight_map"][tensor]
    for p in src.iterdir():
        if p.name == shard:
            shutil.copy2(p, dst / p.name)
        else:
            os.symlink(p, dst / p.name)
    with open(dst / shard, "r+b") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        lo, hi = header[tensor]["data_offsets"]
        f.seek(8 + n + lo)
        vals = np.frombuffer(f.read(hi - lo), dtype="<u4")
        at = int(np.flatnonzero(vals & 0x7FFFFFFF)[element])
        f.seek(8 + n + lo + 4 * at)
        f.write(struct.pack("<I", int(vals[at]) ^ 0x80000000))
    return dst
