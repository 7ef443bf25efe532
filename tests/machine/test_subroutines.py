"""Subroutines: the ISA's ``call``/``ret`` in the simulator (divergent returns, guarded calls and
returns, nested routines, both layouts), register allocation across calls (liveness through the
routine, no clobbering, spilling), and soft.py's shared routines: every corpus kernel with every
routable expansion forced through a routine runs bit-identically to the interpreter with the same
PTX-level warp-instruction count; ``auto`` inlines what fits and shrinks what does not."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from machine_helpers import HEADER, binop_ptx, binop_spec, run_interp
from test_soft_lowering import GUARDED, edge_pairs, mulhi_ref, run_soft, words

import qwengpu.codegen.soft  # noqa: F401  (the entry point: registers every expander)
from qwengpu.codegen import softcore as soft  # the framework itself: its functions are monkeypatched
from qwengpu.codegen.lower import lower_kernel
from qwengpu.codegen.regalloc import CallGraph, allocate, liveness
from qwengpu.errors import MachineLimitError
from qwengpu.isa.instr import OPCODES, Imm, MInstr, P, R, encode, validate
from qwengpu.isa.program import Program
from qwengpu.isa.sim import MachineSim
from qwengpu.machine.circuit import MachineShape
from qwengpu.ptx.inline import inline_calls
from qwengpu.ptx.parser import parse_ptx
from qwengpu.runner import corpus, run_kernel
from qwengpu.simt.interp import Interpreter, _find_kernel
from qwengpu.spec import bind, parse_spec, read_outputs

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
ITEMS = corpus(KERNELS)
M32 = 0xFFFFFFFF
SLOW = {"prime_count", "layernorm"}  # ~40 s / ~10 s in the simulator with every op a call
_REF: dict[str, object] = {}

soft.route_floats()  # float ops routable too (what the default soft.py does once softfloat is final)


# ------------------------------------------------------------------------------ ISA
def test_call_ret_in_the_op_table() -> None:
    call = MInstr("call", (R(3),), (), {}, P(1), 17)
    ret = MInstr("ret", (), (R(3),))
    validate(call)
    validate(ret)
    assert encode(call) == [OPCODES["call"], 0b10001, 0, 3, 17]
    assert encode(ret) == [OPCODES["ret"], 0, 0, 3]
    with pytest.raises(ValueError, match="register"):
        validate(MInstr("ret", (), (Imm(4),)))
    with pytest.raises(ValueError, match="target"):
        validate(MInstr("call", (R(3),), ()))


# ------------------------------------------------------------------------------ hand-written programs
SCAFFOLD = (
    HEADER
    + """
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
    ret;
}
"""
)
NT = 64  # two warps


def assemble(block, bodies, where: str = "before", nregs: int = 64, npreds: int = 8) -> Program:
    """The scaffold kernel (out[tid] = v) with ``block(tid, v)`` inserted before its store (inside
    the store's PTX range) and the routine ``bodies`` before (``bra`` over them) or after the
    kernel. Labels: ``("@label", target=-k)``; branch/call targets -k refer to them."""
    module = parse_ptx(SCAFFOLD)
    base = lower_kernel(module, "k")
    st = next(pc for pc, x in enumerate(base.code) if x.op == "st")
    tid = next(x.d[0] for x in base.code if x.op == "s2r")
    v = base.code[st].s[1]
    code = list(base.code)
    seq = block(tid, v)
    kernel = code[:st] + seq + code[st:]
    prefix: list[MInstr] = []
    if where == "before":
        prefix = (
            [MInstr("bra", target=-999, ptx=0)]
            + [x for b in bodies for x in b]
            + [MInstr("@label", target=-999)]
        )
        items = prefix + kernel
    else:
        items = kernel + [x for b in bodies for x in b]
    label_pc: dict[int, int] = {}
    flat: list[MInstr] = []
    old_pc: dict[int, int] = {}  # scaffold pc -> new pc
    for x in items:
        if x.op == "@label":
            label_pc[x.target] = len(flat)
            continue
        if any(x is y for y in code):
            old_pc[code.index(x)] = len(flat)
        flat.append(x)
    out = []
    for x in flat:
        y = MInstr(x.op, x.d, x.s, dict(x.m), x.guard, x.target, x.ptx if x.ptx >= 0 else 0)
        if y.target is not None:
            y.target = label_pc[y.target] if y.target < 0 else old_pc[y.target]
        validate(y)
        out.append(y)
    n = len(code)
    old_pc[n] = old_pc[n - 1] + 1
    ranges = []
    nblock = sum(1 for x in seq if x.op != "@label")
    for a, b in base.ptx_ranges:  # the block belongs to the store's PTX instruction
        ranges.append(tuple(old_pc[x] - (nblock if x == st else 0) for x in (a, b)))
    return Program(
        base.name, out, base.ptx, base.layout, base.bank_slots, nregs, npreds, ptx_ranges=ranges,
        ptx_labels=base.ptx_labels,
    )  # fmt: skip


def launch(prog: Program, nt: int = NT, alloc: bool = False, **kw):
    if alloc:
        prog = allocate(prog, **kw)
    module = parse_ptx(SCAFFOLD)
    spec = parse_spec(
        {"kernel": "k", "grid": 1, "block": nt, "args": [{"name": "out", "type": "u32*", "size": nt}]}
    )
    bound = bind(spec, inline_calls(module, _find_kernel(module, "k")))
    st = MachineSim(prog).launch(spec.grid, spec.block, bound.param_bytes, bound.gmem)
    return [int(x) for x in read_outputs(spec, bound.gmem)["out"]], st, prog


def interp_ptx_count(nt: int = NT) -> int:
    module = parse_ptx(SCAFFOLD)
    spec = parse_spec(
        {"kernel": "k", "grid": 1, "block": nt, "args": [{"name": "out", "type": "u32*", "size": nt}]}
    )
    it = Interpreter(module, "k")
    bound = bind(spec, it.fn)
    return it.launch(spec.grid, spec.block, bound.param_bytes, bound.gmem).warp_instructions


def lbl(k: int) -> MInstr:
    return MInstr("@label", target=-k)


def I(op, d=(), s=(), guard=None, target=None, **m) -> MInstr:  # noqa: E743
    return MInstr(op, tuple(d), tuple(s), dict(m), guard, target, 0)


# routine F (entry label 1): res = 3 * x + 1, x in r40, res in r41, link r42
F = [lbl(1), I("shl", [R(43)], [R(40), Imm(1)]), I("add", [R(43)], [R(43), R(40)]),
     I("add", [R(41)], [R(43), Imm(1)]),
     I("ret", s=[R(42)])]  # fmt: skip


def f(x: int) -> int:
    return (3 * x + 1) & M32


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("alloc", [False, True])
def test_call_and_return(where: str, alloc: bool) -> None:
    def block(tid, v):
        return [I("mov", [R(40)], [tid]), I("call", [R(42)], target=-1), I("mov", [v], [R(41)])]

    got, st, _ = launch(assemble(block, [F], where), alloc=alloc)
    assert got == [f(t) for t in range(NT)]
    assert st.ptx_warp_instructions == interp_ptx_count()
    assert st.divergent_branches == 0


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("alloc", [False, True])
def test_divergent_returns_from_two_sites(where: str, alloc: bool) -> None:
    """Lanes call F from two sites; with the bodies after the kernel the two groups meet inside F
    and return to different pcs (the warp splits at ``ret`` and reconverges by min-PC)."""

    def block(tid, v):
        p = P(0)
        return [
            I("setp", [p], [tid, Imm(13)], cmp="lt", sign="u"),
            I("bra", guard=p.inv(), target=-10),
            I("mov", [R(40)], [tid]),
            I("call", [R(42)], target=-1),
            I("mov", [v], [R(41)]),
            I("bra", target=-11),
            lbl(10),
            I("add", [R(40)], [tid, Imm(100)]),
            I("call", [R(42)], target=-1),
            I("add", [v], [R(41), Imm(1000)]),
            lbl(11),
        ]

    got, st, _ = launch(assemble(block, [F], where), alloc=alloc)
    assert got == [f(t) if t < 13 else f(t + 100) + 1000 for t in range(NT)]
    assert st.ptx_warp_instructions == interp_ptx_count()
    if where == "after":
        rets = [pc for pc, x in enumerate(st_prog(block, where).code) if x.op == "ret"]
        assert rets and st.divergent_branches >= 2  # the bra, and the ret of the merged warp


def st_prog(block, where):
    return assemble(block, [F], where)


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("alloc", [False, True])
def test_guarded_call(where: str, alloc: bool) -> None:
    """``@p call``: lanes whose guard is false fall through and keep their link register."""

    def block(tid, v):
        p = P(0)
        return [
            I("and", [R(44)], [tid, Imm(5)]),
            I("setp", [p], [R(44), Imm(0)], cmp="ne", sign="u"),
            I("mov", [v], [Imm(7)]),
            I("mov", [R(40)], [tid]),
            I("call", [R(42)], guard=p, target=-1),
            I("mov", [v], [R(41)], guard=p),
        ]

    got, st, _ = launch(assemble(block, [F], where), alloc=alloc)
    assert got == [f(t) if t & 5 else 7 for t in range(NT)]
    if where == "before":
        assert st.ptx_warp_instructions == interp_ptx_count()
    else:  # lanes that skip the call run ahead to the store and exit: issued twice per warp
        assert st.ptx_warp_instructions > interp_ptx_count()
    for mask, want in ((0, lambda t: 7), (0xFFFFFFFF, f)):  # guard false / true for every lane

        def blk(tid, v, mask=mask):
            return [I("mov", [v], [Imm(7)]), I("mov", [R(40)], [tid]),
                    I("call", [R(42)], guard=P(-1, mask == 0), target=-1),
                    I("mov", [v], [R(41)], guard=P(-1, mask == 0))]  # fmt: skip

        got, _, _ = launch(assemble(blk, [F], where), alloc=alloc)
        assert got == [want(t) for t in range(NT)]


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("alloc", [False, True])
def test_guarded_early_return_and_nested_calls(where: str, alloc: bool) -> None:
    """G (label 2) returns early for x < 5 (``@q ret``), else calls F twice: x -> f(f(x)) + t;
    values live across the calls (tid, x) must survive F's temporaries."""
    G = [
        lbl(2),
        I("mov", [R(50)], [R(45)]),  # G's param r45, result r46, link r47
        I("setp", [P(1)], [R(45), Imm(5)], cmp="lt", sign="u"),
        I("mov", [R(46)], [R(45)], guard=P(1)),
        I("ret", s=[R(47)], guard=P(1)),
        I("mov", [R(40)], [R(45)]),
        I("call", [R(42)], target=-1),
        I("mov", [R(40)], [R(41)]),
        I("call", [R(42)], target=-1),
        I("mov", [R(46)], [R(41)]),
        I("add", [R(46)], [R(46), R(50)]),
        I("ret", s=[R(47)]),
    ]

    def block(tid, v):
        return [
            I("mul", [R(60)], [tid, Imm(7)]),
            I("mov", [R(45)], [tid]),
            I("call", [R(47)], target=-2),
            I("add", [v], [R(46), R(60)]),
            I("mov", [R(45)], [R(60)]),
            I("call", [R(47)], target=-2),
            I("add", [v], [v, R(46)]),
        ]

    def g(x):
        return x if x < 5 else (f(f(x)) + x) & M32

    bodies = [F, G] if where == "before" else [G, F]
    got, st, _ = launch(assemble(block, bodies, where), alloc=alloc)
    assert got == [(g(t) + 7 * t + g(7 * t)) & M32 for t in range(NT)]
    if where == "before":  # (after the kernel, lanes returning early from G run ahead)
        assert st.ptx_warp_instructions == interp_ptx_count()


def test_lanes_inside_a_routine_run_first_when_it_is_below_the_kernel() -> None:
    """With the bodies before the kernel, lanes skipping a call never run ahead of lanes in it:
    every warp instruction of the kernel after the call is issued once (no split)."""

    def block(tid, v):
        p = P(0)
        return [
            I("setp", [p], [tid, Imm(3)], cmp="lt", sign="u"),
            I("mov", [v], [Imm(9)]),
            I("mov", [R(40)], [tid]),
            I("call", [R(42)], guard=p, target=-1),
            I("mov", [v], [R(41)], guard=p),
        ]

    got, before, _ = launch(assemble(block, [F], "before"))
    got2, after, _ = launch(assemble(block, [F], "after"))
    assert got == got2 == [f(t) if t < 3 else 9 for t in range(NT)]
    # the exit after the call: issued once per warp before, twice in warp 0 after
    assert before.ptx_warp_instructions == interp_ptx_count() < after.ptx_warp_instructions
    assert before.issues_by_ptx[-1] == 2 and after.issues_by_ptx[-1] == 3
    assert before.divergent_branches == 1  # only the guarded call splits warp 0


# ------------------------------------------------------------------------------ allocation
def _live_across_program():
    """Eight values live across two calls of a routine with many temporaries."""
    H = [lbl(3)] + [I("add", [R(100 + j)], [R(45), Imm(j + 1)]) for j in range(12)]
    H += [I("xor", [R(46)], [R(100), R(101)])] + [
        I("xor", [R(46)], [R(46), R(100 + j)]) for j in range(2, 12)
    ]
    H += [I("ret", s=[R(47)])]

    def block(tid, v):
        out = [I("add", [R(80 + j)], [tid, Imm(31 * j + 1)]) for j in range(8)]
        out += [I("mov", [R(45)], [tid]), I("call", [R(47)], target=-3), I("mov", [R(90)], [R(46)])]
        out += [
            I("add", [R(45)], [tid, Imm(1)]),
            I("call", [R(47)], target=-3),
            I("add", [R(90)], [R(90), R(46)]),
        ]
        for j in range(8):
            out.append(I("xor", [R(90)], [R(90), R(80 + j)]))
        out.append(I("mov", [v], [R(90)]))
        return out

    def h(x):
        acc = (x + 1) ^ (x + 2)
        for j in range(2, 12):
            acc ^= x + j + 1
        return acc & M32

    def want(t):
        r = (h(t) + h(t + 1)) & M32
        for j in range(8):
            r ^= t + 31 * j + 1
        return r

    return assemble(block, [H], "before", nregs=120), want


def test_values_live_across_calls_never_share_with_routine_temporaries() -> None:
    prog, want = _live_across_program()
    live_in, _ = liveness(prog.code, R)
    cg = CallGraph(prog.code)
    (entry,) = cg.sites
    for pc in cg.body[entry]:
        for j in range(8):
            assert live_in[pc] >> (80 + j) & 1, (pc, 80 + j)  # through values live in the body
    # context-sensitive at call sites: r90 (live after the second call only) is not live before the first
    first_call = cg.sites[entry][0]
    assert not live_in[first_call] >> 90 & 1
    assert not live_in[0] >> 90 & 1 and not live_in[0] >> 46 & 1  # no spurious zero-initialization
    got, _, al = launch(prog, alloc=True)
    assert got == [want(t) for t in range(NT)]
    body = set(CallGraph(al.code).body[next(iter(CallGraph(al.code).sites))])
    written = {x.n for pc in body for ins in [al.code[pc]] for x in ins.d if isinstance(x, R)}
    # the registers of the eight through values are not written inside the routine
    through = set()
    for ins in al.code:
        if ins.op == "add" and isinstance(ins.s[1], Imm) and (ins.s[1].v - 1) % 31 == 0 and ins.s[1].v <= 218:
            if not any(ins is al.code[pc] for pc in body):
                through.add(ins.d[0].n)
    assert through and not through & written


@pytest.mark.parametrize("k", [16, 19, 21])
def test_spilling_across_calls(k: int) -> None:
    prog, want = _live_across_program()
    got, _, al = launch(prog, alloc=True, k_regs=k)
    assert got == [want(t) for t in range(NT)]
    assert al.nregs <= k and al.spill_words > 0


def test_recursion_is_refused() -> None:
    code = [I("call", [R(1)], target=2), I("exit"), I("call", [R(2)], target=2), I("ret", s=[R(2)])]
    with pytest.raises(ValueError, match="recursive"):
        CallGraph(code)


# ------------------------------------------------------------------------------ soft.py routines
def _ref(cu: Path, spec: Path):
    if cu.stem not in _REF:
        _REF[cu.stem] = run_kernel(cu, spec, engine="interp")
    return _REF[cu.stem]


def _check(cu: Path, spec: Path, routines: str, outline: str = "auto", **kw):
    ref = _ref(cu, spec)
    try:
        res = soft.run_for_weights(cu, spec, routines=routines, outline=outline, **kw)
    except MachineLimitError as e:
        if "approximate instruction" in str(e):
            pytest.skip("not lowered (approximate)")
        raise
    for name, want in ref.outputs.items():  # type: ignore[attr-defined]
        got = res.outputs[name]
        assert got.tobytes() == want.tobytes(), f"{name}: routines {got} interpreter {want}"
    assert res.stats["ptx_warp_instructions"] == ref.stats["warp_instructions"]  # type: ignore[attr-defined]
    return res


def _params(names):
    """Every other corpus kernel (and the two longest) in the slow run: the default run keeps half of
    the corpus with every expansion a call (17 s for all of it)."""
    return [pytest.param(c, s, marks=pytest.mark.slow) if c.stem in SLOW or k % 2 else (c, s)
            for k, (c, s) in enumerate(names)]


@pytest.mark.parametrize("cu,spec", _params(ITEMS), ids=[c.stem for c, _ in ITEMS])
def test_corpus_kernel_with_every_expansion_a_call(cu: Path, spec: Path) -> None:
    """The tests' option: every routable expansion (mul, mulhi, float ops) calls its specialized
    routine and every repeated window of the lowered code is outlined."""
    res = _check(cu, spec, "always", "always")
    routable = {"mul", "mulhi", *soft.ROUTERS}
    left = [x for x in res.program.code if x.op in routable]
    assert not left


GENERIC = [
    "div_rn",
    "rsqrt_norm",
    "gcd",
    "mulhi",
    "rounding_fma",
    "matmul",
    "int_divmod",
    "sin_cos",
    "sqrt_rn",
]


@pytest.mark.parametrize("name", GENERIC)
def test_corpus_kernel_with_generic_routines(name: str) -> None:
    """One body per op and modifiers (immediates passed in registers, no static bounds)."""
    res = _check(KERNELS / f"{name}.cu", KERNELS / f"{name}.json", "generic")
    assert sum(1 for x in res.program.code if x.op == "call") > 0


FIT = ["mulhi", "matmul", "div_s64", "rounding_fma"]
#: the ROM size the routing tests fit programs into (the machine's first ROM; a budget small
#: enough that these kernels need routines)
SMALL = 512


@pytest.mark.parametrize("name", FIT)
def test_auto_routes_until_it_fits_the_rom(name: str) -> None:
    cu = KERNELS / f"{name}.cu"
    never = len(allocate(soft.expand_for_weights(_lowered(name), routines="never", outline="never")).code)
    res = _check(cu, cu.with_suffix(".json"), "auto", budget=SMALL)
    assert res.stats["machine_instructions"] <= SMALL < never
    assert any(x.op == "call" for x in res.program.code)


def test_auto_inlines_what_fits() -> None:
    for name in ("add_ties", "saxpy", "fcompare"):
        res = _check(KERNELS / f"{name}.cu", KERNELS / f"{name}.json", "auto")
        assert not any(x.op in ("call", "ret") for x in res.program.code)
        assert res.stats["machine_instructions"] <= soft.ROM_BUDGET


#: kernels that fit the ROM only since float ops share their rounding-independent parts
#: (softfloat ``fadd.core``/``fmul.core``/``ffma.core``, ``fprod``: one body for every rounding
#: mode, and for fmul and ffma) and the allocator coalesces call-site copies better
SHARED_PARTS = ["rounding_add_mul", "rounding_fma"]  # rsqrt_norm: one machine op since 9.28


@pytest.mark.parametrize("name", SHARED_PARTS)
def test_engine_accepts_kernels_sharing_float_parts(name: str, monkeypatch) -> None:
    """``engine.prepare`` for a 512-row ROM accepts the kernel, the program routes a shared
    float part, and the simulator over the engine's very program gives the interpreter's bits and
    PTX-level warp-instruction count."""
    from qwengpu.codegen.softcore import unit_options
    from qwengpu.codegen.softmem import run_weights
    from qwengpu.runtime import engine

    built: list[str] = []
    instance = soft._routine_instance

    def spy(rt, fr, depth):  # noqa: ANN001, ANN202
        if rt.name not in fr.routines:
            built.append(rt.name)
        return instance(rt, fr, depth)

    monkeypatch.setattr(soft, "_routine_instance", spy)
    cu, js = KERNELS / f"{name}.cu", KERNELS / f"{name}.json"
    _, prog, _, _, _ = engine.prepare(cu, js, shape=MachineShape(rom_rows=SMALL))
    assert len(prog.code) <= SMALL
    assert any(".core[" in r or r == "fprod" for r in built), built
    ref = _ref(cu, js)
    units = unit_options(MachineShape(rom_rows=SMALL))  # the lowering the engine runs for that shape
    res = run_weights(cu, js, options=soft.Options(budget=SMALL, **units))
    assert [str(x) for x in res.program.code] == [str(x) for x in prog.code]
    for k, want in ref.outputs.items():  # type: ignore[attr-defined]
        assert res.outputs[k].tobytes() == want.tobytes(), f"{k}: weights {res.outputs[k]} interpreter {want}"
    assert res.stats["ptx_warp_instructions"] == ref.stats["warp_instructions"]  # type: ignore[attr-defined]


def _lowered(name: str) -> Program:
    from qwengpu.cuda import compile_file
    from qwengpu.runner import COMPILE_OPTIONS
    from qwengpu.spec import load_spec

    spec = load_spec(KERNELS / f"{name}.json")
    module = parse_ptx(compile_file(KERNELS / f"{name}.cu", options=COMPILE_OPTIONS))
    fn = _find_kernel(module, spec.kernel)
    return lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])


def test_routine_bodies_once_and_program_invariants() -> None:
    prog = _lowered("rsqrt_norm")
    ex = soft.expand_for_weights(prog, routines="always")
    cg = CallGraph(ex.code)
    assert ex.code[0].op == "bra" and len(cg.sites) == sum(1 for x in ex.code if x.op == "ret")
    kernel = ex.code[0].target
    assert all(t < kernel for t in cg.sites)  # bodies below the kernel
    assert all(len(s) >= 1 for s in cg.sites.values()) and max(len(s) for s in cg.sites.values()) > 1
    starts = [a for a, b in ex.ptx_ranges if b > a]
    assert min(starts) == kernel and max(b for _, b in ex.ptx_ranges) == len(ex.code)
    for a, b in ex.ptx_ranges:  # ranges stay inside the kernel and in order
        assert kernel <= a <= b <= len(ex.code)
    for ins in ex.code:
        validate(ins)
    assert not soft.unsupported_ops(ex) or set(soft.unsupported_ops(ex)) <= {"st.global.1"}
    al = allocate(ex)
    assert al.code[0].op in ("bra", "mov", "plop") and al.nregs <= 32
    assert len(CallGraph(al.code).sites) == len(cg.sites)


# ------------------------------------------------------------------------------ guards, explicit routines
@pytest.mark.parametrize("mask", [1, 5, 0, 0xFFFFFFFF])
@pytest.mark.parametrize(
    "op,fn",
    [
        ("mul.lo.s32 {C}, {A}, {B};", lambda x, y: (x * y) & M32),
        ("mad.lo.s32 {C}, {A}, {B}, {B};", lambda x, y: (x * y + y) & M32),
        ("mul.hi.s32 {C}, {A}, {B};", lambda x, y: mulhi_ref(x, y, True)),
        ("mul.hi.u32 {C}, {A}, -1431655765;", lambda x, y: mulhi_ref(x, 0xAAAAAAAB, False)),
    ],
)
@pytest.mark.parametrize("routines", ["always", "generic"])
def test_guarded_routed_multiply(op: str, fn, mask: int, routines: str) -> None:
    a, b = edge_pairs(mask + 29, 96)
    body = GUARDED.format(mask=mask, op=op)
    opts = soft.Options(routines=routines, only=frozenset(soft.INTEGER_EXPANDED))
    got, _, prog = run_soft(
        binop_ptx(body, "u32", "u32", "u32"), binop_spec(a, b, "u32", "u32", "u32"), options=opts
    )
    assert not isinstance(got, str), got
    want = [fn(x, y) if i & mask else 0x55555555 for i, (x, y) in enumerate(zip(a, b, strict=True))]
    assert words(got) == want
    assert any(x.op == "call" for x in prog.code)


@pytest.mark.parametrize("routines", ["always", "never", "auto"])
def test_explicit_routine_from_an_expander(monkeypatch, routines: str) -> None:
    """An expander calling an explicit ``Routine`` whose body uses a routable op (nested calls):
    one shared body per program with ``always``, the body inline with ``never``/``auto``."""

    def body(s, ps, rs):
        lo = s.op("mul", ps[0], ps[1])  # routable: a nested routine under ``always``
        hi = s.fr.r()
        soft.mulhi_into(s, hi, ps[0], ps[1], "u")
        s.into(rs[0], "xor", lo, hi)

    inner = soft.Routine("test.lo_xor_hi", "rr", "r", body)

    def expand_mulhi(ins, fr):
        s = soft.Seq(fr)
        (r,) = s.call(inner, *ins.s)
        s.into(ins.d[0], "mov", r)
        return s.code

    monkeypatch.setitem(soft.EXPANDERS, "mulhi", expand_mulhi)
    monkeypatch.delitem(soft.ROUTERS, "mulhi")
    a, b = edge_pairs(3, 64)
    line = "mul.hi.u32 {C}, {A}, {B};\n    mul.hi.u32 %r21, {C}, {B};\n    xor.b32 {C}, {C}, %r21;"
    opts = soft.Options(routines=routines, only=frozenset(soft.INTEGER_EXPANDED), budget=SMALL)
    got, _, prog = run_soft(
        binop_ptx(line, "u32", "u32", "u32"), binop_spec(a, b, "u32", "u32", "u32"), options=opts
    )
    assert not isinstance(got, str), got

    def m(x, y):
        return ((x * y) & M32) ^ mulhi_ref(x, y, False)

    assert words(got) == [m(x, y) ^ m(m(x, y), y) for x, y in zip(a, b, strict=True)]
    cg = CallGraph(prog.code)
    if routines == "always":
        assert sorted(len(v) for v in cg.sites.values())[-1] == 2  # the explicit routine: 2 sites
        assert sum(1 for x in prog.code if x.op == "ret") == len(cg.sites) >= 2  # + its nested mul
    elif routines == "never":
        assert not cg.sites
    else:  # inline it would not fit: auto shares the explicit routine
        assert len(prog.code) <= SMALL and cg.sites


def test_options_reject_unknown_mode() -> None:
    with pytest.raises(ValueError, match="routines"):
        soft.expand_for_weights(_lowered("mulhi"), routines="sometimes")


def test_random_operands_through_generic_float_routines() -> None:
    """fma/mul/add with random and special operands, every float op a generic routine."""
    rng = random.Random(11)
    vals = [rng.getrandbits(32) for _ in range(64)]
    vals[:6] = [0, 0x80000000, 0x7F800000, 0x7FC00000, 0x00000001, 0x3F800000]
    for line in ("fma.rn.f32 {C}, {A}, {B}, {A};", "mul.rz.f32 {C}, {A}, {B};", "add.rm.f32 {C}, {A}, {B};"):
        module = parse_ptx(binop_ptx(line, "f32", "f32", "f32"))
        sp = parse_spec(binop_spec(vals, vals[::-1], "u32", "u32", "u32"))
        ref = run_interp(module, sp)
        got, _, prog = soft.simulate_for_weights(module, sp, routines="generic")
        assert np.asarray(got["out"]).tobytes() == np.asarray(ref["out"]).tobytes(), line
        assert any(x.op == "call" for x in prog.code)


PARTS = frozenset(
    {
        f"{op}.core[ftz={ftz},sat={sat}]"
        for op in ("fadd", "fmul", "ffma")
        for ftz in (False, True)
        for sat in (False, True)
    }
    | {"fprod"}
)


@pytest.mark.parametrize(
    "line",
    [
        "fma.rn.f32 {C}, {A}, {B}, {A};",
        "fma.rm.f32 {C}, {A}, {B}, {B};",
        "fma.rp.ftz.sat.f32 {C}, {A}, {B}, {A};",
        "mul.rz.f32 {C}, {A}, {B};",
        "mul.rm.ftz.f32 {C}, {A}, {B};",
        "mul.rn.sat.f32 {C}, {A}, {B};",
        "add.rm.f32 {C}, {A}, {B};",
        "sub.rp.f32 {C}, {A}, {B};",
        "add.rn.ftz.sat.f32 {C}, {A}, {B};",
    ],
)
def test_random_operands_through_shared_float_parts(line: str) -> None:
    """fma/mul/add/sub with random and special operands, their rounding-independent cores and the
    shared significand product routed (``Options.routed``), the rounding inline."""
    rng = random.Random(13)
    special = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x807FFFFF, 0x3F800000,
               0xBF800000, 0x7F7FFFFF, 0x00800000, 0x33800000]  # fmt: skip
    a = special * len(special) + [rng.getrandbits(32) for _ in range(112)]
    b = [x for x in special for _ in special] + [rng.getrandbits(32) for _ in range(112)]
    module = parse_ptx(binop_ptx(line, "f32", "f32", "f32"))
    sp = parse_spec(binop_spec(a, b, "u32", "u32", "u32"))
    ref = run_interp(module, sp)
    got, _, prog = soft.simulate_for_weights(
        module, sp, options=soft.Options(routines="never", outline="never", routed=PARTS)
    )
    assert np.asarray(got["out"]).tobytes() == np.asarray(ref["out"]).tobytes(), line
    bodies = sum(1 for x in prog.code if x.op == "ret")
    assert bodies == (1 if line.startswith(("add", "sub")) else 2)  # the core (+ fprod for mul/fma)


# ------------------------------------------------------------------------------ outlined windows
REMS = """
    rem.s64 %rd26, {A}, {B};
    rem.s64 %rd27, {B}, {A};
    add.s64 %rd28, %rd26, %rd27;
    rem.s64 {C}, %rd28, {A};
"""


@pytest.mark.parametrize("routines", [pytest.param("never", marks=pytest.mark.slow), "always"])  # never: 10 s
def test_repeated_sequence_is_outlined(routines: str) -> None:
    """Three ``rem.s64`` (lowered: ~80 instructions each, with a loop) share one window body; the
    results are the interpreter's on random and edge operands (no zero divisor). (Until 9.28 the
    example was ``rsqrt.approx.f32``, now one machine op.)"""
    rng = random.Random(4)
    a = [rng.getrandbits(64) | 1 for _ in range(64)]
    b = [rng.getrandbits(rng.choice((8, 33, 64))) | 1 for _ in range(64)]
    a[:5], b[:5] = (
        [1, (1 << 63), (1 << 64) - 1, 3, (1 << 63) - 1],
        [(1 << 64) - 1, 7, (1 << 63), (1 << 64) - 1, 1],
    )
    module = parse_ptx(binop_ptx(REMS, "u64", "u64", "u64"))
    sp = parse_spec(binop_spec(a, b, "u64", "u64", "u64"))
    prog = lower_kernel(module, "k", [True, True, True])
    wins = soft.find_windows(prog)
    big = max(wins.values(), key=lambda w: w.size)
    assert big.size >= 70 and len(big.occ) == 3
    ref = run_interp(module, sp)
    got, st, ex = soft.simulate_for_weights(module, sp, routines=routines, outline="always")
    assert np.asarray(got["out"]).tobytes() == np.asarray(ref["out"]).tobytes()
    cg = CallGraph(ex.code)
    assert max(len(v) for v in cg.sites.values()) >= 3
    inline = allocate(soft.expand_for_weights(prog, routines=routines, outline="never"))
    assert len(ex.code) < len(inline.code)  # (the division's core is a routine either way)


def test_windows_respect_ptx_ranges_and_purity() -> None:
    prog = _lowered("int_divmod")
    code = prog.code
    for name, w in soft.find_windows(prog).items():
        for st, ln, args, dsts in w.occ:
            (k,) = {
                next(i for i, (a, b) in enumerate(prog.ptx_ranges) if a <= pc < b)
                for pc in range(st, st + ln)
            }
            assert not any(code[pc].op in soft.IMPURE for pc in range(st, st + ln)), name
            assert len(args) == len(w.routine.params) and len(dsts) == len(w.routine.results)
