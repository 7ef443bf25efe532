"""What lowering for the weights costs (``qwengpu/codegen/soft.py``), and why multiply is a sequence.

    python bench/mul_lowering.py              # corpus table + multiply variants (~1 min)
    python bench/mul_lowering.py --circuit    # + the 4-lane multiplier circuit vs the machine (~2 min)
    python bench/mul_lowering.py --native     # the corpus without / with the multiplier (~20 s)
    python bench/mul_lowering.py --json

1. Per corpus kernel: machine instructions of the allocated program (static) and machine warp
   instructions issued (dynamic) before and after ``expand_for_weights`` (integer expanders only:
   mul/mad/mulhi/mulw/plop/sub-word global loads), for the default ``auto`` shape and ``loop``.
2. The general (register x register) multiply and mul-high: machine warp instructions per warp
   for each sequence variant and operand distribution (64 threads = 2 warps, one multiply each;
   the cost is measured by the simulator, not estimated), and the static size of the sequence.
   ``+negmin``: the multiplier is the shortest of a, b, -a, -b (low word only: mul.hi ignores
   it); ``auto`` does that only for an operand defined as a negation. mul.hi has no bit-serial
   loop: ``bitloop`` runs its ``loop``.
3. ``--circuit``: a 32x32->32 multiplier per lane as a compiler circuit (Word ``*``: Booth
   radix-4, column compression, two-layer adder) for 1 and 4 lanes, beside the machine circuit
   (``build_machine()``), on ``qwengpu.runtime.engine.test_config()``: layers, peak residual
   slots (live signals) of the available dimensions, MLP neurons.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "machine"))

from machine_helpers import HEADER, binop_ptx, binop_spec  # noqa: E402

from qwengpu.codegen.pipeline import run_machine_sim, simulate  # noqa: E402
from qwengpu.codegen.soft import INTEGER_EXPANDED, Options, run_for_weights, simulate_for_weights  # noqa: E402
from qwengpu.errors import MachineLimitError  # noqa: E402
from qwengpu.ptx.parser import parse_ptx  # noqa: E402
from qwengpu.runner import corpus  # noqa: E402
from qwengpu.spec import parse_spec  # noqa: E402

VARIANTS = ["auto", "unrolled", "unrolled+negmin", "loop", "bitloop", "straight"]


def corpus_rows() -> list[dict]:
    rows = []
    for cu, spec in corpus(ROOT / "kernels"):
        try:
            base = run_machine_sim(cu, spec)
        except MachineLimitError:
            continue
        row = {
            "kernel": cu.stem,
            "static_before": base.stats["machine_instructions"],
            "dyn_before": base.stats["warp_instructions"],
        }
        for mul in ("auto", "loop"):
            try:
                res = run_for_weights(cu, spec, mul=mul, only=INTEGER_EXPANDED)
                row[f"static_{mul}"] = res.stats["machine_instructions"]
                row[f"dyn_{mul}"] = res.stats["warp_instructions"]
            except MachineLimitError:
                row[f"static_{mul}"] = row[f"dyn_{mul}"] = None
        rows.append(row)
    return rows


def distributions() -> dict[str, tuple[list[int], list[int]]]:
    rng = random.Random(7)
    n = 64

    def r(bits: int) -> list[int]:
        return [rng.getrandbits(bits) for _ in range(n)]

    big = [rng.getrandbits(32) | 1 << 31 for _ in range(n)]
    return {
        "uniform 6b x 7b (ctaid*ntid)": ([5] * n, [64] * n),
        "8-bit x 32-bit": (r(8), r(32)),
        "16-bit x 32-bit": (r(16), r(32)),
        "32-bit x 32-bit": (big, [rng.getrandbits(32) | 1 << 31 for _ in range(n)]),
        "1 lane 32b, 31 lanes 2b": ([big[i] if i % 32 == 9 else 3 for i in range(n)], big),
        "10-bit x 6-bit": (r(10), [rng.getrandbits(6) | 1 for _ in range(n)]),
    }


def _run(op: str, a: list[int], b: list[int], opts: Options | None) -> tuple[int, int, int]:
    module = parse_ptx(HEADER + binop_ptx(op, "u32", "u32", "u32"))
    sp = parse_spec(binop_spec(a, b, "u32", "u32", "u32"))
    if opts is None:
        _, st, prog = simulate(module, sp)
    else:
        _, st, prog = simulate_for_weights(module, sp, options=opts)
    return st.warp_instructions, st.warps, len(prog.code)


def _options(variant: str, only: set[str]) -> Options:
    """Columns: a shape of soft.Options.mul with negmin off, ``+negmin`` on, ``auto`` the default."""
    if variant == "auto":
        return Options(only=frozenset(only))
    mul, _, neg = variant.partition("+")
    return Options(mul=mul, only=frozenset(only), negmin=bool(neg))


def _cost(op: str, base: str, a: list[int], b: list[int], opts: Options) -> tuple[float, int]:
    """(machine warp instructions per warp, static instructions) of the expansion of the one
    instruction that ``op`` has in place of ``base``'s ``mov`` (everything else expanded alike;
    the allocator coalesces that ``mov`` and the sequence's own final ``mov`` away)."""
    d1, warps, s1 = _run(op, a, b, opts)
    d0, _, s0 = _run(base, a, b, opts)
    return (d1 - d0) / warps, s1 - s0  # the base's mov is coalesced away by the allocator


def sequence_rows() -> list[dict]:
    rows = []
    ops = {
        "mul.lo": ("mul.lo.s32 {C}, {A}, {B};", "mov.u32 {C}, {A};", {"mul"}),
        "mul.hi.u": ("mul.hi.u32 {C}, {A}, {B};", "mov.u32 {C}, {A};", {"mulhi"}),
        "mul.hi.s": ("mul.hi.s32 {C}, {A}, {B};", "mov.u32 {C}, {A};", {"mulhi"}),
        "mad q, -d, n": (
            "neg.s32 %r20, {B};\n    mad.lo.s32 {C}, {A}, %r20, {B};",
            "neg.s32 %r20, {B};\n    mov.u32 {C}, %r20;",
            {"mad"},
        ),
    }
    for label, (op, base, only) in ops.items():
        for dist, (a, b) in distributions().items():
            row = {"op": label, "operands": dist}
            for v in VARIANTS:
                row[v] = _cost(op, base, a, b, _options(v, only))
            rows.append(row)
    n = 64
    xs = [random.Random(3).getrandbits(32) for _ in range(n)]
    for label, op, only in [
        ("x * 10", "mul.lo.s32 {C}, {A}, 10;", {"mul"}),
        ("x * -3", "mul.lo.s32 {C}, {A}, -3;", {"mul"}),
        ("x * 0x9E3779B9", "mul.lo.s32 {C}, {A}, -1640531527;", {"mul"}),
        ("mul.hi.u x, 0xAAAAAAAB (x/3)", "mul.hi.u32 {C}, {A}, -1431655765;", {"mulhi"}),
        ("mul.hi.s x, 0x55555556 (x/3)", "mul.hi.s32 {C}, {A}, 1431655766;", {"mulhi"}),
    ]:
        rows.append(
            {
                "op": label,
                "operands": "any",
                "auto": _cost(op, "mov.u32 {C}, {A};", xs, xs, _options("auto", only)),
            }
        )
    # the index computation of every kernel: mad ctaid, ntid, tid with static bounds (6 and 7 bits)
    d1, warps, s1 = _run("mov.u32 {C}, {A};", xs, xs, _options("auto", {"mad"}))
    d0, _, s0 = _run("mov.u32 {C}, {A};", xs, xs, None)
    rows.append(
        {
            "op": "mad ctaid, ntid, tid (static bounds)",
            "operands": "any",
            "auto": ((d1 - d0) / warps + 1, s1 - s0 + 1),
        }
    )
    return rows


def circuit_rows() -> list[dict]:
    from qwengpu.compiler import Circuit, compile_circuit
    from qwengpu.compiler.report import LayoutReport
    from qwengpu.runtime.engine import test_config

    cfg = test_config()
    rows = []
    for lanes in (1, 4):
        c = Circuit(f"mul32x{lanes}")
        for k in range(lanes):
            c.output(f"y{k}", c.input(f"a{k}", 32) * c.input(f"b{k}", 32))
        t0 = time.perf_counter()
        rep = LayoutReport.of(compile_circuit(c, cfg))
        rows.append(_crow(f"{lanes}-lane 32x32->32 multiplier (Word *)", rep, time.perf_counter() - t0))
    from qwengpu.compiler import FitError
    from qwengpu.machine.circuit import MachineShape, build_machine

    # the machine, and the machine with the multiplier (issue 14) at growing MLP widths: where it fits
    for mul, inter in ((False, 2048), (True, 2048), (True, 3072), (True, 4096), (False, 6144), (True, 6144)):
        label = f"machine{' + multiplier' if mul else ''}, intermediate {inter}"
        t0 = time.perf_counter()
        try:
            rep = LayoutReport.of(
                compile_circuit(build_machine(MachineShape(multiplier=mul)), test_config(intermediate=inter))
            )
            rows.append(_crow(label, rep, time.perf_counter() - t0))
        except FitError as e:
            rows.append({"circuit": label, "error": "does not fit: " + " ".join(str(e).split())[:160]})
    return rows


def native_rows() -> list[dict]:
    """Per corpus kernel: machine warp instructions and lane-group passes of the program the weights
    run (``softmem.run_weights``, ISA simulator) without and with the multiplier (``native_mul``);
    every output checked against the spec's expected values."""
    from qwengpu.codegen.soft import Options
    from qwengpu.codegen.softmem import run_weights

    rows = []
    for cu, spec in corpus(ROOT / "kernels"):
        r0, r1 = run_weights(cu, spec), run_weights(cu, spec, options=Options(native_mul=True))
        rows.append(
            {
                "kernel": cu.stem,
                "ok": r0.passed and r1.passed,
                "warp_before": r0.stats["warp_instructions"],
                "warp_after": r1.stats["warp_instructions"],
                "passes_before": r0.stats["passes"],
                "passes_after": r1.stats["passes"],
                "rows_before": r0.stats["machine_instructions"],
                "rows_after": r1.stats["machine_instructions"],
            }
        )
    return rows


def _crow(label: str, rep, secs: float) -> dict:
    return {
        "circuit": label,
        "layers": rep.n_layers,
        "peak_slots": rep.peak_live,
        "available_dims": rep.available_dims,
        "neurons": rep.total_neurons,
        "max_neurons_per_layer": rep.max_neurons,
        "compile_s": round(secs, 1),
    }


def _n(x) -> str:
    return "-" if x is None else str(x)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--circuit", action="store_true", help="also compile the multiplier circuits (~2 min)")
    ap.add_argument(
        "--native",
        action="store_true",
        help="only the corpus without and with the multiplier in the weights (ISA simulator, ~20 s)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.native:
        rows = native_rows()
        if args.json:
            print(json.dumps(rows))
            return 0
        print("## python bench/mul_lowering.py --native   (softmem.run_weights; native_mul=False | True)")
        print(
            "| kernel | outputs | warp instr before | after | passes before | after | rows before | after |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(
                f"| {r['kernel']} | {'exact' if r['ok'] else 'WRONG'} "
                f"| {r['warp_before']:,} | {r['warp_after']:,} "
                f"| {r['passes_before']:,} | {r['passes_after']:,} | {r['rows_before']} | {r['rows_after']} |"
            )
        t = {k: sum(r[k] for r in rows) for k in rows[0] if k not in ("kernel", "ok")}
        print(
            f"| **total** ({sum(r['ok'] for r in rows)} of {len(rows)} exact) | | {t['warp_before']:,} | "
            f"{t['warp_after']:,} ({t['warp_after'] / t['warp_before']:.3f}) | {t['passes_before']:,} | "
            f"{t['passes_after']:,} ({t['passes_after'] / t['passes_before']:.3f}) | {t['rows_before']:,} "
            f"| {t['rows_after']:,} |"
        )
        return 0 if all(r["ok"] for r in rows) else 1
    out = {"corpus": corpus_rows(), "sequences": sequence_rows()}
    if args.circuit:
        out["circuits"] = circuit_rows()
    if args.json:
        print(json.dumps(out))
        return 0
    print("## corpus: allocated program size (static) and machine warp instructions (dynamic)")
    print("## python bench/mul_lowering.py   (expand_for_weights(only=INTEGER_EXPANDED), mul=auto|loop)")
    print(
        "| kernel | static before | static auto | static loop "
        "| dynamic before | dynamic auto | dynamic loop |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    tot = {
        k: 0 for k in ("static_before", "static_auto", "static_loop", "dyn_before", "dyn_auto", "dyn_loop")
    }
    for r in out["corpus"]:
        print(
            f"| {r['kernel']} | {r['static_before']} | {_n(r['static_auto'])} | {_n(r['static_loop'])} | "
            f"{r['dyn_before']} | {_n(r['dyn_auto'])} | {_n(r['dyn_loop'])} |"
        )
        for k in tot:
            tot[k] += r[k] or 0
    print(
        f"| **total** | {tot['static_before']} | {tot['static_auto']} | {tot['static_loop']} | "
        f"{tot['dyn_before']} | {tot['dyn_auto']} | {tot['dyn_loop']} |"
    )
    print()
    print("## general multiply: machine warp instructions per warp (static instructions of the sequence)")
    print("## python bench/mul_lowering.py   (binop kernel, 64 threads; variants of soft.Options.mul)")
    print("| op | operands | " + " | ".join(VARIANTS) + " |")
    print("|---|---|" + "---:|" * len(VARIANTS))
    for r in out["sequences"]:
        cells = []
        for v in VARIANTS:
            if v in r:
                d, s = r[v]
                cells.append(f"{d:g} ({s})")
            else:
                cells.append("")
        print(f"| {r['op']} | {r['operands']} | " + " | ".join(cells) + " |")
    if args.circuit:
        print()
        print(
            "## circuit vs sequence: python bench/mul_lowering.py --circuit  "
            "(hidden 2048; the machine rows at the intermediate size named)"
        )
        print(
            "| circuit | layers | peak residual slots / available | MLP neurons "
            "| max neurons/layer | compile s |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for r in out["circuits"]:
            if "error" in r:
                print(f"| {r['circuit']} | {r['error']} | | | | |")
                continue
            print(
                f"| {r['circuit']} | {r['layers']} | {r['peak_slots']} / {r['available_dims']} | "
                f"{r['neurons']} | {r['max_neurons_per_layer']} | {r['compile_s']} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
