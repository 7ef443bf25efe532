"""What the register results the machine writes look like, and what result encodings could save.

    python bench/result_values.py [--dir kernels] [-k NAME] [--json]
    python bench/result_values.py --by-ptx [--native]   # where the tokens go, per PTX operation
    python bench/result_values.py --floor [--by-ptx]    # every ISA op one machine instruction

Why: results are three quarters of the tokens the model writes (`bench/token_census.py`: result
chunks 63 %, SHORT/USHORT 12 % over the corpus), and issue 14 asks for a denser machine. Before
changing the protocol, measure what the values are: how many lane-group results are uniform,
lane-affine (``base + lane * stride``), small, or none of these, per pass and per warp instruction.

How: each kernel's weights program (``codegen.softmem.run_weights``: the program the model runs,
pass for pass) is executed on the ISA simulator with its register and predicate writes observed.
Per lane group with an active lane, the result tokens of today's protocol are counted from its
rules (``machine/circuit.py`` ``emit``: a group whose active lanes all hold one value and cover the
group's threads costs USHORT (1, value < 1024) or three uniform chunks; otherwise each active lane
costs SHORT (1, value < 256), chunk 0 and HIGH (2, value < 2^18) or three 11-bit chunks; a
predicate write is one DATA token; a dead result, ``codegen.liveness``, costs nothing: the ROM
row's ``nowb`` bit). That
count is compared with the result + SHORT/USHORT tokens the model really wrote (the census in
``--census LOG``, a ``bench/machine_weights.py --log`` file): the output says on how many kernels
the cost model is exact and how far off the total is, so the projections below can be weighed.
Projections (each alone, same passes):

* ``chunks``: a lane value costs ceil(significant bits / 11) chunks (0 costs one) instead of 3;
* ``affine``: a group whose active lanes are ``b + lane * s`` costs 4 tokens (header, b, s);
* ``warp``: a value uniform (or affine) over the whole warp instruction is written once for all
  its groups (3 tokens, 1 when small), the other groups write nothing;
* ``wide``: 16-bit chunks, two per full word (a uniform value below 1024 or a lane value below 256
  still one token). A DATA token then needs 11 indices (4 lanes x 2 chunks, 2 uniform, 1
  predicate) x 2^16 values: 720,896 ids, against 32,768 DATA ids today and the mount's 65,536
  machine ids beside Qwen3.5's 248,320 (every id is a row of the tied embedding).

These are upper bounds of what an encoding can save on results alone; the PASS and MASK tokens
(24 % of the corpus) are not touched by them.

``--by-ptx``: the same cost model plus one PASS token per lane-group pass and a MASK token where
the active lanes are not all the group's threads and differ from the group's last MASK (the
sticky mask), each charged to the PTX instruction whose machine
code issued it (``MachineSim``'s PTX map; routines count for the instruction that called them):
tokens and machine warp instructions per PTX operation over the corpus, so a lever can be sized
before it is built. ``--native``: the lowering with the multiplier, the float adders and the
one-lane float multiplier (the 2B-shape machine: ``softcore.unit_options`` of its shape).

``--floor``: the same cost model on the *full-ISA* machine program (``pipeline.run_machine_sim``:
float add/mul/fma/div/sqrt/ex2, conversions, 32-bit division, atomics, shuffles and shared memory
each one instruction, the lowering for the weights not applied): what today's protocol would cost
if every ISA op were a unit in the weights. It is the floor of the instruction levers (units,
single-op atomics) under today's result encoding, so the printout says how far the issue's targets
are from it and what only a protocol change can remove. STORE, DUMP and control tokens (1.4 % of
the corpus) are not in the model.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LANES = 4


def _lane_cost(v: int) -> int:
    """A lane result's tokens: SHORT below 256, chunk 0 + HIGH below 2^18, else three chunks."""
    return 1 if v < 256 else 2 if v < 1 << 18 else 3


def _chunks(v: int) -> int:
    return max(1, (int(v).bit_length() + 10) // 11)


def _affine(vals: np.ndarray, lanes: np.ndarray) -> bool:
    """Are the values ``b + lane * s`` (mod 2^32) over these lanes?"""
    if len(vals) < 3:
        return True
    v = vals.astype(np.int64)
    s = v[1] - v[0]  # lanes may be sparse: the step per lane from the first two
    dl = lanes[1] - lanes[0]
    if (s % dl) != 0:
        return False
    step = s // dl
    return bool(np.all((v - v[0]) % (1 << 32) == ((lanes - lanes[0]) * step) % (1 << 32)))


class Observer:
    """Counts, for every observed register write, today's result tokens and the projections;
    ``by_form``: tokens and warp instructions per PTX form (``--by-ptx``)."""

    def __init__(self, by_form: dict[str, Counter] | None = None,
                 by_pc: dict[int, Counter] | None = None) -> None:
        self.c: Counter = Counter()
        self.form = ""
        self.pc = -1  # the issuing machine pc (``by_pc``: tokens per pc, for bench/fusion_model.py)
        self.by_pc = by_pc
        self.by_form: dict[str, Counter] = {} if by_form is None else by_form
        self.sticky: dict[int, tuple[bool, ...]] = {}  # per group: the mask of its last MASK token

    def issue(self, form: str, m: np.ndarray | None, nthreads: int) -> None:
        """One machine warp instruction of PTX form ``form``: its PASS and MASK tokens."""
        self.form = form
        act = np.ones(32, dtype=bool) if m is None else m
        threads = np.arange(32) < nthreads
        f = self.by_form.setdefault(form, Counter())
        f["warp_instructions"] += 1
        pcc = self.by_pc.setdefault(self.pc, Counter()) if self.by_pc is not None else Counter()
        for g in range(8):
            a, t = act[4 * g:4 * g + 4] & threads[4 * g:4 * g + 4], threads[4 * g:4 * g + 4]
            if a.any():
                f["pass"] += 1
                pcc["pass"] += 1
                # machine v2's sticky mask: a MASK token only where a partial mask differs from the
                # group's last one (a full pass leaves the group's entry as it was)
                if (t & ~a).any() and self.sticky.get(g) != tuple(a.tolist()):
                    f["mask"] += 1
                    pcc["mask"] += 1
                    self.sticky[g] = tuple(a.tolist())

    def _charge(self, n: int) -> None:
        if self.form:
            self.by_form.setdefault(self.form, Counter())["result"] += n
        if self.by_pc is not None:
            self.by_pc.setdefault(self.pc, Counter())["result"] += n

    def reg(self, v: np.ndarray, m: np.ndarray | None, nthreads: int, live: np.ndarray) -> None:
        act = np.ones(32, dtype=bool) if m is None else m
        act = act & (np.arange(32) < nthreads)
        if not act.any():
            return
        vals = np.asarray(v, dtype=np.uint32)
        c = self.c
        c["writes"] += 1
        groups = [g for g in range(8) if act[4 * g:4 * g + 4].any()]
        lanes_all = np.nonzero(act)[0]
        warp_uni = bool(np.all(vals[lanes_all] == vals[lanes_all[0]]))
        warp_aff = _affine(vals[lanes_all], lanes_all)
        now_total = 0
        for g in groups:
            a = act[4 * g:4 * g + 4]
            lanes = np.nonzero(a)[0]
            gv = vals[4 * g:4 * g + 4][a]
            # uniform: one value, and every live lane of the group takes it (emit's rule)
            uni = bool(np.all(gv == gv[0])) and not (live[4 * g:4 * g + 4] & ~a).any()
            if uni:
                now = 1 if int(gv[0]) < 1024 else 3
                c["groups_uniform"] += 1
            else:
                now = sum(_lane_cost(int(x)) for x in gv)
            c["groups"] += 1
            small = all(int(x) < 256 for x in gv)
            aff = _affine(gv, lanes)
            c["groups_small_per_lane"] += small and not uni
            c["groups_affine_not_uniform"] += aff and not uni
            c["groups_other"] += not (uni or small or aff)
            now_total += now
            self._charge(now)
            c["now"] += now
            c["chunks"] += (1 if int(gv[0]) < 1024 else _chunks(int(gv[0]))) if uni else sum(
                1 if int(x) < 256 else _chunks(int(x)) for x in gv)
            c["affine"] += min(now, 4) if aff else now
            c["wide"] += (1 if int(gv[0]) < 1024 else 2) if uni else sum(1 if int(x) < 256 else 2 for x in gv)
        c["warp_uniform"] += warp_uni
        c["warp_affine_not_uniform"] += warp_aff and not warp_uni
        if warp_uni:
            c["warp"] += 1 if int(vals[lanes_all[0]]) < 1024 else 3
        elif warp_aff:
            c["warp"] += 4
        else:
            c["warp"] += now_total

    def pred(self, m: np.ndarray | None, nthreads: int) -> None:
        act = np.ones(32, dtype=bool) if m is None else m
        act = act & (np.arange(32) < nthreads)
        n = sum(bool(act[4 * g:4 * g + 4].any()) for g in range(8))
        self._charge(n)
        for k in ("now", "chunks", "affine", "wide"):
            self.c[k] += n
        self.c["warp"] += n
        self.c["pred_groups"] += n


def observe(cu: Path, spec: Path, native_mul: bool = False,
            by_form: dict[str, Counter] | None = None, floor: bool = False,
            by_pc: dict[int, Counter] | None = None, program: list | None = None) -> tuple[dict, dict]:
    """Run the weights program of one launch with its writes observed: (counts, sim stats);
    ``by_form`` (shared over launches) gathers the per-PTX-operation tokens of ``--by-ptx``;
    ``floor``: the full-ISA machine program instead (``--floor``); ``by_pc`` (one launch) gathers
    the tokens per machine pc, and ``program`` receives the machine program."""
    from qwengpu.codegen.liveness import dead_results
    from qwengpu.codegen.pipeline import run_machine_sim
    from qwengpu.codegen.soft import Options
    from qwengpu.codegen.softcore import unit_options
    from qwengpu.codegen.softmem import run_weights
    from qwengpu.isa.sim import MachineSim
    from qwengpu.model.configs import shape_named

    obs = Observer(by_form, by_pc)
    orig_dst, orig_pdst, orig_issue = MachineSim._dst, MachineSim._pdst, MachineSim._issue

    dead_of: dict[int, list[bool]] = {}
    at = [0, []]  # the issuing pc, the program's dead results

    def _issue(self, w, pc, m, e):
        e2 = orig_issue(self, w, pc, m, e)
        if id(self.prog) not in dead_of:
            dead_of[id(self.prog)] = dead_results(self.prog.code)
        at[0], at[1] = pc, dead_of[id(self.prog)]
        obs.pc = pc
        k = self.code_ptx[pc] if self.in_range[pc] else min(e2, len(self.prog.ptx) - 1)
        obs.issue(self.prog.ptx[k].form, m, w.nlanes)
        return e2

    def _dst(self, x):
        write = orig_dst(self, x)

        def w(warp, v, m):
            if not at[1][at[0]]:  # a dead result is not written back (the ROM row's nowb bit)
                    obs.reg(np.broadcast_to(np.asarray(v, dtype=np.uint32), (32,)), m, warp.nlanes, warp.live)
            write(warp, v, m)

        return w

    def _pdst(self, x):
        write = orig_pdst(self, x)

        def w(warp, v, m):
            if not at[1][at[0]]:
                obs.pred(m, warp.nlanes)
            write(warp, v, m)

        return w

    MachineSim._dst, MachineSim._pdst, MachineSim._issue = _dst, _pdst, _issue
    try:
        if floor:
            res = run_machine_sim(cu, spec)
        else:
            res = run_weights(cu, spec, options=Options(**unit_options(shape_named("2b"))) if native_mul
                              else Options())
    finally:
        MachineSim._dst, MachineSim._pdst, MachineSim._issue = orig_dst, orig_pdst, orig_issue
    if program is not None:
        program.append(res.program)
    return dict(obs.c), res.stats


def by_ptx_table(by_form: dict[str, Counter], top: int = 30) -> None:
    """Tokens (cost model) and machine warp instructions per PTX form, largest first."""
    tot = Counter()
    for f in by_form.values():
        tot.update(f)
    toks = {k: f["pass"] + f["mask"] + f["result"] for k, f in by_form.items()}
    all_t, all_w = max(sum(toks.values()), 1), max(tot["warp_instructions"], 1)
    print("\n| PTX operation | machine warp instructions | share | tokens (PASS + MASK + results) | share "
          "| tokens per machine warp instruction |")
    print("|---|---:|---:|---:|---:|---:|")
    for k in sorted(toks, key=lambda k: -toks[k])[:top]:
        w, t = by_form[k]["warp_instructions"], toks[k]
        print(f"| `{k}` | {w:,} | {w / all_w:.1%} | {t:,} | {t / all_t:.1%} | {t / max(w, 1):.2f} |")
    print(f"| **all** | {all_w:,} | | {all_t:,} (PASS {tot['pass']:,}, MASK {tot['mask']:,}, results "
          f"{tot['result']:,}) | | {all_t / all_w:.2f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=str(ROOT / "kernels"))
    ap.add_argument("-k", default="", help="only kernels whose name contains this")
    ap.add_argument("--census", metavar="LOG",
                    help="a bench/machine_weights.py --log file: check the cost model against it")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--by-ptx", action="store_true", help="tokens and warp instructions per PTX operation")
    ap.add_argument("--native", action="store_true",
                    help="lower with the multiplier and the float adders (the 2B-shape machine)")
    ap.add_argument("--floor", action="store_true",
                    help="the full-ISA program: every ISA op one machine instruction (the instruction "
                         "levers' floor under today's protocol)")
    args = ap.parse_args()
    from qwengpu.errors import QwenGPUError
    from qwengpu.runner import corpus

    census = {}
    if args.census:
        for line in Path(args.census).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                if "token_kinds" in r:
                    census[r["kernel"]] = r
    rows, tot = [], Counter()
    by_form: dict[str, Counter] = {}
    for cu, spec in corpus(args.dir):
        if not any(k in cu.stem for k in args.k.split(",")):
            continue
        try:
            counts, stats = observe(cu, spec, args.native, by_form, args.floor)
        except QwenGPUError as e:
            rows.append({"kernel": cu.stem, "error": str(e).splitlines()[0]})
            continue
        row = {"kernel": cu.stem, "passes": stats["passes"], "warp_instructions": stats["warp_instructions"],
               **counts}
        if cu.stem in census:
            k = census[cu.stem]["token_kinds"]
            row["measured"] = k["result"] + k["short"]
            row["tokens"] = census[cu.stem]["tokens"]
        rows.append(row)
        tot.update({k: v for k, v in row.items() if isinstance(v, int)})
        seen = f"  measured {row['measured']:>9,}" if "measured" in row else ""
        print(f"  {cu.stem:26s} now {counts.get('now', 0):>9,}{seen}", file=sys.stderr, flush=True)
    if args.json:
        by_ptx = {k: dict(v) for k, v in by_form.items()}
        print(json.dumps({"rows": rows, "total": dict(tot), "by_ptx": by_ptx}))
        return 0
    print("$ python bench/result_values.py " + " ".join(sys.argv[1:]))
    if args.by_ptx:
        by_ptx_table(by_form)
        return 0
    print(f"lane-group results: {tot['groups']:,} register + {tot['pred_groups']:,} predicate "
          f"({tot['writes']:,} warp register writes, {tot['passes']:,} passes)")
    g = max(tot["groups"], 1)
    print(f"  uniform over the group {tot['groups_uniform'] / g:.1%}, lane-affine (not uniform) "
          f"{tot['groups_affine_not_uniform'] / g:.1%}, every lane < 256 (neither) "
          f"{tot['groups_small_per_lane'] / g:.1%}, other {tot['groups_other'] / g:.1%}")
    w = max(tot["writes"], 1)
    print(f"  warp instructions whose value is uniform over the warp {tot['warp_uniform'] / w:.1%}, "
          f"affine over the warp (not uniform) {tot['warp_affine_not_uniform'] / w:.1%}")
    if "measured" in tot:
        seen = [r for r in rows if "measured" in r]
        same = sum(r["measured"] == r["now"] for r in seen)
        print(f"cost model vs the model's own tokens (result + SHORT/USHORT): model {tot['now']:,}, "
              f"measured {tot['measured']:,} ({tot['now'] / max(tot['measured'], 1) - 1:+.2%}); equal on "
              f"{same} of {len(seen)} kernels")
        for r in rows:
            if "measured" in r and r["measured"] != r["now"]:
                print(f"  {r['kernel']}: model {r['now']:,} vs measured {r['measured']:,}")
    print("\n| result encoding (alone) | result tokens | vs today |")
    print("|---|---:|---:|")
    for key, label in (("now", "today (cost model)"),
                       ("chunks", "variable-length lanes (ceil(bits/11))"),
                       ("affine", "lane-affine groups in 4 tokens"),
                       ("warp", "warp-uniform/affine once per warp"),
                       ("wide", "16-bit chunks (two per word; a 20-bit alphabet)")):
        print(f"| {label} | {tot[key]:,} | {tot[key] / max(tot['now'], 1):.2f} |")
    pm = sum(f["pass"] + f["mask"] for f in by_form.values())
    wi = max(sum(f["warp_instructions"] for f in by_form.values()), 1)
    print(f"\nPASS + MASK {pm:,} + results: {wi:,} machine warp instructions cost {pm + tot['now']:,} "
          f"tokens = {(pm + tot['now']) / wi:.2f} each today, "
          + ", ".join(f"{(pm + tot[k]) / wi:.2f} with {k}" for k in ("chunks", "affine", "warp", "wide"))
          + " (STORE, DUMP and control not counted)")
    if "tokens" in tot:
        other = tot["tokens"] - tot["measured"]
        best = other + min(tot[k] for k in ("chunks", "affine", "warp"))
        print(f"\nall tokens the model wrote: {tot['tokens']:,} ({other:,} not results); with the best "
              f"encoding above: {best:,} = {best / max(tot['warp_instructions'], 1):.2f} per warp "
              "instruction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
