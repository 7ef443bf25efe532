"""Run one f64 PTX form on the machine: the simulator's pair ops, or their integer expansions."""

from __future__ import annotations

from functools import cache

import numpy as np

from qwengpu.ptx.parser import parse_ptx
from qwengpu.spec import parse_spec

HEADER = ".version 9.5\n.target sm_75\n.address_size 64\n"
TEMPLATE = (
    HEADER
    + """
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pout)
{
  .reg .pred %p<4>; .reg .b32 %r<8>; .reg .b64 %rd<16>; .reg .f64 %fd<8>; .reg .f32 %f<4>;
  ld.param.u64 %rd1, [pa]; ld.param.u64 %rd2, [pb]; ld.param.u64 %rd3, [pc]; ld.param.u64 %rd4, [pout];
  cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd3, %rd3; cvta.to.global.u64 %rd4, %rd4;
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.u32 %rd5, %r4, 8;
  add.s64 %rd6, %rd1, %rd5; ld.global.f64 %fd1, [%rd6];
  add.s64 %rd7, %rd2, %rd5; ld.global.f64 %fd2, [%rd7];
  add.s64 %rd8, %rd3, %rd5; ld.global.f64 %fd3, [%rd8];
  and.b32 %r6, %r1, 1; setp.ne.u32 %p3, %r6, 0;
  mov.u64 %rd10, 0x1234567;
  BODY
  add.s64 %rd9, %rd4, %rd5; st.global.u64 [%rd9], %rd10;
  ret;
}
"""
)

#: PTX forms under test: the result goes to %rd10 (64 bits); %p3 = tid & 1 for predicate inputs
FORMS = {
    "add": "add.{r}.f64 %fd4, %fd1, %fd2; mov.b64 %rd10, %fd4;",
    "sub": "sub.{r}.f64 %fd4, %fd1, %fd2; mov.b64 %rd10, %fd4;",
    "mul": "mul.{r}.f64 %fd4, %fd1, %fd2; mov.b64 %rd10, %fd4;",
    "fma": "fma.{r}.f64 %fd4, %fd1, %fd2, %fd3; mov.b64 %rd10, %fd4;",
    "div": "div.{r}.f64 %fd4, %fd1, %fd2; mov.b64 %rd10, %fd4;",
    "rcp": "rcp.{r}.f64 %fd4, %fd1; mov.b64 %rd10, %fd4;",
    "sqrt": "sqrt.{r}.f64 %fd4, %fd1; mov.b64 %rd10, %fd4;",
    "min": "min.f64 %fd4, %fd1, %fd2; mov.b64 %rd10, %fd4;",
    "max": "max.f64 %fd4, %fd1, %fd2; mov.b64 %rd10, %fd4;",
    "neg": "neg.f64 %fd4, %fd1; mov.b64 %rd10, %fd4;",
    "abs": "abs.f64 %fd4, %fd1; mov.b64 %rd10, %fd4;",
    "setp": "setp.{r}.f64 %p1, %fd1, %fd2; selp.u64 %rd10, 1, 0, %p1;",
    "setp_bop": "setp.{r}.xor.f64 %p1, %fd1, %fd2, %p3; selp.u64 %rd10, 1, 0, %p1;",
    "d2f": "cvt.{r}.f32.f64 %f1, %fd1; mov.b32 %r5, %f1; cvt.u64.u32 %rd10, %r5;",
    "d2f_ftz": "cvt.{r}.ftz.f32.f64 %f1, %fd1; mov.b32 %r5, %f1; cvt.u64.u32 %rd10, %r5;",
    "f2d": "mov.b64 {{%r5, %r7}}, %fd1; mov.b32 %f1, %r5; cvt.f64.f32 %fd4, %f1; mov.b64 %rd10, %fd4;",
    "f2d_ftz": "mov.b64 {{%r5, %r7}}, %fd1; mov.b32 %f1, %r5; cvt.ftz.f64.f32 %fd4, %f1; "
    "mov.b64 %rd10, %fd4;",
    "s64": "mov.b64 %rd11, %fd1; cvt.{r}.f64.s64 %fd4, %rd11; mov.b64 %rd10, %fd4;",
    "u64": "mov.b64 %rd11, %fd1; cvt.{r}.f64.u64 %fd4, %rd11; mov.b64 %rd10, %fd4;",
    "s32": "mov.b64 {{%r5, %r7}}, %fd1; cvt.{r}.f64.s32 %fd4, %r5; mov.b64 %rd10, %fd4;",
    "u32": "mov.b64 {{%r5, %r7}}, %fd1; cvt.{r}.f64.u32 %fd4, %r5; mov.b64 %rd10, %fd4;",
    "to_s32": "cvt.{r}.s32.f64 %r5, %fd1; cvt.u64.u32 %rd10, %r5;",
    "to_u32": "cvt.{r}.u32.f64 %r5, %fd1; cvt.u64.u32 %rd10, %r5;",
    "to_s64": "cvt.{r}.s64.f64 %rd10, %fd1;",
    "to_u64": "cvt.{r}.u64.f64 %rd10, %fd1;",
    "to_s16": "cvt.{r}.s16.f64 %rs1, %fd1; cvt.u64.u16 %rd10, %rs1;",
    "rint": "cvt.{r}.f64.f64 %fd4, %fd1; mov.b64 %rd10, %fd4;",
    "guarded_add": "mov.f64 %fd4, %fd1; @%p3 add.{r}.f64 %fd4, %fd4, %fd2; mov.b64 %rd10, %fd4;",
    "guarded_div": "mov.f64 %fd4, %fd1; @!%p3 div.{r}.f64 %fd4, %fd2, %fd4; mov.b64 %rd10, %fd4;",
}


@cache
def module(form: str, r: str = "") -> object:
    body = FORMS[form].format(r=r).replace("..", ".")
    text = TEMPLATE.replace("BODY", body)
    if "%rs1" in body:
        text = text.replace(".reg .f32 %f<4>;", ".reg .f32 %f<4>; .reg .b16 %rs<4>;")
    return parse_ptx(text)


def spec(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> object:
    n = len(a)
    blk = min(n, 32)
    assert n % blk == 0
    return parse_spec({
        "kernel": "k", "grid": n // blk, "block": blk,
        "args": [*({"name": k, "type": "u64*", "data": [f"0x{int(x):016x}" for x in v]}
                   for k, v in zip("abc", (a, b, c), strict=True)),
                 {"name": "out", "type": "u64*", "size": n}],
        "outputs": ["out"],
    })  # fmt: skip


@cache
def program(form: str, r: str, weights: bool) -> object:
    """The allocated machine program of a form: pair ops (``weights`` False) or weight ops only."""
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.codegen.regalloc import allocate
    from qwengpu.codegen.soft import expand_for_weights, in_weights

    prog = lower_kernel(module(form, r), "k", [True] * 4)
    if weights:
        prog = expand_for_weights(prog)
        assert all(in_weights(x) for x in prog.code), [str(x) for x in prog.code if not in_weights(x)][:3]
    return allocate(prog)


def run(form: str, r: str, a, b=None, c=None, *, weights: bool, info: dict | None = None) -> np.ndarray:
    """out[i] for the lanes' operand bits (uint64): the simulator's pair ops (exact, ``isa.f64``)
    or, with ``weights``, the program the weights run (every op expanded to weight ops). Many
    lanes per launch: the machine's 1024-word memory limit is a launch limit, not the sequence's."""
    from qwengpu.isa.sim import MachineSim
    from qwengpu.simt.interp import _find_kernel
    from qwengpu.spec import bind, read_outputs

    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(a if b is None else b, dtype=np.uint64)
    c = np.asarray(a if c is None else c, dtype=np.uint64)
    m, sp = module(form, r), spec(a, b, c)
    prog = program(form, r, weights)
    bound = bind(sp, _find_kernel(m, "k"))
    st = MachineSim(prog).launch(sp.grid, sp.block, bound.param_bytes, bound.gmem)
    if info is not None:
        info.update(stats=st, program=prog)
    return np.asarray(read_outputs(sp, bound.gmem)["out"]).view(np.uint64)
