"""Where would more units go? The 2B machine's residual, layer by layer, under other placements.

Issue 26's first lever is "late placement": the compiler places every operation as early as its
inputs allow (longest path), so the four lanes' multipliers and float adders run side by side in
layers 6-11, where the residual peaks (2,026 of 2,041 signal dimensions at layer 10 on the machine
of 9.17; 1,974 at layer 8 when this was first measured), while the later layers run at 700-1,400.
A float-multiply unit (641 dimensions per lane, 9 layers: ``bench/unit_room.py``) fits nowhere
as four lanes at once. This measures, on the shipped 2B-shape machine (compile only, no model),
what two placements would give:

* **stagger**: lane l's unit starts 4*l layers later than lane 0's (its operands pass through
  identity MLPs: one neuron per bit per layer), so the lanes' widest parts no longer coincide;
* **late (ALAP)**: after the longest-path placement, every MLP formula moves to the latest MLP
  before its first reader that has neuron room (memories stay; the layer count is kept), a
  post-pass tried here, not in the compiler.

For each: the layer count, the peak live residual and where it is, and whether the compiler's
allocator fits it into 2,048 dimensions; and the same for the machine with four fast-range float
multipliers added (staggered). ~5 minutes. (Operands read from a late copy of the register file
instead of carried through the peak: ``bench/late_units.py``.)

    python bench/placement_study.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from qwengpu.compiler import Circuit, FitError, LayoutReport, compile_circuit, text_config  # noqa: E402
from qwengpu.compiler import schedule as S  # noqa: E402
from qwengpu.compiler.ir import Bit, Formula, MemoryNode, MlpNode, Word  # noqa: E402
from qwengpu.compiler.mlp import LayerNeurons, lower_formula  # noqa: E402
from qwengpu.machine import circuit as M  # noqa: E402
from qwengpu.machine.fpu import fadd  # noqa: E402
from qwengpu.model.configs import shape_for  # noqa: E402

CONFIG = text_config("qwen3_5_2b_text")  # the Qwen3.5-2B layer shape (hidden 2048)
SHAPE = shape_for(CONFIG)


def delay(c: Circuit, w: Word, layers: int) -> Word:
    """``w`` passed through ``layers`` identity MLPs (each a copy neuron per bit): a placement
    hint written in the circuit itself, so longest-path placement starts its readers later."""
    for _ in range(layers):
        nm = c.fresh("delay")
        node = MlpNode(c, nm, [Formula(b.lin()) for b in w.bits], [f"{nm}[{i}]" for i in range(len(w.bits))])
        c.nodes.append(node)
        w = Word(c, [Bit(c, s) for s in node.outputs])
    return w


def machine(stagger_mul: int = 0, stagger_fadd: int = 0, fmul_stagger: int | None = None) -> Circuit:
    """The shipped 2B machine (``circuit.build_machine``'s order), lane l's multiplier / float adder
    started ``stagger * l`` layers later; with ``fmul_stagger``, four fast-range float multipliers
    (``unit_room.fmul_fast``) muxed in too, lane l's ``fmul_stagger * l`` layers later."""
    c = Circuit("qwengpu_machine")
    fx = M.fetch_decode(c, SHAPE)
    ops = M.register_file(c, SHAPE, fx)
    dp = M.datapath(c, fx, ops)
    sch = M.scheduler(c, fx, ops, dp.pc1)
    is_mul = M._match(c, fx.op, M.OP["mul"])
    for lane in range(M.LANES):
        a, b = delay(c, ops.A[lane], stagger_mul * lane), delay(c, ops.B[lane], stagger_mul * lane)
        dp.res[lane] = c.mux(is_mul, (a * b)[:32], dp.res[lane])
    is_fadd = M._match(c, fx.op, M.OP["fadd"])
    ftz, neg, odd = fx.f["csign"][0], fx.f["cmp"][0], fx.f["cmp"][1]
    for lane in range(M.LANES):
        a, b = delay(c, ops.A[lane], stagger_fadd * lane), delay(c, ops.B[lane], stagger_fadd * lane)
        dp.res[lane] = c.mux(is_fadd, fadd(c, a, b, ftz, neg=neg, odd=odd), dp.res[lane])
    if fmul_stagger is not None:
        from unit_room import fmul_fast

        is_new = M._match(c, fx.op, len(M.ROM_OPS))
        for lane in range(M.LANES):
            a, b = delay(c, ops.A[lane], fmul_stagger * lane), delay(c, ops.B[lane], fmul_stagger * lane)
            dp.res[lane] = c.mux(is_new, fmul_fast(c, a, b)[:32], dp.res[lane])
    pw, words, pages = M.global_memory(c, SHAPE, fx, ops)  # after the units, as the 2B machine builds it
    M.load_result(c, fx, dp, words)
    em = M.emit(c, fx, ops, dp, sch, pw, pages)
    c.output("out", em.out)
    return c


def _late(circuit, shape, needed, order, layers, pos, unit_pos, end, reserve) -> None:
    """The ALAP post-pass: reverse topological order, each formula to the latest MLP before its
    first reader (memory readers at their layer's mixer) with neuron room."""
    specs, forms = {}, []
    for node in order:
        if isinstance(node, MlpNode):
            for f, s in zip(node.formulas, node.outputs, strict=True):
                if id(s) in needed:
                    specs[s] = lower_formula(f, s)
                    forms.append(s)
    readers: dict = {}
    for s in forms:
        for x in s.node.formulas[s.index].signals():
            readers.setdefault(x, []).append(s)
    for node in order:
        if isinstance(node, MemoryNode) and id(node) in unit_pos:
            for x in node.inputs():
                readers.setdefault(x, []).append(node)
    outs = {id(s) for sigs in circuit.outputs.values() for s in sigs}
    room = shape.intermediate_size - reserve
    count: list[dict] = [{} for _ in layers]
    for s in forms:
        for k in {sp.key() for sp in specs[s]}:
            count[pos[s] // 2][k] = count[pos[s] // 2].get(k, 0) + 1
    for s in reversed(forms):
        lim = end - 1 if id(s) in outs else end + 1
        for r in readers.get(s, []):
            q = unit_pos[id(r)] if isinstance(r, MemoryNode) else pos[r]
            lim = min(lim, q - 1 if q % 2 == 0 else q - 2)
        if lim > end - 1:
            continue
        keys, old = {sp.key() for sp in specs[s]}, pos[s]
        for k in keys:
            count[old // 2][k] -= 1
            if not count[old // 2][k]:
                del count[old // 2][k]
        p = lim
        while p > old and len(count[p // 2]) + len(keys - count[p // 2].keys()) > room:
            p -= 2
        for k in keys:
            count[p // 2][k] = count[p // 2].get(k, 0) + 1
        pos[s] = unit_pos[id(s)] = p
    for lp in layers:
        lp.mlp, lp.formulas = LayerNeurons(), []
    for s in forms:
        layers[pos[s] // 2].mlp.add(specs[s])
        layers[pos[s] // 2].formulas.append(s)


def late_place(circuit, shape, layer_type_at, needed, order, layers, mlp_reserve=0):
    """``schedule.place`` followed by the ALAP post-pass (last uses recomputed)."""
    pl = ORIGINAL_PLACE(circuit, shape, layer_type_at, needed, order, layers, mlp_reserve)
    end = 2 * pl.n_layers
    _late(circuit, shape, needed, order, layers, pl.pos, pl.unit_pos, end, mlp_reserve)
    last: dict = {}
    for node in order:
        if isinstance(node, MlpNode):
            for f, s in zip(node.formulas, node.outputs, strict=True):
                if id(s) in needed:
                    for x in f.signals():
                        last[x] = max(last.get(x, -1), pl.pos[s])
        elif isinstance(node, MemoryNode) and id(node) in pl.unit_pos:
            for x in node.inputs():
                last[x] = max(last.get(x, -1), pl.unit_pos[id(node)])
    for sigs in circuit.outputs.values():
        for s in sigs:
            last[s] = end
    for s in pl.pos:
        last.setdefault(s, pl.pos[s])
    return S.Placement(pl.pos, pl.unit_pos, last, pl.n_layers)


ORIGINAL_PLACE = S.place


def profile(c: Circuit, place: Callable) -> dict:
    """Layers, peak live residual (after each MLP) and its layer, from the placement alone; then
    whether the allocator fits it (the FitError's first words when not)."""
    needed, order = S.live_signals(c)
    pl = place(c, S.Shape.of(CONFIG), lambda i: S.LINEAR, needed, order, [], M.mlp_reserve(SHAPE))
    live = [sum(1 for s, d in pl.pos.items() if d <= p < pl.last_use.get(s, d))
            for p in range(1, 2 * pl.n_layers, 2)]
    peak = max(live)
    row = {"layers": pl.n_layers, "peak live": peak, "peak at layer": live.index(peak),
           "live by layer": live}
    S.place = place
    try:
        rep = LayoutReport.of(compile_circuit(c, CONFIG, mlp_reserve=M.mlp_reserve(SHAPE)))
        row["compiles"] = f"yes: {rep.n_layers} layers, {rep.signal_dims} residual slots"
    except FitError as e:
        row["compiles"] = "no: " + " ".join(str(e).split())[:110]
    finally:
        S.place = ORIGINAL_PLACE
    return row


VARIANTS: list[tuple[str, Callable[[], Circuit], Callable]] = [
    ("shipped (longest path)", lambda: machine(), ORIGINAL_PLACE),
    ("multiplier lanes staggered 4 layers", lambda: machine(stagger_mul=4), ORIGINAL_PLACE),
    ("multiplier and adder lanes staggered 4 layers", lambda: machine(4, 4), ORIGINAL_PLACE),
    ("late (ALAP post-pass)", lambda: machine(), late_place),
    ("+ 4 fast-range fmul, lanes staggered 9 layers", lambda: machine(4, 0, fmul_stagger=9), ORIGINAL_PLACE),
    ("+ 4 fast-range fmul, staggered, late", lambda: machine(4, 0, fmul_stagger=9), late_place),
]


def print_live(rows: list[dict]) -> None:
    """The live residual after each layer's MLP, one line per variant (``bench/late_units.py`` too)."""
    print("\nlive residual after each layer's MLP:")
    for r in rows:
        print(f"  {r['variant']}: {' '.join(str(x) for x in r['live by layer'])}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for name, build, place in VARIANTS:
        t0 = time.perf_counter()
        row = {"variant": name, **profile(build(), place)}
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(f"  {name}: {row['layers']} layers, peak {row['peak live']} at L{row['peak at layer']}",
              file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("$ python bench/placement_study.py\n")
    print("| placement of the 2B machine (hidden 2,048) | layers | peak live residual (layer) "
          "| the allocator |")
    print("|---|---:|---:|---|")
    for r in rows:
        peak = f"{r['peak live']:,} (L{r['peak at layer']})"
        print(f"| {r['variant']} | {r['layers']} | {peak} | {r['compiles']} |")
    print_live(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
