"""Write every example's launch spec (NAME.json) with inputs and the expected outputs computed here,
in NumPy, independently of qwenGPU's interpreter and machine (``python examples/make_expected.py``).

Float inputs are small multiples of 1/4, so every product and sum is exact in float32: the
expected values do not depend on whether the compiler fuses a*x+y into one fma."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def saxpy(rng: np.random.Generator) -> dict:
    n, a = 100, 2.5
    x = (rng.integers(-64, 64, 128) / 4).astype(np.float32)
    y = (rng.integers(-64, 64, 128) / 4).astype(np.float32)
    exp = y.copy()
    exp[:n] = np.float32(a) * x[:n] + y[:n]
    return {"description": "y = a*x + y over n floats on 2 blocks of 64 threads (the last 28 untouched)",
            "kernel": "saxpy", "grid": 2, "block": 64,
            "args": [{"name": "n", "type": "i32", "value": n}, {"name": "a", "type": "f32", "value": a},
                     {"name": "x", "type": "f32*", "data": x.tolist()},
                     {"name": "y", "type": "f32*", "data": y.tolist()}],
            "outputs": ["y"], "expected": {"y": exp.tolist()}}


def block_sum(rng: np.random.Generator) -> dict:
    blocks = 3
    v = rng.integers(-1000, 1000, 64 * blocks).astype(np.int32)
    return {"description": "per-block sums of 64 ints: a shared-memory tree reduction with __syncthreads",
            "kernel": "block_sum", "grid": blocks, "block": 64,
            "args": [{"name": "in", "type": "i32*", "data": v.tolist()},
                     {"name": "out", "type": "i32*", "size": blocks}],
            "outputs": ["out"], "expected": {"out": v.reshape(blocks, 64).sum(axis=1).tolist()}}


def warp_scan(rng: np.random.Generator) -> dict:
    v = rng.integers(-50, 50, 64).astype(np.int32)
    return {"description": "inclusive prefix sums within each 32-lane warp via __shfl_up_sync",
            "kernel": "warp_scan", "grid": 1, "block": 64,
            "args": [{"name": "in", "type": "i32*", "data": v.tolist()},
                     {"name": "out", "type": "i32*", "size": 64}],
            "outputs": ["out"], "expected": {"out": np.cumsum(v.reshape(2, 32), axis=1).ravel().tolist()}}


def stencil2d(rng: np.random.Generator) -> dict:
    w, h = 12, 10
    g = rng.integers(0, 100, (h, w)).astype(np.int32)
    p = np.pad(g, 1, mode="edge")
    lap = p[1:-1, :-2] + p[1:-1, 2:] + p[:-2, 1:-1] + p[2:, 1:-1] - 4 * g
    return {"description": "5-point Laplacian of a 12x10 grid, edges clamped, 2 blocks of 64 threads",
            "kernel": "stencil2d", "grid": 2, "block": 64,
            "args": [{"name": "in", "type": "i32*", "data": g.ravel().tolist()},
                     {"name": "out", "type": "i32*", "size": w * h},
                     {"name": "w", "type": "i32", "value": w}, {"name": "h", "type": "i32", "value": h}],
            "outputs": ["out"], "expected": {"out": lap.ravel().tolist()}}


def histogram(rng: np.random.Generator) -> dict:
    n = 200
    d = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    bins = np.bincount(d & 15, minlength=16).astype(np.uint32)
    return {"description": "16-bin histogram of 200 values with atomicAdd, grid-stride loop on 2x32 threads",
            "kernel": "histogram", "grid": 2, "block": 32,
            "args": [{"name": "data", "type": "u32*", "data": d.tolist()},
                     {"name": "bins", "type": "u32*", "size": 16},
                     {"name": "n", "type": "i32", "value": n}],
            "outputs": ["bins"], "expected": {"bins": bins.tolist()}}


EXAMPLES = {f.__name__: f for f in (saxpy, block_sum, warp_scan, stencil2d, histogram)}


def specs() -> dict[str, dict]:
    """Every example's spec, from a fixed seed per example (the same JSON on every run)."""
    return {name: f(np.random.default_rng(2026 + i)) for i, (name, f) in enumerate(EXAMPLES.items())}


def main(out: Path = HERE) -> None:
    for name, spec in specs().items():
        (out / f"{name}.json").write_text(json.dumps(spec, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
