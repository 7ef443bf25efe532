"""What float ops cost as integer sequences (``qwengpu/codegen/softfloat.py``).

    python bench/softfloat_cost.py             # per op form: static / dynamic / live temporaries (~30 s)
    python bench/softfloat_cost.py --corpus    # + every float kernel of the corpus before/after (~1 min)
    python bench/softfloat_cost.py --json
    python bench/softfloat_cost.py --f64       # the f64 pair ops of softfloat64.py instead (~1 min)
    python bench/softfloat_cost.py --adders    # mul/fma.rn on the adders' fast path vs the sequence (~5 s)

Per op form (the machine op with its modifiers, as the lowering emits it): ``static`` = machine
instructions of its integer sequence (all ``soft.WEIGHT_OPS``), ``dynamic`` = machine warp
instructions issued per warp for one op, measured by the simulator (64 threads = 2 warps, random
operands; equal to static for the branch-free default), ``regs``/``preds`` = the most
temporaries live at once in the sequence. For fmul and ffma also the other shapes of the
significand product (``softfloat.MUL_SHAPE``): ``loop`` (an 8-trip loop) and ``mul`` (``mulhi``
+ ``mul`` expanded by ``soft.expand_for_weights``). ``imm`` = the same op with a constant second
operand (folded while the sequence is built).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "machine"))

import test_softfloat as tsf  # noqa: E402

from qwengpu.codegen import softfloat as sf  # noqa: E402
from qwengpu.isa.instr import MInstr, P, R  # noqa: E402

FORMS: list[tuple[str, dict]] = [
    ("fadd", {}), ("fadd", {"rnd": "rz"}), ("fadd", {"rnd": "rm"}), ("fadd", {"rnd": "rp"}),
    ("fadd", {"ftz": True, "sat": True}), ("fsub", {}),
    ("fmul", {}), ("fmul", {"rnd": "rz"}), ("fmul", {"rnd": "rp"}), ("fmul", {"ftz": True, "sat": True}),
    ("ffma", {}), ("ffma", {"rnd": "rz"}), ("ffma", {"rnd": "rm"}), ("ffma", {"ftz": True, "sat": True}),
    ("fmin", {}), ("fmax", {}), ("fmax", {"ftz": True}),
    ("fsetp", {"cmp": "lt"}), ("fsetp", {"cmp": "equ", "bop": "and"}),
    ("fsetp", {"cmp": "ne", "ftz": True}), ("fsetp", {"cmp": "nan"}),
    ("i2f", {"sign": "u"}), ("i2f", {"sign": "s"}),
    ("i2f", {"sign": "u", "rnd": "rz"}), ("i2f", {"sign": "s", "rnd": "rp"}),
    ("f2i", {"sign": "s", "irnd": "rni"}), ("f2i", {"sign": "s", "irnd": "rzi"}),
    ("f2i", {"sign": "u", "irnd": "rzi"}), ("f2i", {"sign": "s", "irnd": "rmi", "ftz": True}),
    ("frnd", {"irnd": "rni"}), ("frnd", {"irnd": "rzi"}), ("frnd", {"irnd": "rpi"}),
    ("frnd", {"sat": True}), ("frnd", {"ftz": True}),
    ("fdiv", {}), ("fdiv", {"rnd": "rz"}), ("fdiv", {"ftz": True}),
    ("fsqrt", {}), ("fsqrt", {"rnd": "rm"}), ("fsqrt", {"ftz": True}),
    ("fex2", {}), ("fex2", {"ftz": True}),
]  # fmt: skip


def name(op: str, mods: dict) -> str:
    return ".".join(
        [op, *(str(v) if v is not True else k for k, v in mods.items() if v not in (False, None))]
    )


def live_temps(seq: list[MInstr]) -> tuple[int, int]:
    """Most temporaries (registers, predicates) live at once in a straight-line sequence (defined
    inside it and still read later; the destination and the sources are not counted)."""
    defined = {d for x in seq for d in x.d}
    last: dict[object, int] = {}
    for i, x in enumerate(seq):
        for v in (*x.s, x.guard):
            if v in defined:
                last[v] = i
            if isinstance(v, P) and P(v.n) in defined:
                last[P(v.n)] = i
    first: dict[object, int] = {}
    for i, x in enumerate(seq):
        for d in x.d:
            first.setdefault(d, i)
    best = (0, 0)
    for i in range(len(seq)):
        live = [v for v in last if first.get(v, 1 << 30) <= i < last[v]]
        best = (
            max(best[0], sum(isinstance(v, R) for v in live)),
            max(best[1], sum(isinstance(v, P) for v in live)),
        )
    return best


def sequence(op: str, mods: dict, imm: int | None = None) -> list[MInstr]:
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.codegen.soft import Fresh
    from qwengpu.isa.instr import Imm

    fr = Fresh(lower_kernel(tsf._module(), "k", [True] * 4))
    n = {"ffma": 3, "fsetp": 2}.get(op, 1 if op in tsf.UNARY else 2)
    srcs: list = [R(1000 + i) for i in range(n)]
    if imm is not None:
        srcs[1] = Imm(imm)
    d = P(900) if op == "fsetp" else R(999)
    if mods.get("bop"):
        srcs.append(P(901))
    return sf.FLOAT_EXPANDERS[op](MInstr(op, (d,), tuple(srcs), dict(mods)), fr)


def dynamic(op: str, mods: dict, *, weights: bool = False, imm: int | None = None) -> float:
    """Machine warp instructions issued per warp for the op (random operands, 2 warps)."""
    rng = np.random.default_rng(0)
    a, b, c = tsf.operands(op, rng, 64)
    info: dict = {}
    kw = {"imm": {1: imm}} if imm is not None else {}
    tsf.machine(op, mods, a, b, c, weights=weights, info=info, **kw)
    st, own = info["stats"], info["ptx"]
    return st.machine_by_ptx[own] / 2


def rows() -> list[dict]:
    out = []
    for op, mods in FORMS:
        seq = sequence(op, mods)
        regs, preds = live_temps(seq)
        row = {
            "form": name(op, mods),
            "static": len(seq),
            "dynamic": dynamic(op, mods),
            "regs": regs,
            "preds": preds,
        }
        if op != "fsetp" and op not in tsf.UNARY:
            row["imm"] = len(sequence(op, mods, imm=0x40400000))
        if op in ("fmul", "ffma") and not mods:
            for shape in ("loop", "mul"):
                saved = sf.MUL_SHAPE
                sf.MUL_SHAPE = shape
                try:
                    from qwengpu.codegen.soft import expand_for_weights

                    row[f"{shape}_dynamic"] = dynamic(op, mods, weights=shape == "mul")
                    info: dict = {}
                    tsf.machine(op, mods, *tsf.operands(op, np.random.default_rng(0), 32), info=info)
                    prog = info["program"]
                    if shape == "mul":
                        prog = expand_for_weights(prog)
                    row[f"{shape}_static"] = sum(1 for x in prog.code if x.ptx == info["ptx"])
                finally:
                    sf.MUL_SHAPE = saved
        out.append(row)
    return out


def corpus_rows() -> list[dict]:
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.cuda import compile_file
    from qwengpu.errors import MachineLimitError
    from qwengpu.isa.sim import MachineSim
    from qwengpu.ptx.inline import inline_calls
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.runner import COMPILE_OPTIONS, corpus
    from qwengpu.simt.interp import _find_kernel
    from qwengpu.spec import bind, load_spec

    out = []
    for cu, spec_path in corpus(ROOT / "kernels"):
        spec = load_spec(spec_path)
        module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS))
        fn = _find_kernel(module, spec.kernel)
        try:
            prog = lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])
        except MachineLimitError:
            out.append({"kernel": cu.stem, "refused": True})
            continue
        nf = sum(x.op in sf.FLOAT_EXPANDERS for x in prog.code)
        if not nf:
            continue
        row: dict = {"kernel": cu.stem, "float_ops": nf}
        for tag, p in (("before", prog), ("after", sf.expand_floats(prog))):
            bound = bind(spec, inline_calls(module, fn))
            st = MachineSim(p).launch(
                spec.grid, spec.block, bound.param_bytes, bound.gmem, dynamic_shared=spec.shared_bytes
            )
            row[f"static_{tag}"] = len(p.code)
            row[f"dyn_{tag}"] = st.warp_instructions
        out.append(row)
    return out


F64_FORMS = [
    ("add", "rn"), ("add", "rz"), ("sub", "rn"), ("mul", "rn"), ("mul", "rm"), ("fma", "rn"), ("fma", "rp"),
    ("div", "rn"), ("div", "rz"), ("rcp", "rn"), ("sqrt", "rn"), ("sqrt", "rp"), ("min", ""), ("max", ""),
    ("setp", "lt"), ("setp", "equ"), ("d2f", "rn"), ("f2d", ""), ("s32", "rn"), ("s64", "rn"),
    ("u64", "rz"), ("to_s32", "rzi"), ("to_u64", "rni"), ("rint", "rmi"), ("neg", ""),
]  # fmt: skip


def f64_rows() -> list[dict]:
    """Per PTX f64 form: program rows of its weight-op sequence (inline, routines off; shared
    routines like mul counted inline too), machine warp instructions issued and 4-lane passes
    for one full warp (32 lanes of random operand bits), as the simulator counts them."""
    import f64_helpers as fh

    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.codegen.soft import Options, expand_for_weights

    def size(form: str, r: str) -> int:
        return len(expand_for_weights(lower_kernel(fh.module(form, r), "k", [True] * 4),
                                      options=Options(routines="never")).code)

    rng = np.random.default_rng(0)
    a, b, c = (rng.integers(0, 2**64, 32, dtype=np.uint64) for _ in range(3))
    base_info: dict = {}
    fh.run("neg", "", a, b, c, weights=True, info=base_info)
    base = (size("neg", ""), base_info["stats"].warp_instructions, base_info["stats"].passes)
    out = []
    for form, r in F64_FORMS:
        info: dict = {}
        fh.run(form, r, a, b, c, weights=True, info=info)
        st = info["stats"]
        out.append({
            "form": f"{form}.{r}" if r else form, "rows": size(form, r) - base[0],
            "warp_instructions": st.warp_instructions - base[1], "passes": st.passes - base[2],
        })  # fmt: skip
    return out


def adders_rows() -> list[dict]:
    """mul/fma.rn on a machine with the multiplier and the adders (``softfloat._product_pieces``):
    machine warp instructions per warp on the simulator, for normal operands (the fast path) and
    for the same operands with one NaN lane per warp (fast path, ``bra``, integer sequence), beside
    the integer sequence alone (the multiplier without the adders); every result checked."""
    from qwengpu.codegen.softcore import Options

    rng = np.random.default_rng(1)
    n = 256

    def normal() -> np.ndarray:
        e = rng.integers(100, 154, n).astype(np.uint32)
        frac = rng.integers(0, 1 << 23, n).astype(np.uint32)
        return ((rng.integers(0, 2, n).astype(np.uint32) << 31) | (e << 23) | frac).astype(np.uint32)

    a, b, c = normal(), normal(), normal()
    nan = a.copy()
    nan[::32] = 0x7FC00000
    both = Options(native_mul=True, native_fadd=True)
    mul_only = Options(native_mul=True)
    out = []
    for op, mods in [("fmul", {}), ("fmul", {"ftz": True}), ("ffma", {}), ("ffma", {"ftz": True})]:
        row = {"form": name(op, mods)}
        for key, x, opts in [("fast", a, both), ("one_slow_lane", nan, both), ("sequence", a, mul_only)]:
            info: dict = {}
            tsf.check(op, mods, x, b, c, weights=True, options=opts, info=info)
            row[key] = info["stats"].machine_by_ptx[info["ptx"]] / (n // 32)
        out.append(row)
    return out


def _table(as_json: bool, rows_: list[dict], heads: list[str], keys: list[str]) -> None:
    """Print ``rows_`` as JSON, or as a Markdown table of ``keys`` (the first column as code)."""
    if as_json:
        print(json.dumps(rows_, indent=1))
        return
    print("| " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * (len(heads) - 1))
    for r in rows_:
        rest = (f"{r[k]:g}" if isinstance(r[k], float) else str(r[k]) for k in keys[1:])
        cells = [f"`{r[keys[0]]}`", *rest]
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--f64", action="store_true", help="the f64 pair ops (softfloat64.py)")
    ap.add_argument("--adders", action="store_true", help="mul/fma.rn on the adders' fast path")
    args = ap.parse_args()
    t0 = time.time()
    if args.adders:
        _table(args.json, adders_rows(), ["op form", "fast path", "a warp with one slow lane",
               "integer sequence (multiplier only)"], ["form", "fast", "one_slow_lane", "sequence"])
        if not args.json:
            print("\n(machine warp instructions per warp, ISA simulator, every result checked against fp32)")
    elif args.f64:
        _table(args.json, f64_rows(), ["PTX f64 form", "program rows (inline)", "warp instructions / warp",
               "passes / warp"], ["form", "rows", "warp_instructions", "passes"])
    if args.adders or args.f64:
        print(f"({time.time() - t0:.0f} s)", file=sys.stderr)
        return
    res: dict = {"forms": rows()}
    if args.corpus:
        res["corpus"] = corpus_rows()
    if args.json:
        print(json.dumps(res, indent=1))
        return
    print("| op form | static | dynamic / warp | live regs | live preds | const 2nd operand |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in res["forms"]:
        dyn = f"{r['dynamic']:g}"
        print(f"| `{r['form']}` | {r['static']} | {dyn} | {r['regs']} | {r['preds']} | {r.get('imm', '')} |")
    shaped = [r for r in res["forms"] if "loop_static" in r]
    if shaped:
        print("\nsignificand product shapes (MUL_SHAPE): static / dynamic per warp")
        print("\n| op | unrolled (default) | loop | mulhi+mul (soft.py) |")
        print("|---|---:|---:|---:|")
        for r in shaped:
            print(
                f"| `{r['form']}` | {r['static']} / {r['dynamic']:g} "
                f"| {r['loop_static']} / {r['loop_dynamic']:g} | {r['mul_static']} / {r['mul_dynamic']:g} |"
            )
    if args.corpus:
        print("\n| kernel | float ops | program before -> after | warp instructions before -> after |")
        print("|---|---:|---:|---:|")
        for r in res["corpus"]:
            if r.get("refused"):
                print(f"| {r['kernel']} | refused (approximate instruction) | | |")
                continue
            print(
                f"| {r['kernel']} | {r['float_ops']} | {r['static_before']} -> {r['static_after']} "
                f"| {r['dyn_before']} -> {r['dyn_after']} |"
            )
    print(f"\n({time.time() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
