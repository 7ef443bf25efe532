"""Helpers for the machine tests: run one PTX module + spec on the interpreter and on the machine."""

from __future__ import annotations

from typing import Any

import numpy as np

from qwengpu.codegen.pipeline import simulate
from qwengpu.errors import QwenGPUError
from qwengpu.ptx.parser import parse_ptx
from qwengpu.simt.interp import Interpreter, _find_kernel
from qwengpu.spec import bind, parse_spec, read_outputs

HEADER = ".version 9.5\n.target sm_75\n.address_size 64\n"


def run_interp(module: Any, spec: Any, max_steps: int = 5_000_000) -> dict[str, np.ndarray]:
    fn = _find_kernel(module, spec.kernel)
    interp = Interpreter(module, fn.name, max_steps=max_steps)
    bound = bind(spec, interp.fn)
    interp.launch(spec.grid, spec.block, bound.param_bytes, bound.gmem, dynamic_shared=spec.shared_bytes)
    return read_outputs(spec, bound.gmem)


def both(ptx: str, spec: dict, *, allocate: bool = True, max_steps: int = 5_000_000):
    """(interp outputs or error text, machine outputs or error text, machine stats, program)."""
    module = parse_ptx(ptx if ptx.lstrip().startswith(".version") else HEADER + ptx)
    sp = parse_spec(spec)
    try:
        ref: Any = run_interp(module, sp, max_steps)
    except QwenGPUError as e:
        ref = f"{type(e).__name__}: {e}"
    try:
        got, st, prog = simulate(module, sp, allocate=allocate, max_steps=max_steps)
    except QwenGPUError as e:
        return ref, f"{type(e).__name__}: {e}", None, None
    return ref, got, st, prog


def assert_same(ref: Any, got: Any) -> None:
    """Bit-identical outputs, or identical error messages."""
    if isinstance(ref, str) or isinstance(got, str):
        assert ref == got
        return
    assert ref.keys() == got.keys()
    for k in ref:
        a, b = ref[k], got[k]
        if a.tobytes() != b.tobytes():
            ra, rb = a.view(np.uint8).reshape(len(a), -1), b.view(np.uint8).reshape(len(b), -1)
            bad = np.nonzero((ra != rb).any(axis=1))[0]
            i = int(bad[0])
            raise AssertionError(f"{k}[{i}]: interpreter {a[i]!r} machine {b[i]!r} ({len(bad)} differ)")


def u32(vals: list[int]) -> list[str]:
    return [f"0x{v & 0xFFFFFFFF:08x}" for v in vals]


def u64(vals: list[int]) -> list[str]:
    return [f"0x{v & 0xFFFFFFFFFFFFFFFF:016x}" for v in vals]


def binop_ptx(op: str, ta: str, tb: str, tc: str, extra_regs: str = "") -> str:
    """A kernel out[i] = op(a[i], b[i]); ``op`` uses {A} {B} {C} for the operand registers."""

    def reg(t: str, k: int) -> str:
        return {8: f"%rd{20 + k}", 4: f"%r{10 + k}", 2: f"%rs{1 + k}"}[_size(t)]

    A, B, C = reg(ta, 0), reg(tb, 1), reg(tc, 2)
    body = op.format(A=A, B=B, C=C)
    return (
        HEADER
        + f"""
.visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1, .param .u64 k_param_2)
{{
    .reg .pred %p<8>;
    .reg .b16 %rs<8>;
    .reg .b32 %r<24>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<32>;
    .reg .f64 %fd<8>;
    {extra_regs}
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    ld.param.u64 %rd3, [k_param_2];
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r1, %r2, %r3, %r1;
    mul.wide.u32 %rd7, %r1, {_size(ta)};
    add.s64 %rd8, %rd4, %rd7;
    ld.global.{ta} {A}, [%rd8];
    mul.wide.u32 %rd9, %r1, {_size(tb)};
    add.s64 %rd10, %rd5, %rd9;
    ld.global.{tb} {B}, [%rd10];
    {body}
    mul.wide.u32 %rd11, %r1, {_size(tc)};
    add.s64 %rd12, %rd6, %rd11;
    st.global.{tc} [%rd12], {C};
    ret;
}}
"""
    )


def _size(t: str) -> int:
    return {"8": 1, "16": 2, "32": 4, "64": 8}[t[1:]]


def binop_spec(a: list, b: list, ta: str, tb: str, tc: str) -> dict:
    """Spec for binop_ptx with n = len(a) threads (blocks of up to 32)."""
    n = len(a)
    assert len(b) == n and n % 32 == 0 or n <= 32
    blk = min(n, 32)
    st = {
        "u64": "u64*",
        "b64": "u64*",
        "s64": "i64*",
        "u32": "u32*",
        "b32": "u32*",
        "s32": "i32*",
        "f32": "f32*",
        "u16": "u16*",
        "s16": "i16*",
        "b16": "u16*",
    }

    def data(vals: list, t: str) -> list:
        if t.startswith("s") and _size(t) < 8:
            bits = _size(t) * 8
            return [((x + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1)) for x in vals]
        if t.startswith("s"):
            return [((x + 2**63) % 2**64) - 2**63 for x in vals]
        if t == "f32":
            return u32(vals)
        return [x % (1 << (8 * _size(t))) for x in vals] if _size(t) < 8 else [x % 2**64 for x in vals]

    return {
        "kernel": "k",
        "grid": max(1, n // blk),
        "block": blk,
        "args": [
            {"name": "a", "type": st[ta], "data": data(a, ta)},
            {"name": "b", "type": st[tb], "data": data(b, tb)},
            {"name": "out", "type": st[tc], "size": n},
        ],
        "outputs": ["out"],
    }
