"""Writes turns_*.json: the launches of turns.cu with their expected values from Python (each
kernel's meaning, step by step; never from the interpreter). ``python turns_specs.py`` rewrites
them (seeded: the same files)."""

import json
from pathlib import Path

import numpy as np

K = Path(__file__).resolve().parent
rng = np.random.default_rng(26)


def w(name: str, d: dict) -> None:
    (K / f"turns_{name}.json").write_text(json.dumps(d) + "\n")


# tree sum: 2 blocks of 256 threads over 700 ints; 1 block of 128 threads over 300
for name, T, G, N in [("tree256", 256, 2, 700), ("tree128", 128, 1, 300), ("tree96", 96, 1, 200)]:
    x = rng.integers(-5000, 5000, N)
    out = []
    for b in range(G):
        s = [int(sum(x[i] for i in range(b * T + t, N, T * G))) for t in range(T)]
        k = T // 2
        while k > 0:  # the kernel's tree, step by step (96 threads: 48, 24, 12, 6, 3, 1)
            s = [s[t] + s[t + k] if t < k else s[t] for t in range(T)]
            k >>= 1
        out.append(s[0])
    w(name, {"kernel": "tree_sum", "grid": G, "block": T, "args": [
        {"name": "in", "type": "i32*", "data": x.tolist()}, {"name": "n", "type": "i32", "value": N},
        {"name": "out", "type": "i32*", "size": G}], "outputs": ["out"], "expected": {"out": out}})
# transpose 32 x 24 in 16 x 16 blocks
W, H = 32, 24
a = rng.standard_normal((H, W)).astype(np.float32)
w("transpose", {"kernel": "tile_transpose", "grid": [2, 2, 1], "block": [16, 16, 1], "args": [
    {"name": "in", "type": "f32*", "data": a.reshape(-1).tolist()},
    {"name": "out", "type": "f32*", "size": W * H},
    {"name": "w", "type": "i32", "value": W}, {"name": "h", "type": "i32", "value": H}],
    "outputs": ["out"], "expected": {"out": a.T.reshape(-1).tolist()}})
# warp sums: 2 blocks of 192 threads (6 warps: machine 32 threads, 6 turns)
T, G = 192, 2
x = rng.integers(-1000, 1000, T * G)
w("warpsum", {"kernel": "warp_sum", "grid": G, "block": T, "args": [
    {"name": "in", "type": "i32*", "data": x.tolist()}, {"name": "out", "type": "i32*", "size": G}],
    "outputs": ["out"], "expected": {"out": [int(x[b * T:(b + 1) * T].sum()) for b in range(G)]}})
# tickets: 128 threads, 100 stay
T, n = 128, 100
w("tickets", {"kernel": "tickets", "grid": 1, "block": T, "args": [
    {"name": "n", "type": "i32", "value": n},
    {"name": "ticket", "type": "i32*", "size": n}, {"name": "total", "type": "i32*", "size": n},
    {"name": "count", "type": "i32*", "size": 1}, {"name": "local_out", "type": "i32*", "size": n}],
    "outputs": ["ticket", "total", "count", "local_out"],
    "expected": {"total": [n * (n + 1) // 2] * n, "count": [n // 2],
                 "local_out": [t * ((t & 3) + 1) for t in range(n)]}})
# reverse: 128 threads, one barrier
x = rng.integers(-100000, 100000, 128)
w("reverse", {"kernel": "reverse", "grid": 1, "block": 128, "args": [
    {"name": "in", "type": "i32*", "data": x.tolist()}, {"name": "out", "type": "i32*", "size": 128}],
    "outputs": ["out"], "expected": {"out": [int(x[127 - t]) * 3 + t for t in range(128)]}})
