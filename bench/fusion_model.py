"""What would fusing dependent integer ops save? A cost model of issue 26's "second integer stage".

Fusion: an integer op whose result only the next instruction reads runs in the same pass as that
instruction (a second integer stage after the first, ``bench/late_units.py`` measures its room:
it fits the 2B machine's depth, 43 layers, at a machine width of 3,072 and not at 2,048). The
pair costs one PASS (or MASK + PASS) and the second op's result; the first op's result never
crosses the bottleneck. This counts it on the programs the weights run today (the 2B shape's
lowering, ``softmem.run_weights``), with the cost model of ``bench/result_values.py`` (PASS, MASK
and result tokens per pass, reproduced against the model's own tokens there):

* a **pair** is rows (i, i + 1) where both are unguarded ops of the integer datapath (``mov sel add
  sub and or xor not shl shr min max popc clz brev`` and their machine forms; i + 1 may also be a
  ``setp``), i + 1 reads row i's register as operand a (or b, when the op commutes), the register
  is dead after i + 1 (``codegen.liveness.live_out``: no later read on any path, call/ret and block
  restarts followed), i + 1 is no jump, call or return target (so every execution of i + 1 follows
  i with the same lanes), the two rows' immediates fit the row's two 32-bit fields (``imm``,
  ``off``), and a ``setp`` second does not share the compare fields with a ``min``/``max``/``sel``
  first (the second op's code, register and flags ride in the ``target`` field, free outside
  branches). Chains (``--stages N``): up to N rows, each link such a pair.
* **saved** per fused link (i, i + 1): row i + 1's PASS and MASK tokens and row i's result tokens,
  as the simulator charged them on this launch.

Modelled, not built: the circuit, the ROM format and the code generator's packing are not changed
here. The bounds watch is untouched by construction (loads and stores are not fused).

``--floor`` runs the same on the full-ISA machine program (every ISA op one instruction, as if
each were a unit: ``result_values.py --floor``): what fusion adds once the units exist.
``--one-lane fmul,ffma`` charges those units as one lane wide (a group's four lanes in four passes,
one row per lane: three more PASS tokens per group pass, the same results): what a unit narrow
enough to fit (``bench/late_units.py``: one float-multiplier lane at width 3,072) costs in tokens.

    python bench/fusion_model.py [--dir kernels] [-k NAMES | --sample] [--stages 2] [--floor]
                                 [--one-lane OPS] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from result_values import observe  # noqa: E402

from qwengpu.codegen.liveness import live_out  # noqa: E402
from qwengpu.isa.instr import PT, Imm, MInstr, P, R  # noqa: E402

#: the integer datapath's ops (``circuit.datapath``) as machine instructions name them
FIRST_OPS = frozenset({"mov", "sel", "add", "sub", "and", "or", "xor", "not", "shl", "shr", "min", "max",
                       "popc", "clz", "brev", "addw", "subw", "mulw", "s2r"})
SECOND_OPS = (FIRST_OPS - {"s2r"}) | {"setp"}
COMMUTES = frozenset({"add", "addw", "and", "or", "xor", "min", "max"})
#: ops whose row uses the compare / predicate-operand fields (``cmp csign bop cidx``)
CMP_FIELDS = frozenset({"min", "max", "sel", "setp"})
#: the sample of issue 26's density target
SAMPLE = ("vec_add", "saxpy", "matmul", "smem_reduce", "shfl_reduce", "histogram", "scan_hillis_steele",
          "gcd", "int64_arith", "loop_break")


def targets(code: list[MInstr]) -> set[int]:
    """pcs another path enters: branch and call targets, and return sites (call pc + 1)."""
    out: set[int] = set()
    for pc, ins in enumerate(code):
        if ins.op in ("bra", "call") and ins.target is not None:
            out.add(int(ins.target))
        if ins.op == "call":
            out.add(pc + 1)
    return out


def _imms(ins: MInstr) -> int:
    return sum(isinstance(x, Imm) for x in ins.s)


def link(code: list[MInstr], i: int, lo: list[int], entered: set[int], first: MInstr | None = None) -> bool:
    """Can row i + 1 run in row i's pass as a second stage on row i's result?"""
    a, b = code[i], code[i + 1]
    unguarded = all(x.guard is None or (x.guard.n == PT and not x.guard.neg) for x in (a, b))
    if not (unguarded and a.op in FIRST_OPS and b.op in SECOND_OPS and i + 1 not in entered):
        return False
    if len(a.d) != 1 or not isinstance(a.d[0], R):
        return False
    d = a.d[0].n
    srcs = [x for x in b.s if not isinstance(x, P)]
    reads_a = len(srcs) >= 1 and isinstance(srcs[0], R) and srcs[0].n == d
    reads_b = len(srcs) >= 2 and isinstance(srcs[1], R) and srcs[1].n == d and b.op in COMMUTES
    if not (reads_a or reads_b):
        return False
    if (lo[i + 1] >> d) & 1:  # row i's value is read again after row i + 1
        return False
    head = first if first is not None else a
    if _imms(head) + _imms(b) > 2:
        return False
    if b.op in CMP_FIELDS and head.op in CMP_FIELDS:
        return False
    return True


def chains(code: list[MInstr], stages: int) -> list[tuple[int, int]]:
    """Fused links (i, i + 1), greedy from the top: a chain grows while each link holds."""
    lo = live_out(code, R)
    entered = targets(code)
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(code) - 1:
        n = 1
        while n < stages and i + n < len(code) and link(code, i + n - 1, lo, entered, code[i]):
            out.append((i + n - 1, i + n))
            n += 1
        i += n
    return out


STOPS = frozenset({"bra", "call", "ret", "exit", "bar", "trap"})


def sunk_pairs(code: list[MInstr]) -> list[tuple[int, int]]:
    """Fused pairs (i, j) where row i moves down to its first reader j (``--sink``): every row
    between is straight-line code (no control op, no jump, call or return target) that neither
    writes row i's register, its sources or the predicate it reads, nor reads its register; then
    (i, j) must be a link as ``link`` checks an adjacent pair. Greedy from the top; a row is in one
    pair at most."""
    lo = live_out(code, R)
    entered = targets(code)
    used: set[int] = set()
    out: list[tuple[int, int]] = []
    for i, a in enumerate(code):
        if i in used or a.op not in FIRST_OPS or len(a.d) != 1 or not isinstance(a.d[0], R):
            continue
        d = a.d[0].n
        srcs = {x.n for x in a.s if isinstance(x, R)}
        preds = {x.n for x in a.s if isinstance(x, P)}
        for j in range(i + 1, len(code)):
            b = code[j]
            if j in entered or j in used:
                break
            if any(isinstance(x, R) and x.n == d for x in b.s):
                moved = [*code[:i], *code[i + 1:j], a, *code[j:]]  # row i just above row j
                lo_m = [*lo[:i], *lo[i + 1:j], 0, *lo[j:]]  # live after row j is unchanged
                if link(moved, j - 1, lo_m, entered):  # no target lies between i and j
                    out.append((i, j))
                    used |= {i, j}
                break
            if b.op in STOPS:
                break
            wr = {x.n for x in b.d if isinstance(x, R)}
            wp = {x.n for x in b.d if isinstance(x, P)}
            if d in wr or wr & srcs or wp & preds:
                break
    return out


def model(cu: Path, spec: Path, stages: int, floor: bool = False, one_lane: frozenset = frozenset(),
          sink: bool = False) -> dict:
    by_pc: dict[int, Counter] = {}
    prog: list = []
    _, stats = observe(cu, spec, native_mul=True, by_pc=by_pc, program=prog, floor=floor)
    code = prog[0].code
    toks = sum(c["pass"] + c["mask"] + c["result"] for c in by_pc.values())
    # a one-lane unit runs a group's four lanes in four passes (one row per lane, the row's lane
    # field guarding the write): three more PASS tokens per group pass, the same results
    lane_passes = sum(3 * c["pass"] for pc, c in by_pc.items()
                      if 0 <= pc < len(code) and code[pc].op in one_lane)
    toks += lane_passes
    links = sunk_pairs(code) if sink else chains(code, stages)
    # a fused pair runs in row j's pass (row i's lanes reach row j: straight-line code between)
    saved = sum(by_pc.get(j, Counter())["pass"] + by_pc.get(j, Counter())["mask"]
                + by_pc.get(i, Counter())["result"] for i, j in links)
    fused_passes = sum(by_pc.get(j, Counter())["pass"] for _, j in links)
    return {"kernel": cu.stem, "ptx_warp_instructions": stats["ptx_warp_instructions"],
            "passes": stats["passes"], "tokens": toks, "links": len(links), "fused_passes": fused_passes,
            "saved": saved, "one_lane_passes": lane_passes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(ROOT / "kernels"))
    ap.add_argument("-k", default="", help="only kernels whose name contains one of these (comma-separated)")
    ap.add_argument("--sample", action="store_true", help="issue 26's 10-kernel sample")
    ap.add_argument("--stages", type=int, default=2, help="ops per fused pass (2: one second stage)")
    ap.add_argument("--floor", action="store_true",
                    help="on the full-ISA program (every float op, conversion, division, atomic a unit: "
                         "result_values.py --floor) instead of the weights' lowering")
    ap.add_argument("--sink", action="store_true",
                    help="pairs (i, j): row i moved down to its first reader j when nothing between "
                         "depends on it (a scheduling pass the code generator would need)")
    ap.add_argument("--one-lane", default="", metavar="OPS",
                    help="machine ops (comma-separated, e.g. fmul,ffma) charged as one-lane units: "
                         "four passes per lane group instead of one")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    one_lane = frozenset(x for x in args.one_lane.split(",") if x)
    from qwengpu.errors import QwenGPUError
    from qwengpu.runner import corpus

    rows = []
    for cu, spec in corpus(args.dir):
        if args.sample and cu.stem not in SAMPLE:
            continue
        if args.k and not any(k and k in cu.stem for k in args.k.split(",")):
            continue
        try:
            rows.append(model(cu, spec, args.stages, args.floor, one_lane, args.sink))
        except QwenGPUError as e:
            rows.append({"kernel": cu.stem, "error": str(e).splitlines()[0]})
            continue
        r = rows[-1]
        print(f"  {r['kernel']:26s} {r['tokens']:>9,} -> {r['tokens'] - r['saved']:>9,} "
              f"({r['links']} links)", file=sys.stderr, flush=True)
    ok = [r for r in rows if "error" not in r]
    tot = Counter()
    for r in ok:
        tot.update({k: v for k, v in r.items() if isinstance(v, int)})
    if args.json:
        print(json.dumps({"rows": rows, "total": dict(tot)}))
        return 0
    print("$ python bench/fusion_model.py " + " ".join(sys.argv[1:] if argv is None else argv) + "\n")
    print("| kernel | PTX warp instructions | tokens today (model: PASS + MASK + results) | fused links "
          "(static) | passes fused away | tokens fused | per PTX warp instruction, today -> fused |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in ok + [{"kernel": f"**all {len(ok)}**", **tot}]:
        w = max(r["ptx_warp_instructions"], 1)
        after = r["tokens"] - r["saved"]
        print(f"| {r['kernel']} | {r['ptx_warp_instructions']:,} | {r['tokens']:,} | {r['links']:,} "
              f"| {r['fused_passes']:,} | {after:,} ({after / max(r['tokens'], 1):.2f}) "
              f"| {r['tokens'] / w:.1f} -> {after / w:.1f} |")
    for r in rows:
        if "error" in r:
            print(f"  {r['kernel']}: {r['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
