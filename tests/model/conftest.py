"""Fixtures of the model tests: the standalone vadd launch, the stock mount, damaged copies (the small
synthetic base and its mount are session fixtures of ``tests/conftest.py``, shared with the host tests)."""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

import pytest
import torch

KERNELS = Path(__file__).resolve().parent.parent / "machine_weights" / "kernels"


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
