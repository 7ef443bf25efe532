"""Rodinia kernels (yuhc/gpu-rodinia): expected outputs from each kernel's meaning."""

from __future__ import annotations

import numpy as np
from corpus import f32 as F
from corpus.ints import Rng
from corpus.spec import Launch, Registry, buf, val

from .common import dyadic_floats

kernel = Registry()


def _graph(r: Rng, n: int) -> tuple[list[int], list[int]]:
    """A random directed graph as Rodinia's (starting, no_of_edges) node array and edge list."""
    nodes, edges = [], []
    for _v in range(n):
        deg = r.int(0, 4)
        nodes += [len(edges), deg]
        edges += [r.int(0, n - 1) for _ in range(deg)]
    return nodes, edges


@kernel
def bfs_kernel() -> Launch:
    r = Rng(2001)
    n = 24
    nodes, edges = _graph(r, n)
    mask = [0] * n
    visited = [0] * n
    cost = [-1] * n
    for src in (0, 5):  # this level's frontier
        mask[src] = visited[src] = 1
        cost[src] = 2 if src == 0 else 3
    visited[edges[nodes[0]]] = 1 if nodes[1] else 0  # one neighbour already visited
    updating = [0] * n
    new_mask, new_cost = list(mask), list(cost)
    for tid in range(n):
        if mask[tid]:
            new_mask[tid] = 0
            for i in range(nodes[2 * tid], nodes[2 * tid] + nodes[2 * tid + 1]):
                nid = edges[i]
                if not visited[nid]:
                    new_cost[nid] = cost[tid] + 1
                    updating[nid] = 1
    # two frontier nodes reaching one node would race; the graph is checked for that here
    reached = [
        edges[i]
        for t in (0, 5)
        for i in range(nodes[2 * t], nodes[2 * t] + nodes[2 * t + 1])
        if not visited[edges[i]]
    ]
    targets0 = {edges[i] for i in range(nodes[0], nodes[0] + nodes[1])}
    targets5 = {edges[i] for i in range(nodes[10], nodes[10] + nodes[11])}
    assert not ({x for x in reached} & targets0 & targets5), "ambiguous: both frontier nodes reach a node"
    return Launch(
        "bfs_kernel1",
        2,
        [16, 1, 1],
        [
            buf("g_graph_nodes", "i32", nodes),
            buf("g_graph_edges", "i32", edges),
            buf("g_graph_mask", "u8", mask),
            buf("g_updating_graph_mask", "u8", [0] * n),
            buf("g_graph_visited", "u8", visited),
            buf("g_cost", "i32", cost),
            val("no_of_nodes", "i32", n),
        ],
        ["g_graph_mask", "g_updating_graph_mask", "g_cost"],
        {"g_graph_mask": new_mask, "g_updating_graph_mask": updating, "g_cost": new_cost},
        description="one BFS level: frontier nodes relax their unvisited neighbours (24 nodes)",
    )


@kernel
def bfs_kernel2() -> Launch:
    r = Rng(2002)
    n = 24
    mask = r.ints(n, 0, 1)
    updating = r.ints(n, 0, 1)
    visited = r.ints(n, 0, 1)
    new_mask = [1 if updating[i] else mask[i] for i in range(n)]
    new_visited = [1 if updating[i] else visited[i] for i in range(n)]
    return Launch(
        "bfs_kernel2",
        2,
        [16, 1, 1],
        [
            buf("g_graph_mask", "u8", mask),
            buf("g_updating_graph_mask", "u8", updating),
            buf("g_graph_visited", "u8", visited),
            buf("g_over", "u8", [0]),
            val("no_of_nodes", "i32", n),
        ],
        ["g_graph_mask", "g_updating_graph_mask", "g_graph_visited", "g_over"],
        {
            "g_graph_mask": new_mask,
            "g_updating_graph_mask": [0] * n,
            "g_graph_visited": new_visited,
            "g_over": [1 if any(updating) else 0],
        },
        description="BFS frontier update: updating nodes join the mask and the visited set, g_over set",
    )


def _gauss_matrix(r: Rng, size: int) -> list[np.float32]:
    a = r.floats(size * size, -4, 4)
    for i in range(size):
        a[i * size + i] = F.add(a[i * size + i], np.float32(10.0))  # diagonally dominant
    return a


@kernel
def gaussian_fan1() -> Launch:
    r = Rng(2003)
    size, t = 6, 1
    a = _gauss_matrix(r, size)
    m = [np.float32(0.0)] * (size * size)
    for x in range(size - 1 - t):
        row = x + t + 1
        m[size * row + t] = F.div(a[size * row + t], a[size * t + t])
    return Launch(
        "Fan1",
        1,
        [8, 1, 1],
        [
            buf("m_cuda", "f32", [0] * (size * size)),
            buf("a_cuda", "f32", a),
            val("Size", "i32", size),
            val("t", "i32", t),
        ],
        ["m_cuda"],
        {"m_cuda": m},
        description="Gaussian elimination multipliers m[row][t] = a[row][t] / a[t][t] below the pivot",
    )


@kernel
def gaussian_fan2() -> Launch:
    r = Rng(2004)
    size, t = 6, 1
    a = _gauss_matrix(r, size)
    b = r.floats(size, -10, 10)
    m = r.floats(size * size, -1, 1)
    a2, b2 = list(a), list(b)
    for x in range(size - 1 - t):
        for y in range(size - t):
            # a[...] -= m * a[t][...]: mul.f32 then sub.f32 in the PTX (no fma contraction here)
            a2[size * (x + 1 + t) + (y + t)] = F.sub(
                a[size * (x + 1 + t) + (y + t)], F.mul(m[size * (x + 1 + t) + t], a[size * t + (y + t)])
            )
            if y == 0:
                b2[x + 1 + t] = F.sub(b[x + 1 + t], F.mul(m[size * (x + 1 + t) + (y + t)], b[t]))
    return Launch(
        "Fan2",
        [2, 2, 1],
        [4, 4, 1],
        [
            buf("m_cuda", "f32", m),
            buf("a_cuda", "f32", a),
            buf("b_cuda", "f32", b),
            val("Size", "i32", size),
            val("j1", "i32", 0),
            val("t", "i32", t),
        ],
        ["a_cuda", "b_cuda"],
        {"a_cuda": a2, "b_cuda": b2},
        description="Gaussian elimination row update a[row][col] -= m[row][t] * a[t][col], 2-D grid",
    )


@kernel
def pathfinder() -> Launch:
    r = Rng(2005)
    cols, rows, iteration, block = 30, 3, 2, 16
    wall = r.ints(rows * cols, 0, 9)
    src = r.ints(cols, 0, 9)
    # the meaning: each of `iteration` rows adds the minimum of the three upper neighbours (clamped at
    # the edges) to its wall value; the small blocks of 12 columns tile the row without overlap
    prev = list(src)
    for i in range(iteration):
        prev = [
            min(prev[max(x - 1, 0)], prev[x], prev[min(x + 1, cols - 1)]) + wall[cols * i + x]
            for x in range(cols)
        ]
    small = block - iteration * 2
    nblocks = (cols + small - 1) // small
    return Launch(
        "dynproc_kernel",
        nblocks,
        [block, 1, 1],
        [
            val("iteration", "i32", iteration),
            buf("gpuWall", "i32", wall),
            buf("gpuSrc", "i32", src),
            buf("gpuResults", "i32", [-1] * cols),
            val("cols", "i32", cols),
            val("rows", "i32", rows),
            val("startStep", "i32", 0),
            val("border", "i32", iteration),
        ],
        ["gpuResults"],
        {"gpuResults": prev},
        description="dynamic-programming min-path over 2 rows of 30 columns (pyramid of 16-thread blocks)",
    )


@kernel
def nn_euclid() -> Launch:
    r = Rng(2006)
    n, lat, lng = 24, np.float32(30.0), np.float32(90.0)
    locs = []
    for v in dyadic_floats(r, 2 * n, mant_bits=10, emin=-4, emax=2):
        locs.append(v)
    locs[0], locs[1] = lat, F.add(lng, np.float32(3.0))  # distance exactly 3
    dist = []
    for k in range(n):
        dlat = F.sub(lat, locs[2 * k])
        dlng = F.sub(lng, locs[2 * k + 1])
        # PTX: mul.f32 for the lng term, fma.rn.f32 for the lat term, sqrt.rn.f32
        dist.append(F.sqrt(F.fma(dlat, dlat, F.mul(dlng, dlng))))
    return Launch(
        "euclid",
        [2, 2, 1],
        [8, 1, 1],
        [
            buf("d_locations", "f32", locs),
            buf("d_distances", "f32", [-1.0] * n),
            val("numRecords", "i32", n),
            val("lat", "f32", lat),
            val("lng", "f32", lng),
        ],
        ["d_distances"],
        {"d_distances": dist},
        description="Euclidean distance of 24 (lat, lng) records to (30, 90); 2-D grid, last block partial",
    )
