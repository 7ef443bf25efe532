"""What the global-memory layout costs each launch: arena words, free words left, words dumped.

    python bench/arena_layout.py [--dir kernels] [--dir kernels/external] [--shape 2b|test] [--json]

The machine in the weights holds the launch's buffers (and module variables) in its 1,024 words of
global memory, below its own regions (shared, local, spills, warp scratch), and reads the outputs
back as one range of words. Version 1 aligned every buffer to 256 bytes with a 256-byte guard
(a 128-word slot per small buffer) in argument order; the layout now is 16-byte aligned with a
16-byte guard, outputs first. Run this in two trees (or at two commits) to compare: every figure
is measured on each launch as ``qwengpu run`` prepares it (``engine.prepare``), no model is run;
seconds per kernel (the CUDA compile and the lowering).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def measure(kdir: Path, shape_name: str) -> dict:
    """Per kernel: arena words (buffers and module variables, guards included), the first word of
    the machine's own regions, words dumped, prompt tokens; refusals with their first line."""
    from types import SimpleNamespace

    from qwengpu.codegen.softmem import buffers_end
    from qwengpu.errors import QwenGPUError
    from qwengpu.model.configs import shape_for
    from qwengpu.runtime.engine import machine_config, prepare
    from qwengpu.simt.memory import GLOBAL_BASE

    shape = shape_for(machine_config(shape_name))
    name = str(kdir.relative_to(ROOT)) if kdir.is_relative_to(ROOT) else str(kdir)
    out: dict = {"dir": name, "gmem_words": shape.gmem_words, "kernels": {}, "refused": {}}
    for cu in sorted(kdir.glob("*.cu")):
        if not cu.with_suffix(".json").exists():
            continue
        try:
            _, _, prompt, gmem, (lo, hi) = prepare(cu, shape=shape)
        except QwenGPUError as e:
            out["refused"][cu.stem] = str(e).splitlines()[0]
            continue
        own = [b for b in gmem.buffers if b.name != "(machine regions)"]
        regions = [b for b in gmem.buffers if b.name == "(machine regions)"]
        arena = buffers_end(SimpleNamespace(buffers=own))  # the launch's, not the machine's regions
        bottom = (regions[0].start - GLOBAL_BASE) // 4 if regions else shape.gmem_words
        out["kernels"][cu.stem] = {"buffers": len(own), "arena_words": arena, "free_words": bottom - arena,
                                   "dump_words": hi - lo, "prompt_tokens": len(prompt)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", action="append", help="kernel folders (default: kernels, kernels/external)")
    ap.add_argument("--shape", choices=["2b", "test"], default="2b")
    ap.add_argument("--json", action="store_true", help="one JSON object per folder, every kernel")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = [measure(ROOT / d, args.shape) for d in (args.dir or ["kernels", "kernels/external"])]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'folder':<18} {'launches':>8} {'refused':>7} {'arena words':>11} {'min free':>8} "
          f"{'dump words':>10} {'prompt tokens':>13}")
    for r in rows:
        ks = r["kernels"].values()
        print(f"{r['dir']:<18} {len(r['kernels']):>8} {len(r['refused']):>7} "
              f"{sum(k['arena_words'] for k in ks):>11,} {min((k['free_words'] for k in ks), default=0):>8,} "
              f"{sum(k['dump_words'] for k in ks):>10,} {sum(k['prompt_tokens'] for k in ks):>13,}")
        for k, why in r["refused"].items():
            print(f"  refused {k}: {why}")
    print(f"({time.perf_counter() - t0:.0f} s; sums over the launches that fit)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
