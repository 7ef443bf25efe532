"""Do units and a second integer stage fit the 2B machine when their operands come from a LATE
copy of the register file? (issue 26: the remaining levers, measured; compile only, no model)

The units that would cut the token count most (a float multiply: the dot's 55-row `mul.f32`
sequence is 65 % of its tokens; `fma.rn.f32` half of the 10-kernel sample's) and the fusion of
dependent integer ops (a second integer stage) were not built because they do not fit the residual
where longest-path placement puts them: their operands exist at layer ~5 and the register file's,
the multiplier's and the adders' signals peak there (``bench/placement_study.py``). The design
brief's way out (DESIGN.md, "Machine v2"): read their register operands from a second, late copy
of the register file, written by the same result tokens, so no operand crosses the peak.

This builds that copy and measures, on the shipped 2B-shape machine (``circuit.build_machine``'s
order, ``configs.shape_for`` of the Qwen3.5-2B layer shape, compiled with its MLP reserve):

* **late RF**: a late staging bank (the DATA tokens' chunks) and, per lane, ports a and b of the
  register file rebuilt from it (same rows, same commit rule as ``circuit.register_file``), every
  bank placed after ``--after`` (a late signal; ``Memory.place_after``);
* **+ fmul x N**: N fast-range float multipliers (``unit_room.fmul_fast``, bit-exact in its range)
  reading the late copy: N = 4 (one per lane), 2 (a lane pair chosen by a row bit: a 4-lane
  multiply in two passes) and 1 (a lane chosen by two row bits: four passes);
* **+ second integer stage**: ``circuit.datapath`` again, per lane, on (the first stage's result,
  the late copy's b): what a fused dependent pair (``add`` then ``shl``, ...) in one token needs;
* the same units without the late copy (operands from the early register file), for comparison.

For each: layers (the limit is 45), peak live residual and its layer, and whether the compiler's
allocator fits it into the 2,041 signal dimensions (``FitError``'s words when not). ~1 min per
variant.

    python bench/late_units.py [--json] [--only NAME ...]
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

from placement_study import delay, print_live  # noqa: E402
from unit_room import fmul_fast  # noqa: E402

from qwengpu.compiler import Circuit, FitError, LayoutReport, compile_circuit, text_config  # noqa: E402
from qwengpu.compiler import schedule as S  # noqa: E402
from qwengpu.compiler.ir import Bit, MemoryNode, Word  # noqa: E402
from qwengpu.machine import circuit as M  # noqa: E402
from qwengpu.machine import protocol as P  # noqa: E402
from qwengpu.model.configs import shape_for  # noqa: E402

CONFIG = text_config("qwen3_5_2b_text")
SHAPE = shape_for(CONFIG)

# a unit added to the machine: (circuit, fetch, early operands, results, late operands or None,
# the first integer stage's result per lane)
Extra = Callable[[Circuit, M.Fetch, M.Operands, M.Results, "tuple[list[Word], list[Word]] | None",
                  list[Word]], None]


def late_register_file(c: Circuit, fx: M.Fetch, after: list[Bit]) -> tuple[list[Word], list[Word]]:
    """Ports a and b of a second register file, written by the same result tokens as the first
    (``circuit.register_file``'s rows and commit rule) from a late staging bank, placed after
    ``after``: (A, B) register words per lane (registers only: no immediates or specials).

    Only raw bits cross from the early layers: a one-row latch, written and read at every token
    (write before read) beside the late banks, hands the token, the row's register fields, the
    group and the exec mode to the late layers, so everything computed from them is computed there
    (placement is longest-path: a formula of early signals would be computed early and carried)."""
    shape, f = SHAPE, fx.f
    reg_bits = (shape.nregs - 1).bit_length()
    raw = c.concat(fx.tok, f["dst"][:reg_bits], f["ra"][:reg_bits], f["rb"][:reg_bits], fx.cg, fx.m_exec)
    raw = c.concat(raw, c.const(0, 1))  # a late zero: the banks' constant addresses are made of it
    lat = c.memory("raw_late", rows=1, width=raw.width)
    lat.write(c.const(0, 1), raw, c.const(1, 1)[0])
    lat.place_after(*after)
    r = lat.read(c.const(0, 1))
    tok = r[0:16]
    t = list(tok.bits)
    k = 16
    dst, ra, rb = r[k:k + reg_bits], r[k + reg_bits:k + 2 * reg_bits], r[k + 2 * reg_bits:k + 3 * reg_bits]
    k += 3 * reg_bits
    cg, m_exec = r[k:k + 4], r[k + 4]
    idx, d = tok[11:15], tok[0:11]
    is_data = ~t[15]
    is_short, is_ushort = M._ctl_is(c, tok, P.SHORT), M._ctl_is(c, tok, P.USHORT)
    # a constant address would be a copy neuron at layer 0 carried to the late bank (14 staged
    # reads x 4 bits): the late zero and one made once from the latch's zero bit instead
    z = r[raw.width - 1]
    o = Bit(c, c.materialize(~z))

    def const(v: int, width: int) -> Word:
        return Word(c, [o if (v >> i) & 1 else z for i in range(width)])

    stage = c.memory("stage_late", rows=16, width=P.CHUNK)
    stage.write(idx, d, is_data)
    staged = {j: stage.read(const(j, 4)) for j in [*range(12), P.IDX_UNIFORM, P.IDX_UNIFORM + 1]}
    wrow = c.concat(dst, cg)
    A: list[Word] = []
    B: list[Word] = []
    for lane in range(M.LANES):
        en, wval = M.commit(c, lane, tok, staged, is_short, is_ushort, m_exec)  # the shipped rule
        for port, reg, out in (("a", ra, A), ("b", rb, B)):
            bank = c.memory(f"rf{port}{lane}_late", rows=shape.nregs * M.GROUPS, width=32)
            bank.write(wrow, wval, en)  # type: ignore[arg-type]
            out.append(bank.read(c.concat(reg, cg)))
    return A, B


def fmul_units(n: int) -> Extra:
    """``n`` fast-range float multipliers (4: one per lane; 2: a lane pair chosen by the row's
    ``imm`` bit 0; 1: a lane chosen by ``imm`` bits 0-1), their product muxed into every lane's
    result under an op code past ``ROM_OPS`` (a layout measurement)."""

    def add(c: Circuit, fx: M.Fetch, ops: M.Operands, dp: M.Results, late, first: list[Word]) -> None:
        A, B = late if late is not None else (ops.A, ops.B)
        is_new = M._match(c, fx.op, len(M.ROM_OPS))
        sel = fx.f["imm"]
        per = M.LANES // n
        for u in range(n):
            lanes = [u * per + k for k in range(per)]
            if per == 1:
                a, b = A[lanes[0]], B[lanes[0]]
            else:
                pick = sel[: (per - 1).bit_length()]
                a = c.select(pick, [A[k] for k in lanes])
                b = c.select(pick, [B[k] for k in lanes])
            y = fmul_fast(c, a, b)[:32]
            for k in lanes:
                dp.res[k] = c.mux(is_new, y, dp.res[k])

    return add


def second_stage(c: Circuit, fx: M.Fetch, ops: M.Operands, dp: M.Results, late, first: list[Word]) -> None:
    """The integer datapath again, on (the first integer stage's result, operand b): a dependent
    integer pair in one token (its op code here is the row's own; a real second stage reads a few
    more row bits)."""
    B = late[1] if late is not None else ops.B
    if late == "imm":
        B = [fx.f["imm"]] * M.LANES
    ops2 = M.Operands(exec_data=ops.exec_data, A=list(first), B=B, RA=ops.RA, G=ops.G, CV=ops.CV)
    dp2 = M.datapath(c, fx, ops2)
    fuse = fx.f["imm"][31]  # any row bit: "this row has a second op"
    for lane in range(M.LANES):
        dp.res[lane] = c.mux(fuse, dp2.res[lane], dp.res[lane])


def late_operands(c: Circuit, fx: M.Fetch, late: tuple[list[Word], list[Word]]) -> M.Operands:
    """Operands a and b from the late copy with the row's immediates, as ``register_file`` selects
    them (the special registers are left out: the float units never read them)."""
    f = fx.f
    A = [c.mux(f["a_imm"][0], f["imm"], a) for a in late[0]]
    B = [c.select(c.concat(f["b_off"], f["b_imm"]), [b, b, f["imm"], f["off"]]) for b in late[1]]
    return M.Operands(exec_data=fx.is_data, A=A, B=B, RA=late[0], G=[], CV=[])


def machine(extras: list[Extra], late: bool, after: str, moved: str = "") -> Circuit:
    """``circuit.build_machine(SHAPE)`` with ``extras`` built after the float adders (before the
    late global memory, as the shipped units are), their operands from a late RF copy when ``late``;
    ``moved``: shipped units read the late copy too ("fadd": the four float adders, "mul fadd":
    the multiplier as well)."""
    c = Circuit("qwengpu_machine")
    fx = M.fetch_decode(c, SHAPE)
    ops = M.register_file(c, SHAPE, fx)
    dp = M.datapath(c, fx, ops)
    first = list(dp.res)  # the integer stage's result (a second stage fuses integer pairs)
    sch = M.scheduler(c, fx, ops, dp.pc1)
    anchors = {"datapath": dp.res[0][31], "scheduler": sch.sel_pc[0]}
    if "mul" not in moved:
        M.multiplier(c, fx, ops, dp)
    anchors["multiplier"] = dp.res[0][31]
    if "fadd" not in moved:
        M.float_adder(c, fx, ops, dp)
    anchors["adders"] = dp.res[0][31]
    lr = None
    if late:
        # "L<n>": after a token bit passed through n identity MLPs (one dimension per layer)
        anchor = delay(c, fx.tok[0:1], int(after[1:]))[0] if after.startswith("L") else anchors[after]
        lr = late_register_file(c, fx, [anchor])
    if moved:  # shipped units on the late copy's operands (placed after it)
        assert lr is not None
        lops = late_operands(c, fx, lr)
        if "mul" in moved:
            M.multiplier(c, fx, lops, dp)
        M.float_adder(c, fx, lops, dp)
    for ex in extras:
        ex(c, fx, ops, dp, lr, first)
    pw, words, pages = M.global_memory(c, SHAPE, fx, ops)
    M.load_result(c, fx, dp, words)
    em = M.emit(c, fx, ops, dp, sch, pw, pages)
    c.output("out", em.out)
    return c


def profile(c: Circuit) -> dict:
    """Layers, live residual after each MLP and its peak, the layers of the late banks; then whether
    the allocator fits it."""
    needed, order = S.live_signals(c)
    pl = S.place(c, S.Shape.of(CONFIG), lambda i: S.LINEAR, needed, order, [], M.mlp_reserve(SHAPE))
    live = [sum(1 for s, d in pl.pos.items() if d <= p < pl.last_use.get(s, d))
            for p in range(1, 2 * pl.n_layers, 2)]
    banks = sorted({pl.unit_pos[id(n)] // 2 for n in order
                    if isinstance(n, MemoryNode) and n.name.endswith("_late") and id(n) in pl.unit_pos})
    peak = max(live)
    row = {"layers": pl.n_layers, "peak live": peak, "peak at layer": live.index(peak),
           "late banks at layers": banks, "live by layer": live}
    try:
        rep = LayoutReport.of(compile_circuit(c, CONFIG, mlp_reserve=M.mlp_reserve(SHAPE)))
        row["fits"] = f"yes: {rep.n_layers} layers, {rep.signal_dims:,} residual slots"
    except FitError as e:
        row["fits"] = "no: " + " ".join(str(e).split())[:120]
    return row


VARIANTS: dict[str, tuple[list[Extra], bool] | tuple[list[Extra], bool, str]] = {
    "shipped": ([], False),
    "late RF": ([], True),
    "late RF + fmul x 1": ([fmul_units(1)], True),
    "late RF + fmul x 2": ([fmul_units(2)], True),
    "late RF + fmul x 4": ([fmul_units(4)], True),
    "late RF + second integer stage": ([second_stage], True),
    "late RF + fmul x 1 + second integer stage": ([fmul_units(1), second_stage], True),
    "fmul x 1 (early operands)": ([fmul_units(1)], False),
    "fmul x 2 (early operands)": ([fmul_units(2)], False),
    "fmul x 4 (early operands)": ([fmul_units(4)], False),
    "fmul x 4 + second integer stage (early operands)": ([fmul_units(4), second_stage], False),
    "late RF, the float adders on it": ([], True, "fadd"),
    "late RF, the float adders on it + fmul x 1": ([fmul_units(1)], True, "fadd"),
    "late RF, the float adders on it + fmul x 2": ([fmul_units(2)], True, "fadd"),
    "late RF, the float adders on it + second integer stage": ([second_stage], True, "fadd"),
    "late RF, the multiplier and the adders on it": ([], True, "mul fadd"),
    "late RF, the multiplier and the adders on it + fmul x 1": ([fmul_units(1)], True, "mul fadd"),
    "late RF, the multiplier and the adders on it + fmul x 2": ([fmul_units(2)], True, "mul fadd"),
    "late RF, the multiplier and the adders on it + second integer stage": ([second_stage], True, "mul fadd"),
    "second integer stage (early operands)": ([second_stage], False),
    "second integer stage, immediate operand": ([lambda c, fx, ops, dp, _, first: second_stage(
        c, fx, ops, dp, "imm", first)], False),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON list instead of the table")
    ap.add_argument("--only", nargs="+", metavar="NAME", help=f"variants to run (of: {', '.join(VARIANTS)})")
    ap.add_argument("--after", default="datapath",
                    help="the late signal the late banks are placed after: datapath (the integer "
                         "result), scheduler, multiplier, adders, or L<n> (layer n)")
    ap.add_argument("--hidden", type=int, default=2048,
                    help="the machine's width (the layers' hidden size; a mount adds the base's to it)")
    args = ap.parse_args(argv)
    if args.hidden != CONFIG.hidden_size:
        CONFIG.hidden_size = args.hidden  # everything else stays the Qwen3.5-2B layer's
    rows = []
    for name in args.only or list(VARIANTS):
        extras, late, *adders = VARIANTS[name]
        t0 = time.perf_counter()
        row = {"variant": name, **profile(machine(extras, late, args.after, *adders))}
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(f"  {name}: {row['layers']} layers, peak {row['peak live']} at L{row['peak at layer']}, "
              f"late banks {row['late banks at layers']}; {row['fits']} ({row['seconds']} s)",
              file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    wide = "" if args.hidden == 2048 else f" --hidden {args.hidden}"
    print(f"$ python bench/late_units.py --after {args.after}{wide}\n")
    print(f"| the 2B machine (hidden {args.hidden:,}, at most 45 layers) | layers "
          "| peak live residual (layer) | late banks at layers | the allocator |")
    print("|---|---:|---:|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['layers']} | {r['peak live']:,} (L{r['peak at layer']}) "
              f"| {r['late banks at layers'] or '-'} | {r['fits']} |")
    print_live(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
