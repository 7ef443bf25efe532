"""The machine as ONE per-token circuit in the compiler's DSL (stage: the GPU in the weights).

``next_token = step(token, memories)``: the circuit reads the 16-bit input token (see
``protocol.py``), its DeltaNet memories, and computes the 16-bit next token. Why each memory
sits where it sits (a memory is read and written only at its own layer, write before read):

* ``ctl``   (1 row, early): mode | pc-or-address | mask, written by PASS / *ADDR tokens and read
  by every token, so chunk and STORE tokens know the current instruction without carrying it.
* ``stage`` (16 rows x 11 bits, early): DATA chunks of a ROM row or a global-memory word being
  loaded; the ROM / memory row is rewritten from all staged chunks at every DATA token.
* ``rom``   (program, one 112-bit row per instruction), read at the latched pc every token.
* ``rf{l}_{j}`` (per lane l, per 11-bit chunk j, one row per register): a result chunk token
  writes its chunk straight into the register file (no staging, no commit token), so the next
  PASS reads the committed value (write-before-read = forwarding).
* ``pr{l}`` (per lane, 8 predicate rows of 1 bit): written by the predicate chunk.
* ``gmem``  (one 32-bit word per row): 4 read ports (one per lane, port 0 also serves DUMP),
  written by STORE(lane) tokens (address and data re-read from the RF at that token) and by the
  prompt's MEM loads.
* ``pc{l}`` (per lane, 1 row: pc | live): written at PASS tokens for the issuing lanes; the
  next PASS is the min-PC over live lanes (as ``sim.py`` schedules), read back at any token.
* ``latch`` (1 row, late): the pass's results, effective mask and kind, written at PASS tokens
  and read by the following chunk / STORE tokens to emit the rest of the result.

Scope of this slice: one lane group (<= 4 threads, one block, one warp), integer subset
(see ``ROM_OPS``), 4-byte global loads and stores without fault detection.
"""

from __future__ import annotations

from dataclasses import dataclass

from qwengpu.compiler import Circuit, Word
from qwengpu.compiler.ir import Bit
from qwengpu.machine import protocol as P

LANES = 4
NCHUNK = 3  # 11-bit chunks per 32-bit word

# opcodes of the ROM row (the slice's own encoding of machine instructions)
ROM_OPS = (
    "mov",
    "add",
    "sub",
    "and",
    "or",
    "xor",
    "shl",
    "shr",
    "shrs",
    "sel",
    "ld",
    "not",
    "min",
    "max",
    "popc",
    "clz",
    "brev",
    "setp",
    "st",
    "bra",
    "exit",
)
OP = {n: i for i, n in enumerate(ROM_OPS)}
REG_RESULT_OPS = 17  # ops 0..16 write a register
CMPS = ("eq", "ne", "lt", "le", "gt", "ge")
BOPS = (None, "and", "or", "xor")

# ROM row fields: (name, width), LSB first
ROM_FIELDS = (
    ("op", 5),
    ("dst", 5),
    ("ra", 5),
    ("a_imm", 1),
    ("a_lane", 1),
    ("rb", 5),
    ("b_imm", 1),
    ("b_off", 1),
    ("cidx", 3),
    ("cneg", 1),
    ("cpt", 1),
    ("gen", 1),
    ("gneg", 1),
    ("gidx", 3),
    ("cmp", 3),
    ("csign", 1),
    ("bop", 2),
    ("imm", 32),
    ("off", 32),
    ("target", 10),
)
ROM_BITS = sum(w for _, w in ROM_FIELDS)
ROM_CHUNKS = -(-ROM_BITS // P.CHUNK)


def pack_row(fields: dict[str, int]) -> int:
    """The ROM row (an int of ROM_BITS bits) holding ``fields`` (missing fields are 0)."""
    v, off = 0, 0
    for name, w in ROM_FIELDS:
        x = int(fields.get(name, 0))
        assert 0 <= x < (1 << w), (name, x)
        v |= x << off
        off += w
    return v


@dataclass(frozen=True)
class MachineShape:
    """Capacities compiled into the circuit (the engine refuses programs beyond them)."""

    rom_rows: int = 128
    gmem_words: int = 512
    nregs: int = 32
    npreds: int = 8


def _match(c: Circuit, bits: Word | list[Bit], value: int) -> Bit:
    """[bits == value] in one MLP (one neuron)."""
    bl = list(bits)
    return c.all_of([b if (value >> i) & 1 else ~b for i, b in enumerate(bl)])


def _const(c: Circuit, v: int, w: int) -> Word:
    return c.const(v, w)


def _chunk(w: Word, j: int) -> Word:
    """11-bit chunk j of a 32-bit word (the top chunk padded with a constant 0)."""
    c = w.circuit
    bits = list(w.bits[P.CHUNK * j : P.CHUNK * (j + 1)])
    while len(bits) < P.CHUNK:
        bits.append(Bit(c, const=0))
    return Word(c, bits)


def _word_from_chunks(c: Circuit, parts: list[Word]) -> Word:
    return c.concat(*parts)[:32]  # type: ignore[return-value]


def _fields(row: Word) -> dict[str, Word]:
    out, off = {}, 0
    for name, w in ROM_FIELDS:
        out[name] = row[off : off + w]
        off += w
    return out  # type: ignore[return-value]


def build_machine(shape: MachineShape = MachineShape()) -> Circuit:
    """The per-token machine circuit: input ``tok`` (16 bits), output ``out`` (16 bits)."""
    c = Circuit("qwengpu_machine")
    tok = c.input("tok", 16)
    t = list(tok.bits)
    one0 = c.const(0, 1)
    is_data = ~t[15]
    is_pass = c.all_of([t[15], ~t[14]])
    idx, d = tok[11:15], tok[0:11]
    sub, arg = tok[10:14], tok[0:10]

    def ctl_is(k: int) -> Bit:
        return c.all_of([t[15], t[14]] + [b if (k >> i) & 1 else ~b for i, b in enumerate(sub.bits)])

    _romaddr, _memaddr, is_dumpaddr = ctl_is(P.ROMADDR), ctl_is(P.MEMADDR), ctl_is(P.DUMPADDR)
    is_store = ctl_is(P.STORE)

    # ---- control latch: mode | a (pc or address) | mask
    ctl = c.memory("ctl", rows=1, width=16)
    is_ctl_any = c.lut(
        [t[15], t[14], *sub.bits],
        lambda t15, t14, s0, s1, s2, s3: int(
            t15 and (not t14 or (t14 and s1 + 2 * s0 + 4 * s2 + 8 * s3 in (0, 1, 2)))
        ),
    )
    mode0 = c.lut([t[14], *sub.bits], lambda t14, s0, s1, s2, s3: int(t14 and (s0 + 2 * s1) in (0, 2)))
    mode1 = c.lut([t[14], *sub.bits], lambda t14, s0, s1, s2, s3: int(t14 and (s0 + 2 * s1) in (1, 2)))
    a_val = c.mux(is_pass, tok[4:14], arg)
    mask_val = c.concat(*[c.all_of([is_pass, t[i]]) for i in range(4)])
    ctl.write(one0, c.concat(mode0, mode1, a_val, mask_val), is_ctl_any)
    cr = ctl.read(one0)
    mode, cur, mask = cr[0:2], cr[2:12], cr[12:16]
    m_exec, m_rom, m_mem, m_dump = (_match(c, mode, k) for k in range(4))

    # ---- staging of loaded rows, ROM
    stage = c.memory("stage", rows=16, width=P.CHUNK)
    stage.write(idx, d, is_data)
    staged = [stage.read(c.const(k, 4)) for k in range(ROM_CHUNKS)]
    rom_bits = (shape.rom_rows - 1).bit_length()
    rom = c.memory("rom", rows=shape.rom_rows, width=ROM_BITS)
    rom.write(cur[:rom_bits], c.concat(*staged)[:ROM_BITS], c.all_of([is_data, m_rom]))
    f = _fields(rom.read(cur[:rom_bits]))
    op = f["op"]

    # ---- register file and predicates, per lane
    reg_bits = (shape.nregs - 1).bit_length()
    exec_data = c.all_of([is_data, m_exec])
    A: list[Word] = []
    B: list[Word] = []
    G: list[Bit] = []
    CV: list[Bit] = []
    for lane in range(LANES):
        pa, pb = [], []
        for j in range(NCHUNK):
            bank = c.memory(f"rf{lane}_{j}", rows=shape.nregs, width=P.CHUNK)
            own = _match(c, idx, 3 * lane + j)
            uni = c.all_of([_match(c, idx, P.IDX_UNIFORM + j), mask[lane]])
            bank.write(f["dst"][:reg_bits], d, c.all_of([exec_data, own | uni]))
            pa.append(bank.read(f["ra"][:reg_bits]))
            pb.append(bank.read(f["rb"][:reg_bits]))
        rf_a, rf_b = _word_from_chunks(c, pa), _word_from_chunks(c, pb)
        pr = c.memory(f"pr{lane}", rows=shape.npreds, width=1)
        pr.write(
            f["dst"][:3], d[lane : lane + 1], c.all_of([exec_data, _match(c, idx, P.IDX_PRED), d[4 + lane]])
        )
        g = pr.read(f["gidx"])[0]
        cp = pr.read(f["cidx"])[0]
        G.append(c.lut([f["gen"][0], f["gneg"][0], g], lambda en, ng, v: int((not en) or (v ^ ng))))
        CV.append(c.lut([f["cpt"][0], f["cneg"][0], cp], lambda pt, ng, v: int((not ng) if pt else (v ^ ng))))
        A.append(c.select(c.concat(f["a_lane"], f["a_imm"]), [rf_a, c.const(lane, 32), f["imm"], f["imm"]]))
        # b: register, the immediate, or (second immediate) the ``off`` field
        B.append(c.select(c.concat(f["b_off"], f["b_imm"]), [rf_b, rf_b, f["imm"], f["off"]]))

    # ---- addresses, global memory
    gw_bits = (shape.gmem_words - 1).bit_length()
    words = [(A[lane] + f["off"])[2 : 2 + gw_bits] for lane in range(LANES)]
    sl = tok[0:2]
    st_word = c.select(sl, words)
    st_data = c.select(sl, B)
    gmem = c.memory("gmem", rows=shape.gmem_words, width=32)
    g_addr = c.mux(is_store, st_word, cur[:gw_bits])
    g_data = c.mux(is_store, st_data, c.concat(*staged[:NCHUNK])[:32])
    gmem.write(g_addr, g_data, is_store | c.all_of([is_data, m_mem]))  # type: ignore[arg-type]
    ldv = [
        gmem.read(c.mux(m_dump, cur[:gw_bits], words[0]) if lane == 0 else words[lane])  # type: ignore[arg-type]
        for lane in range(LANES)
    ]

    # ---- integer ALU per lane
    res: list[Word] = []
    pbits: list[Bit] = []
    for lane in range(LANES):
        a, b = A[lane], B[lane]
        sh = b[:5]
        big = c.any_of(b.bits[5:])
        zero = c.const(0, 32)
        shl = c.mux(big, zero, a << sh)
        shr = c.mux(big, zero, a >> sh)
        sign_fill = Word(c, [a.bits[31]] * 32)
        shrs = c.mux(big, sign_fill, a.as_signed() >> sh)
        sel = c.mux(CV[lane], a, b)
        eq = a == b
        lt_u, gt_u = a < b, b < a
        lt_s, gt_s = a.as_signed() < b.as_signed(), b.as_signed() < a.as_signed()
        lt = c.mux(f["csign"][0], lt_s, lt_u)
        gt = c.mux(f["csign"][0], gt_s, gt_u)
        mn, mx = c.mux(lt, a, b), c.mux(gt, a, b)
        popc = _popcount(c, list(a.bits))
        # clz(a) = popc of the bits "no one at or above position i" (a thermometer code)
        clz = _popcount(c, [c.all_of([~x for x in a.bits[i:]]) for i in range(32)])
        brev = Word(c, list(reversed(a.bits)))
        opts = [a, a + b, a - b, a & b, a | b, a ^ b, shl, shr, shrs, sel, ldv[lane], ~a]
        opts += [mn, mx, popc, clz, brev]
        res.append(c.select(op, [o.as_unsigned() for o in opts]))  # type: ignore[union-attr]
        r = c.lut(
            [*f["cmp"].bits, lt, gt, eq],
            lambda c0, c1, c2, lt_, gt_, eq_: int(
                {0: eq_, 1: not eq_, 2: lt_, 3: lt_ or eq_, 4: gt_, 5: gt_ or eq_}.get(
                    c0 + 2 * c1 + 4 * c2, 0
                )
            ),
        )
        pbits.append(
            c.lut(
                [*f["bop"].bits, r, CV[lane]],
                lambda b0, b1, r_, cv: int([r_, r_ and cv, r_ or cv, r_ ^ cv][b0 + 2 * b1]),
            )
        )

    # ---- per-lane PCs: next PASS by min-PC over live lanes
    eff = [c.all_of([mask[lane], G[lane]]) for lane in range(LANES)]
    is_bra, is_exit = _match(c, op, OP["bra"]), _match(c, op, OP["exit"])
    pc1 = (cur + 1)[:10]
    live, pcs = [], []
    for lane in range(LANES):
        taken = c.all_of([is_bra, G[lane]])
        gone = c.all_of([is_exit, G[lane]])
        newpc = c.mux(taken, f["target"], pc1)
        bank = c.memory(f"pc{lane}", rows=1, width=11)
        bank.write(one0, c.concat(newpc, ~gone), c.all_of([is_pass, mask[lane]]))  # type: ignore[arg-type]
        rd = bank.read(one0)
        pcs.append(rd[:10])
        live.append(rd[10])
    le = {(x, y): pcs[x] <= pcs[y] for x in range(LANES) for y in range(LANES) if x != y}
    nm = [
        c.all_of([live[x]] + [c.any_of([~live[y], le[(x, y)]]) for y in range(LANES) if y != x])
        for x in range(LANES)
    ]
    first_nm = [c.all_of([nm[x]] + [~nm[y] for y in range(x)]) for x in range(LANES)]
    next_pc = c.select(c.encode(c.concat(*first_nm)), pcs)
    any_live = c.any_of(live)
    dlo_b, dhi_b = c.memory("dlo", rows=1, width=10), c.memory("dhi", rows=1, width=10)
    dlo_b.write(one0, arg, ctl_is(P.DUMPLO))
    dhi_b.write(one0, arg, ctl_is(P.DUMPHI))
    dlo, dhi = dlo_b.read(one0), dhi_b.read(one0)
    halt = c.const(P.ctl(P.HALT), 16)
    done_tok = c.mux(dlo == dhi, halt, c.concat(dlo, c.const(P.ctl(P.DUMPADDR) >> 10, 6)))
    pass_tok = c.concat(*nm, next_pc, c.const(0b10, 2))
    next_tok = c.mux(any_live, pass_tok, done_tok)

    # ---- the late latch: results of the pass
    kreg = c.lut(op.bits, lambda *bs: int(sum(b << i for i, b in enumerate(bs)) < REG_RESULT_OPS))
    kpred, kstore = _match(c, op, OP["setp"]), _match(c, op, OP["st"])
    pairs = [(x, y) for x in range(LANES) for y in range(x + 1, LANES)]
    same = [c.any_of([~eff[x], ~eff[y], res[x] == res[y]]) for x, y in pairs]
    uniform = c.all_of(same + [c.any_of([~mask[x], eff[x]]) for x in range(LANES)])
    latch = c.memory("latch", rows=1, width=32 * LANES + LANES * 2 + 4)
    latch.write(one0, c.concat(*res, *eff, *pbits, kreg, kpred, kstore, uniform), is_pass)
    lr = latch.read(one0)
    L_res = [lr[32 * x : 32 * (x + 1)] for x in range(LANES)]
    o = 32 * LANES
    L_eff = list(lr[o : o + 4].bits)
    L_pb = lr[o + 4 : o + 8]
    L_reg, L_pred, L_store, L_uni = (lr[o + 8 + k] for k in range(4))

    # ---- output: which token comes next
    i_lane = [c.any_of([_match(c, idx, 3 * x + j) for j in range(3)]) for x in range(LANES)]
    i_last = c.any_of([_match(c, idx, 3 * x + 2) for x in range(LANES)])
    i_mid = c.any_of([_match(c, idx, 3 * x + j) for x in range(LANES) for j in range(2)])
    xd = exec_data
    after = []
    for x in range(LANES):
        prev_d = [i_lane[y] for y in range(x)]
        prev_s = [_match(c, sl, y) for y in range(x)]
        no = c.const(0, 1)[0]
        after.append(
            c.any_of(
                [
                    is_pass,
                    c.all_of([xd, i_last, c.any_of(prev_d)]) if prev_d else no,
                    c.all_of([is_store, c.any_of(prev_s)]) if prev_s else no,
                ]
            )
        )
    cand = [c.all_of([L_eff[x], after[x]]) for x in range(LANES)]
    first = [c.all_of([cand[x]] + [~cand[y] for y in range(x)]) for x in range(LANES)]
    has_nl = c.any_of(cand)
    scan = c.any_of(
        [c.all_of([is_pass, L_reg, ~L_uni]), c.all_of([is_pass, L_store]), c.all_of([xd, i_last]), is_store]
    )
    nl = c.encode(c.concat(*first))
    c_next = c.any_of(
        [
            c.all_of([scan, ~has_nl]),
            c.all_of([is_pass, ~L_reg, ~L_pred, ~L_store]),
            c.all_of([xd, _match(c, idx, 14)]),
            c.all_of([xd, _match(c, idx, 15)]),
        ]
    )
    c_store_out = c.all_of([scan, has_nl, L_store])
    q_lane = c.all_of([scan, has_nl, ~L_store])
    q_inc = c.any_of(
        [
            c.all_of([xd, i_mid]),
            c.all_of([xd, _match(c, idx, 12)]),
            c.all_of([xd, _match(c, idx, 13)]),
            c.all_of([is_data, m_dump, ~idx[1], ~idx[2], ~idx[3]]),
        ]
    )  # dump chunk 0 or 1
    q_uni = c.all_of([is_pass, L_reg, L_uni])
    q_pred = c.all_of([is_pass, L_pred])
    q_dump0 = is_dumpaddr
    c_dumpnext = c.all_of([is_data, m_dump, _match(c, idx, 2)])
    c_data = c.any_of([q_lane, q_inc, q_uni, q_pred, q_dump0])
    three_nl = c.select(nl, [c.const(3 * x, 4) for x in range(LANES)])
    q = c.select(
        c.encode(c.concat(q_lane, q_inc, q_uni, q_pred)),
        [three_nl, (idx + 1)[:4], c.const(P.IDX_UNIFORM, 4), c.const(P.IDX_PRED, 4)],
    )
    # chunk values by target index
    uval = c.select(c.encode(c.concat(*first_of(c, L_eff))), L_res)
    table = [_chunk(L_res[x], j) for x in range(LANES) for j in range(NCHUNK)]
    table += [_chunk(uval, j) for j in range(NCHUNK)]
    table.append(c.concat(L_pb, *L_eff, c.const(0, 3)))
    dump_w = ldv[0]
    val = c.mux(m_dump, c.select(q[:2], [_chunk(dump_w, j) for j in range(NCHUNK)]), c.select(q, table))
    data_tok = c.concat(val, q, c.const(0, 1))
    store_tok = c.concat(nl, c.const(P.ctl(P.STORE) >> 2, 14))
    nxt = (cur + 1)[:10]
    dn_tok = c.mux(nxt == dhi, halt, c.concat(nxt, c.const(P.ctl(P.DUMPADDR) >> 10, 6)))
    out = c.select(
        c.encode(c.concat(c_data, c_store_out, c_next, c_dumpnext)), [data_tok, store_tok, next_tok, dn_tok]
    )  # type: ignore[list-item]
    c.output("out", out)
    return c


def _popcount(c: Circuit, bits: list[Bit]) -> Word:
    """The number of set bits among ``bits`` (at most 32) as a 32-bit word."""
    from qwengpu.compiler.ops import sum_columns

    cnt = sum_columns(c, [list(bits)] + [[] for _ in range(5)])
    return Word(c, cnt + [Bit(c, const=0)] * (32 - len(cnt)))


def first_of(c: Circuit, bits: list[Bit]) -> list[Bit]:
    """One-hot of the lowest set bit (all zero when none is set)."""
    return [c.all_of([bits[x]] + [~bits[y] for y in range(x)]) for x in range(len(bits))]
