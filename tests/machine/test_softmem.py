"""Lowering for the weights, memory and warp side (``qwengpu/codegen/softmem.py``): shared and local
memory and spills in gmem, lane-serialised atomics and sub-word stores, shuffles and votes through
gmem, 2-D/3-D launches over the circuit's linear indices.

(a) every corpus kernel using one of these runs bit-identically to the interpreter on the ISA
simulator as the weights run it (``softmem.run_weights``: a 1-D launch of linear indices, one gmem
persisting across blocks) and keeps only weight ops; (b) adversarial kernels (all lanes on one
address, CAS loops, divergent atomics, byte stores into one word, shuffles and votes under
divergence, exited and missing lanes, stale memory of the previous block, odd launch shapes,
spills) against values computed here in Python (and the interpreter); (c) ``engine.prepare``
accepts what fits the ROM and refuses the rest naming the limit.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from qwengpu.codegen import soft
from qwengpu.codegen.soft import WEIGHT_OPS
from qwengpu.codegen.softmem import OTHER_OPS, plan_memory, run_weights, simulate_weights
from qwengpu.errors import MachineLimitError
from qwengpu.runner import corpus, run_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine_helpers import HEADER  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ITEMS = {cu.stem: (cu, spec) for cu, spec in corpus(ROOT / "kernels")}
M32 = 0xFFFFFFFF
CIRCUIT_SPECIALS = {"tid.x", "ctaid.x", "laneid", "warpid"}


# ---------------------------------------------------------------------------------------------
# which corpus kernels use what
# ---------------------------------------------------------------------------------------------
def features(cu: Path, spec_path: Path) -> set[str]:
    """The features of this module a corpus kernel needs (empty: none, or not lowered)."""
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.cuda import compile_file
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.runner import COMPILE_OPTIONS
    from qwengpu.simt.interp import _find_kernel
    from qwengpu.spec import load_spec

    spec = load_spec(spec_path)
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS), source_name=cu.name)
    fn = _find_kernel(module, spec.kernel)
    try:
        prog = lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])
    except MachineLimitError:
        return set()
    out = set()
    for x in prog.code:
        sp = x.mod("space")
        if x.op in ("ld", "st", "atom") and sp == "shared":
            out.add("shared")
        if x.op in ("ld", "st", "atom") and sp in ("local", "callparam"):
            out.add("local")
        if x.op == "atom":
            out.add("atomic")
        if x.op == "st" and x.mod("size") < 4:
            out.add("subword-store")
        if x.op in ("shfl", "shflp"):
            out.add("shfl")
        if x.op in ("vote", "ballot"):
            out.add("vote")
        if x.op == "s2r" and x.mod("sr") not in CIRCUIT_SPECIALS:
            out.add("launch-specials")
    if tuple(spec.grid)[1:] != (1, 1) or tuple(spec.block)[1:] != (1, 1):
        out.add("multi-d")
    return out


#: the longest of them on the simulator (sin_cos: 7 s and 6 s): its features run in the other kernels
SLOW_FEATURES = {"sin_cos"}
FEATURE_KERNELS = {
    "atomic_add_contention", "atomic_bitwise", "atomic_cas", "atomic_exch", "atomic_float_add",
    "atomic_inc_dec", "atomic_minmax", "block_reduce_atomic", "char_short", "dot",
    "dyn_smem_reverse", "grid_stride", "histogram", "local_hist", "matmul", "mixed_width",
    "scan_blelloch", "scan_hillis_steele", "shfl_broadcast", "shfl_reduce", "shfl_scan_up",
    "shfl_xor_butterfly", "sin_cos", "smem_histogram", "smem_reduce", "smem_transpose",
    "stencil_1d", "syncwarp_exchange", "transpose_2d", "vec_add", "vote", "warp_reduce_2warps",
    "saxpy", "iota_scale", "collatz",
}  # fmt: skip


def test_feature_kernel_list_is_complete() -> None:
    """The parametrized list below is exactly the corpus kernels needing softmem.py."""
    found = {name for name, (cu, spec) in ITEMS.items() if features(cu, spec)}
    assert found == FEATURE_KERNELS, (sorted(found - FEATURE_KERNELS), sorted(FEATURE_KERNELS - found))
    used = set().union(*(features(*ITEMS[n]) for n in found))
    assert used == {
        "shared",
        "local",
        "atomic",
        "subword-store",
        "shfl",
        "vote",
        "launch-specials",
        "multi-d",
    }


@cache
def _ref(name: str):
    cu, spec = ITEMS[name]
    return run_kernel(cu, spec, engine="interp")


def check_weight_program(prog) -> None:
    """Only ops the circuit runs (or that other expanders / the engine own), only global and
    parameter memory, only the circuit's special registers."""
    left = {x.op for x in prog.code} - WEIGHT_OPS - OTHER_OPS
    assert not left, left
    spaces = {x.mod("space") for x in prog.code if x.op in ("ld", "st", "atom")}
    assert spaces <= {"global", "param"}, spaces
    assert all(x.mod("size") == 4 for x in prog.code if x.op == "st")
    srs = {x.mod("sr") for x in prog.code if x.op == "s2r"}
    assert srs <= CIRCUIT_SPECIALS, srs
    assert prog.nregs <= 32


@pytest.fixture
def routed_floats(monkeypatch):
    """``soft.route_floats()`` for one test (the float ops' routines shrink sin_cos below the
    program limit); the registry is restored afterwards."""
    monkeypatch.setattr(soft, "ROUTERS", dict(soft.ROUTERS))
    soft.route_floats()


@pytest.mark.parametrize("name", [n if n not in SLOW_FEATURES else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(FEATURE_KERNELS)])
def test_corpus_kernel_as_the_weights_run_it(name: str, request) -> None:
    cu, spec = ITEMS[name]
    if name == "sin_cos":
        request.getfixturevalue("routed_floats")
    ref = _ref(name)
    res = run_weights(cu, spec)
    for k, want in ref.outputs.items():
        assert res.outputs[k].tobytes() == want.tobytes(), f"{k}: weights {res.outputs[k]} interpreter {want}"
    assert res.stats["ptx_warp_instructions"] == ref.stats["warp_instructions"]
    check_weight_program(res.program)


# ---------------------------------------------------------------------------------------------
# helpers for the adversarial kernels
# ---------------------------------------------------------------------------------------------
def both(tmp_path: Path, source: str, spec: dict, **kw) -> dict[str, np.ndarray]:
    """Interpreter outputs, after checking the weights' program gives the same bits."""
    name = spec["kernel"]
    cu, js = tmp_path / f"{name}.cu", tmp_path / f"{name}.json"
    cu.write_text(source)
    js.write_text(json.dumps(spec))
    ref = run_kernel(cu, js, engine="interp")
    res = run_weights(cu, js, **kw)
    for k, want in ref.outputs.items():
        got = res.outputs[k]
        if got.tobytes() != want.tobytes():
            bad = np.nonzero(got.view(np.uint8) != want.view(np.uint8))[0]
            raise AssertionError(
                f"{k}: weights differ from the interpreter at bytes {bad[:8]}: {got} vs {want}"
            )
    check_weight_program(res.program)
    return ref.outputs


def both_ptx(ptx: str, spec: dict, **kw) -> dict[str, np.ndarray]:
    """``both`` for a hand-written PTX kernel (exact control of registers)."""
    from machine_helpers import run_interp

    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.spec import parse_spec

    module = parse_ptx(HEADER + ptx)
    sp = parse_spec(spec)
    ref = run_interp(module, sp)
    got, _, prog, _ = simulate_weights(module, sp, **kw)
    for k in ref:
        assert got[k].tobytes() == ref[k].tobytes(), f"{k}: weights {got[k]} interpreter {ref[k]}"
    check_weight_program(prog)
    return ref


def s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def rng_words(n: int, seed: int, lo: int = 0, hi: int = M32) -> list[int]:
    r = np.random.default_rng(seed)
    return [int(x) for x in r.integers(lo, hi, n, dtype=np.int64)]


# ---------------------------------------------------------------------------------------------
# (b) atomics
# ---------------------------------------------------------------------------------------------
ATOMICS = {  # name: (CUDA expression, python new value f(old, v), initial cell)
    "add": ("atomicAdd(cell, v)", lambda o, v: (o + v) & M32, 5),
    "sub": ("atomicSub(cell, v)", lambda o, v: (o - v) & M32, 5),
    "exch": ("atomicExch(cell, v)", lambda o, v: v, 5),
    "min_u": ("atomicMin(cell, v)", min, 0x80000000),
    "max_u": ("atomicMax(cell, v)", max, 7),
    "min_s": ("(unsigned)atomicMin((int*)cell, (int)v)", lambda o, v: min(s32(o), s32(v)) & M32, 0),
    "max_s": ("(unsigned)atomicMax((int*)cell, (int)v)", lambda o, v: max(s32(o), s32(v)) & M32, 0),
    "inc": ("atomicInc(cell, 40u)", lambda o, v: 0 if o >= 40 else o + 1, 33),
    "dec": ("atomicDec(cell, 25u)", lambda o, v: 25 if o == 0 or o > 25 else o - 1, 3),
    "and": ("atomicAnd(cell, v | 0xF7FFFFFEu)", lambda o, v: o & (v | 0xF7FFFFFE), M32),
    "or": ("atomicOr(cell, v & 0x01010101u)", lambda o, v: o | (v & 0x01010101), 0),
    "xor": ("atomicXor(cell, v)", lambda o, v: o ^ v, 0x12345678),
    "cas": ("atomicCAS(cell, v & 3u, v)", lambda o, v: v if o == v & 3 else o, 2),
}


@pytest.mark.parametrize("rows", [False, True], ids=["loop", "lane-rows"])
@pytest.mark.parametrize("op", sorted(ATOMICS))
def test_atomic_all_lanes_one_address(tmp_path: Path, op: str, rows: bool) -> None:
    """Every thread of 2 blocks x 2 warps hits one word: each gets its own old value, in the
    interpreter's order (block, warp, lane); with the lane loop, and with each lane's turn as
    one-lane rows (``Options.lane_rows``)."""
    expr, f, init = ATOMICS[op]
    src = f"""
extern "C" __global__ void atom1(unsigned* cell, unsigned* olds, const unsigned* vals)
{{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = vals[t];
    olds[t] = {expr};
}}
"""
    n = 128
    vals = rng_words(n, hash(op) & 0xFFFF)
    if op == "cas":
        vals = [v if i % 3 else (v & ~3) | (i % 4) for i, v in enumerate(vals)]
    if op in ("min_s", "max_s", "min_u", "max_u"):
        vals = [v >> (i % 7) for i, v in enumerate(vals)]
    spec = {
        "kernel": "atom1",
        "grid": 2,
        "block": 64,
        "args": [
            {"name": "cell", "type": "u32*", "data": [init]},
            {"name": "olds", "type": "u32*", "size": n},
            {"name": "vals", "type": "u32*", "data": vals},
        ],
        "outputs": ["cell", "olds"],
    }
    out = both(tmp_path, src, spec, options=soft.Options(lane_rows=rows))
    cell, olds = init, []
    for v in vals:
        olds.append(cell)
        cell = f(cell, v) & M32
    assert out["olds"].tolist() == olds
    assert out["cell"].tolist() == [cell]


@pytest.mark.parametrize("name", ["atomic_inc_dec", "atomic_minmax", "atomic_float_add", "dot"])
@pytest.mark.parametrize("native", [False, True], ids=["test-shape", "2b-shape"])
def test_waiting_lanes_compute_no_atomic_value(name: str, native: bool) -> None:
    """The atomics' lane loop computes the new value on the lane whose turn it is only: every
    instruction writing the value a guarded global store stores carries the store's guard. Lanes
    still waiting (every group of the warp passes through every iteration) wrote up to three
    result tokens each for a value nobody read (the 2B-shape corpus's atomic kernels: ~50-65 %
    of their tokens)."""
    from qwengpu.codegen.soft import Options
    from qwengpu.isa.instr import P as Pred
    from qwengpu.isa.instr import R

    cu, spec = ITEMS[name]
    opts = Options(native_mul=native, native_fadd=native)
    code = run_weights(cu, spec, options=opts).program.code
    stores = 0
    for pc, x in enumerate(code):
        if x.op != "st" or not isinstance(x.guard, Pred) or not isinstance(x.s[1], R):
            continue
        d = next((y for y in reversed(code[:pc]) if x.s[1] in y.d), None)
        if d is not None and d.op == "mov" and d.guard == x.guard:
            # the copy of a shared routine's result (with the lane loop's copies per lane group, a
            # float add may be one routine for the eight copies): the call is the computation
            d = next((y for y in reversed(code[:pc]) if y.op == "call"), d)
        if d is None or d.op in ("ld", "mov"):  # exch / a value loaded or copied outside the loop
            continue
        stores += 1
        assert d.guard == x.guard, f"pc {pc}: {x} stores a value computed by {d} on every lane"
    assert stores > 0


def test_atomic_float_add_and_minmax(tmp_path: Path) -> None:
    """f32 atomics: add (round to nearest), min and max (PTX ``atom.min/max.f32``)."""
    ptx = """
.visible .entry fatom(.param .u64 p0, .param .u64 p1, .param .u64 p2)
{
    .reg .b32 %r<8>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    ld.param.u64 %rd3, [p2];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd3, %rd4;
    ld.global.f32 %f1, [%rd5];
    atom.global.add.f32 %f2, [%rd1], %f1;
    atom.global.min.f32 %f3, [%rd1+4], %f1;
    atom.global.max.f32 %f4, [%rd1+8], %f1;
    mul.wide.u32 %rd6, %r1, 12;
    add.s64 %rd7, %rd2, %rd6;
    st.global.f32 [%rd7], %f2;
    st.global.f32 [%rd7+4], %f3;
    st.global.f32 [%rd7+8], %f4;
    ret;
}
"""
    r = np.random.default_rng(7)
    vals = [np.float32(x) for x in r.normal(0, 100, 40)]
    spec = {
        "kernel": "fatom",
        "grid": 1,
        "block": 40,
        "args": [
            {"name": "cells", "type": "f32*", "data": ["1.5", "0.25", "-3"]},
            {"name": "olds", "type": "f32*", "size": 120},
            {"name": "vals", "type": "f32*", "data": [repr(float(v)) for v in vals]},
        ],
        "outputs": ["cells", "olds"],
    }
    out = both_ptx(ptx, spec)
    c = [np.float32(1.5), np.float32(0.25), np.float32(-3)]
    olds = []
    for v in vals:
        olds += c
        c = [np.float32(c[0] + v), min(c[1], v), max(c[2], v)]
    assert out["olds"].tolist() == [float(x) for x in olds]
    assert out["cells"].tolist() == [float(x) for x in c]


@pytest.mark.parametrize("name", ["histogram", "atomic_float_add"])
def test_lane_loops_run_one_copy_per_lane_group(name: str) -> None:
    """The atomics' lane loop as one copy per lane group (``Options.group_loops``): the same bits
    as the single loop and as the spec's expected values (atomic_float_add: every lane's old value
    in lane order), in fewer passes, with a copy per group of the 32-thread warps; a ROM too small
    for the copies gets the single loop."""
    from qwengpu.codegen.soft import Options

    cu, spec = ITEMS[name]
    runs = {gl: run_weights(cu, spec, options=Options(group_loops=gl)) for gl in (True, False)}
    for r in runs.values():
        assert not r.mismatches, r.mismatches
    for k, v in runs[True].outputs.items():
        assert v.tobytes() == runs[False].outputs[k].tobytes()
    assert runs[True].stats["passes"] < 0.6 * runs[False].stats["passes"]
    copies = [i for i in runs[True].program.code if i.op == "mov" and i.s and getattr(i.s[0], "v", None)
              in (4, 8, 12, 16, 20, 24, 28)]
    assert len(copies) >= 7  # the counts of copies 1-7 start at their group's first lane


    prog = run_weights(cu, spec, options=Options(group_loops=False)).program
    tight = run_weights(cu, spec, options=Options(budget=len(prog.code) + 4))
    assert len(tight.program.code) <= len(prog.code) + 4
    assert tight.stats["passes"] == runs[False].stats["passes"]


def test_divergent_atomics_and_cas_loop(tmp_path: Path) -> None:
    """Atomics in divergent branches (only some lanes of each warp take part) and a CAS retry
    loop in which all lanes contend for one word."""
    src = """
extern "C" __global__ void datom(unsigned* cells, unsigned* olds, const unsigned* vals)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = vals[t];
    unsigned o = 0xdeadu;
    if (v % 3 == 0) o = atomicAdd(&cells[0], v);
    else if (v % 3 == 1) o = atomicXor(&cells[1], v);
    olds[t] = o;
    unsigned cur = cells[2], prev;           // cells[2] *= v | 1, by CAS
    do { prev = cur; cur = atomicCAS(&cells[2], prev, prev * (v | 1u)); } while (cur != prev);
}
"""
    n = 96
    vals = rng_words(n, 11)
    spec = {
        "kernel": "datom",
        "grid": 3,
        "block": 32,
        "args": [
            {"name": "cells", "type": "u32*", "data": [1, 2, 3]},
            {"name": "olds", "type": "u32*", "size": n},
            {"name": "vals", "type": "u32*", "data": vals},
        ],
        "outputs": ["cells", "olds"],
    }
    out = both(tmp_path, src, spec)
    c0, c1, prod, olds = 1, 2, 3, []
    for v in vals:
        if v % 3 == 0:
            olds.append(c0)
            c0 = (c0 + v) & M32
        elif v % 3 == 1:
            olds.append(c1)
            c1 ^= v
        else:
            olds.append(0xDEAD)
        prod = prod * (v | 1) & M32
    assert out["olds"].tolist() == olds
    assert out["cells"].tolist() == [c0, c1, prod]


def test_shared_atomics_read_before_write_every_block(tmp_path: Path) -> None:
    """Shared memory is zero at every block's start (the interpreter's model): atomics on it
    without initialisation, 3 blocks of a partial second warp, static and dynamic shared."""
    src = """
extern "C" __global__ void shatom(unsigned* out)
{
    __shared__ unsigned s[8];
    extern __shared__ unsigned d[];
    unsigned t = threadIdx.x;
    atomicAdd(&s[t & 7], t + 1);
    atomicMax(&d[t % 5], t * 7 + blockIdx.x);
    __syncthreads();
    if (t < 8) out[blockIdx.x * 13 + t] = s[t];
    if (t < 5) out[blockIdx.x * 13 + 8 + t] = d[t];
}
"""
    spec = {
        "kernel": "shatom",
        "grid": 3,
        "block": 40,
        "shared_bytes": 20,
        "args": [{"name": "out", "type": "u32*", "size": 39}],
        "outputs": ["out"],
    }
    out = both(tmp_path, src, spec)
    want = []
    for b in range(3):
        want += [sum(t + 1 for t in range(40) if t & 7 == k) for k in range(8)]
        want += [max(t * 7 + b for t in range(40) if t % 5 == k) for k in range(5)]
    assert out["out"].tolist() == want


# ---------------------------------------------------------------------------------------------
# (b) sub-word stores
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rows", [False, True], ids=["loop", "lane-rows"])
def test_byte_and_short_stores_share_words(tmp_path: Path, rows: bool) -> None:
    """Lanes writing different bytes of one word keep each other's bytes (global and shared);
    many lanes writing one byte: the last lane in the interpreter's order wins; shared bytes not
    written in a block are 0 (not the previous block's). With the lane loop and with one-lane
    rows (``Options.lane_rows``)."""
    src = """
extern "C" __global__ void bytes(unsigned char* p, unsigned short* q, unsigned char* same,
                                 unsigned* shb, unsigned* shs)
{
    __shared__ unsigned char sb[64];
    __shared__ unsigned short ss[64];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned x = threadIdx.x;
    p[t] = (unsigned char)(t * 37 + 5);
    q[t] = (unsigned short)(t * 4099 + 1);
    same[t & 1] = (unsigned char)(t + 1);
    if (x & 2) sb[x] = (unsigned char)(t * 3 + blockIdx.x + 1);
    if (blockIdx.x == 0 || x < 40) ss[x ^ 1] = (unsigned short)(t * 5 + 1);
    __syncthreads();
    if (x < 16) shb[blockIdx.x * 16 + x] = ((unsigned*)sb)[x];
    if (x < 32) shs[blockIdx.x * 32 + x] = ((unsigned*)ss)[x];
}
"""
    spec = {
        "kernel": "bytes",
        "grid": 2,
        "block": 64,
        "args": [
            {"name": "p", "type": "u8*", "size": 128},
            {"name": "q", "type": "u16*", "size": 128},
            {"name": "same", "type": "u8*", "size": 2},
            {"name": "shb", "type": "u32*", "size": 32},
            {"name": "shs", "type": "u32*", "size": 64},
        ],
        "outputs": ["p", "q", "same", "shb", "shs"],
    }
    out = both(tmp_path, src, spec, options=soft.Options(lane_rows=rows))
    assert out["p"].tolist() == [(t * 37 + 5) & 0xFF for t in range(128)]
    assert out["q"].tolist() == [(t * 4099 + 1) & 0xFFFF for t in range(128)]
    assert out["same"].tolist() == [127, 128]
    shb, shs = [], []
    for b in range(2):
        sb = [((64 * b + x) * 3 + b + 1) & 0xFF if x & 2 else 0 for x in range(64)]
        shb += [int.from_bytes(bytes(sb[4 * i : 4 * i + 4]), "little") for i in range(16)]
        ss = [0] * 64
        for x in range(64):
            if b == 0 or x < 40:
                ss[x ^ 1] = ((64 * b + x) * 5 + 1) & 0xFFFF
        shs += [ss[2 * i] | ss[2 * i + 1] << 16 for i in range(32)]
    assert out["shb"].tolist() == shb
    assert out["shs"].tolist() == shs


def test_local_bytes_at_register_offsets(tmp_path: Path) -> None:
    """A per-thread byte array indexed at run time (local memory, transposed per thread)."""
    src = """
extern "C" __global__ void lbytes(const unsigned* idx, unsigned* out)
{
    unsigned char buf[16];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned k = idx[t];
    for (int i = 0; i < 16; i++) buf[(i * 5 + k) & 15] = (unsigned char)(i * 11 + t);
    buf[k & 15] = 0xEE;
    unsigned s = 0;
    for (int i = 0; i < 16; i++) s = s * 31u + buf[(i * 7 + (k >> 4)) & 15];
    out[t] = s;
}
"""
    idx = rng_words(48, 5, 0, 256)
    spec = {
        "kernel": "lbytes",
        "grid": 2,
        "block": 24,
        "args": [{"name": "idx", "type": "u32*", "data": idx}, {"name": "out", "type": "u32*", "size": 48}],
        "outputs": ["out"],
    }
    out = both(tmp_path, src, spec)
    want = []
    for t, k in enumerate(idx):
        buf = [0] * 16
        for i in range(16):
            buf[(i * 5 + k) & 15] = (i * 11 + t) & 0xFF
        buf[k & 15] = 0xEE
        s = 0
        for i in range(16):
            s = (s * 31 + buf[(i * 7 + (k >> 4)) & 15]) & M32
        want.append(s)
    assert out["out"].tolist() == want


def test_local_memory_is_zero_in_every_block() -> None:
    """PTX reading .local before writing it: 0 in every block (the interpreter zeroes it)."""
    ptx = """
.visible .entry lzero(.param .u64 p0)
{
    .local .align 4 .b8 buf[16];
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p0];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    and.b32 %r3, %r1, 3;
    shl.b32 %r4, %r3, 2;
    mov.u32 %r5, buf;
    add.u32 %r5, %r5, %r4;
    ld.local.u32 %r6, [%r5];
    add.u32 %r7, %r1, 100;
    st.local.u32 [%r5], %r7;
    ld.local.u32 %r8, [buf+4];
    mad.lo.s32 %r9, %r6, 1000, %r8;
    mad.lo.s32 %r10, %r2, 8, %r1;
    mul.wide.u32 %rd2, %r10, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r9;
    ret;
}
"""
    spec = {
        "kernel": "lzero",
        "grid": 3,
        "block": 8,
        "args": [{"name": "out", "type": "u32*", "size": 24}],
        "outputs": ["out"],
    }
    out = both_ptx(ptx, spec)
    assert out["out"].tolist() == [(t + 100 if t & 3 == 1 else 0) for _ in range(3) for t in range(8)]


# ---------------------------------------------------------------------------------------------
# (b) shuffles and votes
# ---------------------------------------------------------------------------------------------
def shfl_src(mode: str, lane: int, b: int, c: int) -> int:
    """PTX shfl.sync: the lane a lane reads (itself when the source is out of range)."""
    bval, cval, seg = b & 31, c & 31, (c >> 8) & 31
    maxl, minl = (lane & seg) | (cval & ~seg & 31), lane & seg
    if mode == "up":
        j, ok = lane - bval, lane - bval >= maxl
    elif mode == "down":
        j, ok = lane + bval, lane + bval <= maxl
    elif mode == "bfly":
        j, ok = lane ^ bval, (lane ^ bval) <= maxl
    else:
        j = minl | (bval & ~seg & 31)
        ok = j <= maxl
    return j if ok else lane


def cuda_c(width: int, up: bool = False) -> int:
    """The ``c`` operand CUDA's __shfl_*_sync(…, width) passes."""
    return ((32 - width) << 8) | (0 if up else 31)


def test_shuffles_under_divergence(tmp_path: Path) -> None:
    """Shuffles reading inactive lanes (their last value), segments, register offsets, a partial
    second warp (missing lanes read 0), two blocks."""
    src = """
extern "C" __global__ void shdiv(const int* in, const int* src, int* out)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = in[t];
    int r0 = -1, r1 = -1, r2, r3 = -1;
    if (lane < 16) r0 = __shfl_sync(0x0000ffffu, v, lane + 16);
    if (lane & 1) r1 = __shfl_down_sync(0xaaaaaaaau, v, 3, 8);
    r2 = __shfl_up_sync(0xffffffffu, v, src[t] & 7, 16);
    if (lane % 3) r3 = __shfl_xor_sync(0xffffffffu, v, 5);
    out[4 * t + 0] = r0;
    out[4 * t + 1] = r1;
    out[4 * t + 2] = r2;
    out[4 * t + 3] = r3;
}
"""
    nb, bs = 2, 40
    n = nb * bs
    vin = [s32(x) for x in rng_words(n, 3)]
    srcs = rng_words(n, 4, 0, 64)
    spec = {
        "kernel": "shdiv",
        "grid": nb,
        "block": bs,
        "args": [
            {"name": "in", "type": "i32*", "data": vin},
            {"name": "src", "type": "i32*", "data": srcs},
            {"name": "out", "type": "i32*", "size": 4 * n},
        ],
        "outputs": ["out"],
    }
    out = both(tmp_path, src, spec)

    def val(t: int, j: int) -> int:  # lane j of thread t's warp (0: a lane that does not exist)
        base = t - (t % bs) % 32
        return vin[base + j] if (t % bs) - (t % bs) % 32 + j < bs else 0

    want = []
    for t in range(n):
        lane = (t % bs) & 31
        r0 = val(t, shfl_src("idx", lane, lane + 16, 31)) if lane < 16 else -1
        r1 = val(t, shfl_src("down", lane, 3, cuda_c(8))) if lane & 1 else -1
        r2 = val(t, shfl_src("up", lane, srcs[t] & 7, cuda_c(16, up=True)))
        r3 = val(t, shfl_src("bfly", lane, 5, 31)) if lane % 3 else -1
        want += [r0, r1, r2, r3]
    assert out["out"].tolist() == want


def test_shuffle_reads_exited_lanes(tmp_path: Path) -> None:
    src = """
extern "C" __global__ void shexit(const int* in, int* vs, int* out)
{
    int t = threadIdx.x;
    int v = in[t] * 3 + 1;
    vs[t] = v;
    if (t >= 28) return;
    out[t] = __shfl_down_sync(0x0fffffffu, v, 4);
}
"""
    vin = [s32(x) >> 4 for x in rng_words(32, 9)]
    spec = {
        "kernel": "shexit",
        "grid": 1,
        "block": 32,
        "args": [
            {"name": "in", "type": "i32*", "data": vin},
            {"name": "vs", "type": "i32*", "size": 32},
            {"name": "out", "type": "i32*", "size": 32},
        ],
        "outputs": ["out"],
    }
    out = both(tmp_path, src, spec)
    v = [s32(x * 3 + 1) for x in vin]
    assert out["out"].tolist() == [v[t + 4] for t in range(28)] + [0] * 4


def test_shuffle_of_a_register_never_written_in_this_block() -> None:
    """A shfl source written only by some lanes: the others read 0 in every block (not the value
    the same thread slot wrote in the previous block)."""
    ptx = """
.visible .entry shstale(.param .u64 p0)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p0];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    setp.eq.u32 %p1, %r2, 0;
    setp.lt.u32 %p2, %r1, 8;
    or.pred %p3, %p1, %p2;
    @%p3 mad.lo.s32 %r5, %r1, 7, 3;
    add.u32 %r6, %r1, 8;
    shfl.sync.idx.b32 %r7, %r5, %r6, 31, -1;
    mad.lo.s32 %r8, %r2, 32, %r1;
    mul.wide.u32 %rd2, %r8, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r7;
    ret;
}
"""
    spec = {
        "kernel": "shstale",
        "grid": 3,
        "block": 32,
        "args": [{"name": "out", "type": "u32*", "size": 96}],
        "outputs": ["out"],
    }
    out = both_ptx(ptx, spec)
    want = []
    for b in range(3):
        for t in range(32):
            j = (t + 8) & 31
            want.append(j * 7 + 3 if b == 0 or j < 8 else 0)
    assert out["out"].tolist() == want


def test_votes_and_ballots_over_active_lanes(tmp_path: Path) -> None:
    """Ballot/any/all/uni count only the lanes that execute them (divergent branches, a partial
    second warp, a second ballot over fewer lanes right after the first)."""
    src = """
extern "C" __global__ void votes(const int* in, unsigned* out)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = in[t];
    unsigned b0 = __ballot_sync(0xffffffffu, v > 0);
    unsigned b1 = 7u, a1 = 7u, y = 7u, u = 7u;
    if (lane % 3 == 0) b1 = __ballot_sync(0x49249249u, v > 0);
    if (lane & 4) a1 = __all_sync(0xf0f0f0f0u, v > 0);
    if (lane < 20) y = __any_sync(0x000fffffu, v > 1000000);
    if (lane > 3) u = __uni_sync(0xfffffff0u, v > -5);
    out[5 * t + 0] = b0;
    out[5 * t + 1] = b1;
    out[5 * t + 2] = a1;
    out[5 * t + 3] = y;
    out[5 * t + 4] = u;
}
"""
    nb, bs = 2, 40
    n = nb * bs
    vin = rng_words(n, 21, 0, 2_000_000)
    vin = [x - 3 if i % 7 else -x for i, x in enumerate(vin)]
    vin[45:80] = [abs(x) + 1 for x in vin[45:80]]  # warp 2 of block 1: all positive for `all`/`uni`
    spec = {
        "kernel": "votes",
        "grid": nb,
        "block": bs,
        "args": [{"name": "in", "type": "i32*", "data": vin}, {"name": "out", "type": "u32*", "size": 5 * n}],
        "outputs": ["out"],
    }
    out = both(tmp_path, src, spec)
    want = []
    for t in range(n):
        x = t % bs
        lane, base = x & 31, t - (x & 31)
        lanes = [j for j in range(32) if x - lane + j < bs]  # lanes of this warp that exist

        def ballot(active: list[int], pred, base: int = base) -> int:
            return sum(1 << j for j in active if pred(vin[base + j]))

        b0 = ballot(lanes, lambda v: v > 0)
        b1 = ballot([j for j in lanes if j % 3 == 0], lambda v: v > 0) if lane % 3 == 0 else 7
        act = [j for j in lanes if j & 4]
        a1 = int(all(vin[base + j] > 0 for j in act)) if lane & 4 else 7
        act = [j for j in lanes if j < 20]
        y = int(any(vin[base + j] > 1000000 for j in act)) if lane < 20 else 7
        act = [j for j in lanes if j > 3]
        ps = {vin[base + j] > -5 for j in act}
        u = int(len(ps) == 1) if lane > 3 else 7
        want += [b0, b1, a1, y, u]
    assert out["out"].tolist() == want
    assert any(w not in (0, 1, 7) for w in want)


# ---------------------------------------------------------------------------------------------
# (b) launch shapes and launch constants
# ---------------------------------------------------------------------------------------------
SHAPE_SRC = """
extern "C" __global__ void shape(unsigned* out, unsigned* blk)
{
    extern __shared__ unsigned dyn[];
    __shared__ unsigned st[3];
    unsigned bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned n = blockDim.x * blockDim.y * blockDim.z;
    out[bid * n + tid] = threadIdx.x | threadIdx.y << 6 | threadIdx.z << 12 | blockIdx.x << 18
                       | blockIdx.y << 22 | blockIdx.z << 26;
    if (tid == 0) {
        unsigned nw, dsz, tsz, lt;
        asm("mov.u32 %0, %%nwarpid;" : "=r"(nw));
        asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dsz));
        asm("mov.u32 %0, %%total_smem_size;" : "=r"(tsz));
        st[0] = nw; dyn[0] = dsz;
        blk[5 * bid + 0] = gridDim.x | gridDim.y << 8 | gridDim.z << 16;
        blk[5 * bid + 1] = blockDim.x | blockDim.y << 8 | blockDim.z << 16;
        blk[5 * bid + 2] = st[0];
        blk[5 * bid + 3] = dyn[0];
        blk[5 * bid + 4] = tsz;
    }
}
"""


@pytest.mark.parametrize(
    "grid,block",
    [((3, 2, 2), (3, 5, 2)), ((3, 1, 2), (7, 3, 3)), ((1, 5, 1), (1, 1, 64)), ((6, 1, 1), (5, 6, 1))],
    ids=["3x2x2_of_3x5x2", "3x1x2_of_7x3x3", "1x5x1_of_1x1x64", "6_of_5x6"],
)
def test_launch_shapes(tmp_path: Path, grid: tuple, block: tuple) -> None:
    """tid/ctaid x,y,z from the linear indices (x fastest), ntid/nctaid/nwarpid/smem sizes."""
    n, nb = block[0] * block[1] * block[2], grid[0] * grid[1] * grid[2]
    spec = {
        "kernel": "shape",
        "grid": list(grid),
        "block": list(block),
        "shared_bytes": 8,
        "args": [
            {"name": "out", "type": "u32*", "size": n * nb},
            {"name": "blk", "type": "u32*", "size": 5 * nb},
        ],
        "outputs": ["out", "blk"],
    }
    out = both(tmp_path, SHAPE_SRC, spec)
    want, blk = [], []
    for b in range(nb):
        bx, by, bz = b % grid[0], b // grid[0] % grid[1], b // (grid[0] * grid[1])
        for t in range(n):
            tx, ty, tz = t % block[0], t // block[0] % block[1], t // (block[0] * block[1])
            want.append(tx | ty << 6 | tz << 12 | bx << 18 | by << 22 | bz << 26)
        g = grid[0] | grid[1] << 8 | grid[2] << 16
        blk += [g, block[0] | block[1] << 8 | block[2] << 16, -(-n // 32)]
    assert out["out"].tolist() == want
    got = out["blk"].reshape(nb, 5)
    assert got[:, :3].ravel().tolist() == blk
    # dynamic / total shared sizes: the dynamic part starts 16-byte aligned after the static one
    static = got[:, 4] - got[:, 3]
    assert (got[:, 4] == (static + 15) // 16 * 16 + 8).all() and static[0] in (4, 8, 12)


def test_lanemasks(tmp_path: Path) -> None:
    src = """
extern "C" __global__ void masks(unsigned* out)
{
    unsigned t = threadIdx.x, a, b, c, d, e;
    asm("mov.u32 %0, %%lanemask_eq;" : "=r"(a));
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(b));
    asm("mov.u32 %0, %%lanemask_le;" : "=r"(c));
    asm("mov.u32 %0, %%lanemask_ge;" : "=r"(d));
    asm("mov.u32 %0, %%lanemask_gt;" : "=r"(e));
    out[5 * t] = a; out[5 * t + 1] = b; out[5 * t + 2] = c; out[5 * t + 3] = d; out[5 * t + 4] = e;
}
"""
    spec = {
        "kernel": "masks",
        "grid": 1,
        "block": 48,
        "args": [{"name": "out", "type": "u32*", "size": 240}],
        "outputs": ["out"],
    }
    out = both(tmp_path, src, spec)
    want = []
    for t in range(48):
        j = t & 31
        lt, le = (1 << j) - 1, (2 << j) - 1
        want += [1 << j, lt, le & M32, ~lt & M32, ~le & M32]
    assert out["out"].tolist() == want


# ---------------------------------------------------------------------------------------------
# (b) spills, plans and refusals
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,k", [("vote", 7), ("local_hist", 5), ("smem_reduce", 6), ("shfl_reduce", 7), ("atomic_cas", 4)]
)
def test_spills_in_gmem(name: str, k: int) -> None:
    """With few registers the allocator spills; the slots live in gmem addressed from r31."""
    from qwengpu.cuda import compile_file
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.runner import COMPILE_OPTIONS
    from qwengpu.spec import load_spec

    cu, sp = ITEMS[name]
    spec = load_spec(sp)
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS), source_name=cu.name)
    got, _, prog, plan = simulate_weights(module, spec, k_regs=k)
    assert plan.spill_words > 0 and plan.spill_base is not None
    for n, want in _ref(name).outputs.items():
        assert got[n].tobytes() == want.tobytes()
    check_weight_program(prog)
    assert not any(x.mod("space") == "spill" for x in prog.code)


def test_plan_layout_and_refusals() -> None:
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.cuda import compile_file
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.runner import COMPILE_OPTIONS

    def prog_of(name: str):
        cu, _ = ITEMS[name]
        module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS), source_name=cu.name)
        return lower_kernel(module, name, None)

    p = prog_of("warp_reduce_2warps")
    plan = plan_memory(p, (2, 1, 1), (64, 1, 1), gmem_words=1024)
    names = [r[0] for r in plan.regions()]
    assert names[0] == "shared" and all(n.startswith("shfl shadow") for n in names[1:])
    assert plan.shared_base == 1020 and plan.low == 1020 - 5 * 64
    plan.check_arena(plan.low)
    with pytest.raises(MachineLimitError, match=r"buffers need 701 words .* leaving 700"):
        plan.check_arena(701)
    with pytest.raises(
        MachineLimitError,
        match="771 words of shared memory per block; the machine in the weights maps at most 768",
    ):
        plan_memory(p, (1, 1, 1), (64, 1, 1), dynamic_shared=4 * 769, gmem_words=1024)
    q = prog_of("local_hist")
    with pytest.raises(
        MachineLimitError, match=r"needs 512 words of global memory for shared, local .* has 256"
    ):
        plan_memory(q, (1, 1, 1), (40, 1, 1), gmem_words=256)  # 8 local words x 64 thread slots
    with pytest.raises(MachineLimitError, match="65536 blocks for the machine; it runs at most 65535"):
        plan_memory(q, (256, 256, 1), (8, 1, 1))
    assert plan_memory(q, (255, 257, 1), (8, 1, 1)).nblocks == 65535


def test_expansion_without_a_launch_keeps_spaces() -> None:
    """Plain ``soft.expand_for_weights`` (no launch): atomics and sub-word stores expand, shared
    memory and warp ops stay (the plain simulator runs them)."""
    from qwengpu.codegen.soft import run_for_weights

    res = run_for_weights(*ITEMS["smem_histogram"])
    ops = {(x.op, x.mod("space")) for x in res.program.code}
    assert ("atom", "shared") not in ops and ("ld", "shared") in ops
    for n, want in _ref("smem_histogram").outputs.items():
        assert res.outputs[n].tobytes() == want.tobytes()


# ---------------------------------------------------------------------------------------------
# (c) engine.prepare
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [n if n not in SLOW_FEATURES else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(FEATURE_KERNELS)])
def test_engine_prepare_accepts(name: str) -> None:
    """Accepted (ROM program within the ROM, only weight ops), or refused for the ROM size alone."""
    from qwengpu.runtime import engine

    cu, spec = ITEMS[name]
    try:
        _, prog, prompt, _, _ = engine.prepare(cu, spec)
    except MachineLimitError as e:
        rows = engine.DEFAULT_SHAPE.rom_rows
        assert f"the ROM has {rows}" in str(e) or "machine instructions of program" in str(e), e
        pytest.skip(f"program size: {e}")
    assert len(prog.code) <= engine.DEFAULT_SHAPE.rom_rows
    check_weight_program(prog)


def test_engine_prepare_refuses_overlapping_buffers(tmp_path: Path) -> None:
    from qwengpu.runtime import engine

    src = """
extern "C" __global__ void big(unsigned* a)
{
    __shared__ unsigned s[200];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    a[threadIdx.x] = s[threadIdx.x ^ 1];
}
"""
    spec = {
        "kernel": "big",
        "grid": 1,
        "block": 32,
        "args": [{"name": "a", "type": "u32*", "size": 16192}],
        "outputs": ["a"],
    }
    (tmp_path / "big.cu").write_text(src)
    (tmp_path / "big.json").write_text(json.dumps(spec))
    with pytest.raises(
        MachineLimitError, match=r"buffers need 16196 words .*shared 200 words at 16184.* leaving 16184"
    ):
        engine.prepare(tmp_path / "big.cu", tmp_path / "big.json")  # the 2B machine: 16,384 words


def test_encoded_constant_address_store() -> None:
    """A store of a constant to a constant address (shared initializers) encodes: the address
    rides in ``off`` and operand a reads the circuit's zero."""
    from qwengpu.isa.instr import Imm, MInstr
    from qwengpu.machine.circuit import ROM_FIELDS, SR_CODES
    from qwengpu.runtime.engine import DEFAULT_SHAPE, encode_program
    from qwengpu.simt.memory import GLOBAL_BASE

    class Prog:
        name = "k"
        code = [
            MInstr("st", (), (Imm(8), Imm(0x2C)), {"space": "global", "size": 4, "base": GLOBAL_BASE + 4000})
        ]

    (row,) = encode_program(Prog(), b"", (32, 1, 1), DEFAULT_SHAPE)
    f, off = {}, 0
    for name, w in ROM_FIELDS:
        f[name] = row >> off & ((1 << w) - 1)
        off += w
    assert f["a_sr"] > max(SR_CODES.values()) and f["off"] == 4008 and f["imm"] == 0x2C and f["b_imm"] == 1


def test_launch_constants_fold_into_the_program() -> None:
    """``blockIdx.x * blockDim.x`` with blockDim.x = 16 is one shift by 4 (PTX copies ntid.x into
    another register first: the copy of a constant is a constant too), not a general product; a
    one-block launch has no block index at all (``dot``: 1 block of 4); no ALU instruction is
    left with only immediate operands."""
    from qwengpu.isa.instr import Imm

    root = Path(__file__).resolve().parents[2] / "kernels"
    vec = run_weights(root / "vec_add.cu")  # 4 blocks of 16 threads
    assert vec.passed
    code = vec.program.code
    assert any(i.op == "shl" and i.s[1] == Imm(4) for i in code)
    assert not any(i.op == "setp" and all(isinstance(x, Imm) for x in i.s) for i in code)
    assert vec.stats["warp_instructions"] <= 280  # 360 while the product was a general sequence
    dot = run_weights(root / "dot.cu")
    assert dot.passed
    assert not any(i.op == "s2r" and i.mod("sr") == "ctaid.x" for i in dot.program.code)
    for r in (vec, dot):
        assert not [str(i) for i in r.program.code if i.s and all(isinstance(x, Imm) for x in i.s)
                    and i.op not in ("mov", "ld", "st", "bra", "exit", "call", "ret")]


def test_window_multiply_of_two_constants_is_folded() -> None:
    """Constants propagated into both operands of a window multiply (external reduce6_f64:
    ``mulw r, 0, 8``): not a shift the weights run as it is, but a product the expander folds."""
    from qwengpu.codegen.softcore import weight_name
    from qwengpu.isa.instr import Imm, MInstr, R

    both = MInstr("mulw", (R(0),), (Imm(0), Imm(8)), {"sa": "u", "sb": "u"}, None, None, 0)
    assert weight_name(both) == "mulw"
    one = MInstr("mulw", (R(0),), (R(1), Imm(8)), {"sa": "u", "sb": "u"}, None, None, 0)
    assert weight_name(one) is None


BIG_GRID_SRC = r"""
extern "C" __global__ void big_grid(unsigned *out, unsigned n) {
    unsigned x = blockIdx.x, y = blockIdx.y;
    atomicAdd(&out[(y * gridDim.x + x) & 63], x * n + (y + 3) * (x + 1) + threadIdx.x);
}
"""


@pytest.mark.parametrize("grid", [(1147, 1), pytest.param((37, 31), marks=pytest.mark.slow)])  # 2-D: 6 s
def test_grids_of_1147_blocks_multiply_full_block_indices(tmp_path: Path, grid: tuple[int, int]) -> None:
    """Launches beyond 64 blocks (the machine runs 65,535): the lowering's bound on ``%ctaid`` is
    the launch's own (at least 6 bits, so programs of launches that fitted before are unchanged),
    and multiplies by ``blockIdx`` past 6 bits (1-D: the linear index itself, up to 1,146; 2-D:
    x < 37, y < 31 from it by exact reciprocal multiplies) are exact on the ISA simulator as the
    weights run them; the expected words come from NumPy. With the old 6-bit bound the 1-D launch's
    products lose their high bits."""
    from qwengpu.codegen.softcore import special_bits

    assert special_bits()["ctaid.x"] == 16 and special_bits(5)["ctaid.x"] == 6
    assert special_bits(64)["ctaid.x"] == 6 and special_bits(1147)["ctaid.x"] == 11
    spec = {"kernel": "big_grid", "grid": list(grid), "block": 2,
            "args": [{"name": "out", "type": "u32*", "data": [0] * 64},
                     {"name": "n", "type": "u32", "value": 977}],
            "outputs": ["out"]}  # fmt: skip
    got = both(tmp_path, BIG_GRID_SRC, spec)["out"]
    y, x = np.divmod(np.arange(1147), grid[0])
    want = np.zeros(64, dtype=np.uint64)
    np.add.at(want, (y * grid[0] + x) & 63, 2 * (x * 977 + (y + 3) * (x + 1)) + 1)
    assert got.astype(np.uint64).tolist() == (want & M32).tolist()


@pytest.mark.parametrize("shape", ["2b", "test"])
def test_lane_group_copies_are_reached_by_halves(shape: str) -> None:
    """``_lane_loop``'s copies: group 0 split off by the first test of ``laneid`` (the one lane of
    an ``if (tid == 0)`` atomic passes one test), the other groups by halves (the last group passes
    4 tests, not 7 as in a chain): ``histogram``'s 2 blocks of two full warps take 1,276 passes
    (1,332 with the chain), with the same bits as the spec's expected values."""
    from qwengpu.codegen.soft import Options
    from qwengpu.codegen.softcore import unit_options
    from qwengpu.model.configs import shape_named

    cu, spec = ITEMS["histogram"]
    r = run_weights(cu, spec, options=Options(**unit_options(shape_named(shape))))
    assert not r.mismatches, r.mismatches
    assert r.stats["passes"] <= 1276
    bounds = [i.s[1].v for i in r.program.code if i.op == "setp" and i.mod("cmp") == "ge"
              and len(i.s) == 2 and getattr(i.s[1], "v", None) in (4, 8, 12, 16, 20, 24, 28)]
    assert bounds[:2] == [4, 16]  # group 0 alone, then groups 1-3 against 4-7
