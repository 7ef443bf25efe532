#!/usr/bin/env python3
"""Compare two machine checkpoints bit for bit: DIR_A DIR_B -> exit 0 when identical, 1 otherwise.

Why: a refactor of the compiler or of ``machine/circuit.py`` changes the cache key (the sources are
hashed) but must not change a single weight. This compares every tensor of ``model.safetensors``
(names, shapes, dtypes, exact values; one tensor at a time to keep memory low) and the layout
report ``qwengpu_circuit.json`` (less its file hashes) when both folders have it, and names
whatever differs.

usage: OMP_NUM_THREADS=1 python tools/compare_machine_weights.py DIR_A DIR_B
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

WEIGHTS = "model.safetensors"
LAYOUT = "qwengpu_circuit.json"


def _raw(t):
    """The tensor's bytes (bit for bit: -0.0 is not 0.0, a NaN equals the same NaN)."""
    import torch

    return t.contiguous().reshape(-1).view(torch.uint8)


def compare(a: Path, b: Path) -> list[str]:
    """The differences between checkpoint folders ``a`` and ``b`` (empty when bit-identical)."""
    import torch
    from safetensors import safe_open

    diffs: list[str] = []
    with safe_open(str(a / WEIGHTS), framework="pt") as fa, safe_open(str(b / WEIGHTS), framework="pt") as fb:
        ka, kb = set(fa.keys()), set(fb.keys())
        diffs += [f"only in {a.name}: {k}" for k in sorted(ka - kb)]
        diffs += [f"only in {b.name}: {k}" for k in sorted(kb - ka)]
        n = 0
        for k in sorted(ka & kb):
            ta, tb = fa.get_tensor(k), fb.get_tensor(k)
            if ta.dtype != tb.dtype or ta.shape != tb.shape:
                diffs.append(f"{k}: {ta.dtype} {tuple(ta.shape)} vs {tb.dtype} {tuple(tb.shape)}")
            elif not torch.equal(_raw(ta), _raw(tb)):
                diffs.append(f"{k}: values differ")
            n += 1
            del ta, tb
    print(f"{n} tensors compared")
    la, lb = a / LAYOUT, b / LAYOUT
    if la.exists() and lb.exists():
        # its "files" hashes are of the containers (tensor order, header), not of the weights
        ra, rb = ({k: v for k, v in json.loads(p.read_text()).items() if k != "files"} for p in (la, lb))
        if ra != rb:
            diffs.append(f"{LAYOUT} differs")
        else:
            print(f"{LAYOUT} identical")
    elif la.exists() != lb.exists():
        diffs.append(f"{LAYOUT} present in only one folder")
    return diffs


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    diffs = compare(Path(argv[0]), Path(argv[1]))
    for d in diffs:
        print(d)
    print("identical" if not diffs else f"{len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
