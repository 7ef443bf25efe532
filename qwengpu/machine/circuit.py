"""The machine as ONE per-token circuit in the compiler's DSL (stage: the GPU in the weights).

``next_token = step(token, memories)``: the circuit reads the 16-bit input token (see
``protocol.py``), its DeltaNet memories, and computes the 16-bit next token. A memory is read and
written only at its own layer, write before read, so a state can never be read and then
rewritten in one token; every state below is written only with information the token (or an
earlier memory) carries. Memories:

* ``ctl`` (1 row): mode | pc-or-address | group, written by PASS and load-address tokens and read
  by every token, so chunk, MASK and STORE tokens know the current instruction and group.
* ``stage`` (16 rows x 11 bits): DATA chunks of a ROM row or a global-memory word being loaded.
* ``rom0..rom3`` (4 banks of 1,024 rows, one instruction each; one ``rom`` bank in a shape
  without room for four), read at the latched 12-bit pc: the PASS token's 9 bits and ``bnk``, the
  512-row bank named by the last BANK token (1 row, 3 bits; the model writes BANK before a pass
  in another bank, and the step after it chooses the same pass again). Every bank reads the pc's
  row; the pc's top two bits select one (an MLP after the last bank). A ROM-mode DATA token writes
  the bank that ``bnk``'s top two bits name, at ROMADDR's 10-bit row.
* ``rfa{l}_{j}`` / ``rfb{l}_{j}`` (lane position l, 11-bit chunk j; row = group * 32 + register):
  the register file, one copy per operand port. A result chunk token writes its chunk
  straight into both copies, so the next pass reads the committed value.
* ``prg{l}`` / ``prc{l}`` (row = group * 8 + predicate): the predicates (guard and operand port).
* ``gmem_{k}`` (one 32-bit word per row): ONE copy with one read port, in banks of
  ``gmem_bank_rows`` rows (bank k holds words k*rows.., one layer's key heads at most: a memory
  sits in one layer), read at each token at the address of the lane whose word that step emits
  (``lef``, 1 row: the pass's lanes, latched early) or the dump's word; written by STORE(lane)
  tokens (address and data re-read from the RF at that token) and by the prompt's MEM loads;
  ``gpg`` / ``dhp`` (1 row): the page latches (PAGE / ENDPAGE tokens) giving MEMADDR / DUMPADDR
  their high bits.
* ``nth``, ``nbl``+``nbh``, ``blk``+``bhi``, ``ep``, ``dlo``, ``dhi`` (1 row each): threads per block, blocks,
  the running block, the barrier epoch, the dump range.
* scheduler: ``pcs{l}`` / ``pcq{l}`` (row = group; pc | exited | waiting | epoch | block parity of
  lane l of every group; two copies: the group summary and the next-pass mask), ``mpc{w}`` (row =
  group of warp w: the group's minimum pc over running and over live lanes). Rows written in an
  earlier block (parity differs) read as a fresh thread at pc 0, lanes waiting at a barrier of an
  earlier epoch as released: a new block or a barrier release costs one token, not one per thread.
* ``latch`` (1 row, late): the pass's results, effective mask and kind, written at the executing
  token and read by the following chunk / STORE tokens to emit the rest of the result. A row
  whose ``nowb`` bit is set (a dead result: ``codegen.liveness``) latches the kind of an op
  without a result, so no result token follows and nothing is committed.

Scheduling is the interpreter's and ``sim.py``'s: a warp instruction issues at the minimum pc of
the warp's running lanes, lane group by lane group (groups with no lane at that pc are skipped);
a warp runs until all its lanes wait at a barrier or exited, then the next warp; when every live
lane waits, the barrier releases (``BAR``) and scheduling restarts at warp 0; when every lane
exited, the next block starts (``BLOCK``) or the model dumps the output words.

Scope: blocks of <= 64 threads (1-D), <= 65,535 blocks (1-D grid), integer subset (see ``ROM_OPS``),
4-byte global loads and stores without fault detection, ``bar.sync``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from qwengpu.compiler import Circuit, Word
from qwengpu.compiler.ir import Bit
from qwengpu.machine import protocol as P
from qwengpu.machine.fpu import fadd, fmul_fast, fmul_range_ok
from qwengpu.machine.shape import MACHINE_UNITS, MachineShape  # noqa: F401 - re-exported

LANES = 4
NCHUNK = 3  # 11-bit chunks per 32-bit word
GROUPS = 16  # lane groups per block (64 threads)
WARP_GROUPS = 8  # lane groups per 32-thread warp

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
    "mul",
    "call",
    "setp",
    "st",
    "bra",
    "exit",
    "bar",
    "ret",
    "trap",
    "fadd",  # after the others, so the op codes of machines without the adder stay as they were
    # the fast-range float multiplier (``fpu.fmul_fast``), ONE lane per row: the row's ``target``
    # bits 0-1 name the lane (``one_lane_guard``); after the others, for the same reason
    "fmulf",
    # its range row: a predicate per lane, "fmulf is mul.rn here" (``fpu.fmul_range_ok``; ``csign``:
    # .ftz), emitted and committed as a ``setp``'s
    "frange",
)
OP = {n: i for i, n in enumerate(ROM_OPS)}
#: a one-lane row (``MachineShape.lane_rows``): the ROM row's guard fields say "no guard, negated"
#: (``gen`` 0, ``gneg`` 1, a combination an unguarded row never has) and ``gidx`` bits 0-1 name the
#: lane; the other lanes see a guarded-off row (``register_file``). Such a row has no predicate guard
LANE_ROW = {"gen": 0, "gneg": 1}
REG_RESULT_OPS = 19  # ops 0..18 write a register (call: the link, pc + 1), and fadd, fmulf
REG_RESULT_EXTRA = ("fadd", "fmulf")
CMPS = ("eq", "ne", "lt", "le", "gt", "ge")
BOPS = (None, "and", "or", "xor")
# operand a from a special register (ROM field a_sr): thread index in the block, laneid, warpid,
# ctaid.x (the running block)
SR_CODES = {"tid": 1, "laneid": 2, "warpid": 3, "ctaid": 4}

# ROM row fields: (name, width), LSB first
ROM_FIELDS = (
    ("op", 5),
    ("dst", 5),
    ("ra", 5),
    ("a_imm", 1),
    ("a_sr", 3),
    ("rb", 5),
    ("b_imm", 1),
    ("b_off", 1),
    ("cidx", 3),
    ("cneg", 1),
    ("cpt", 1),
    ("gen", 1),  # with gen 0, gneg 1 and gidx the lane: a one-lane row (``LANE_ROW``)
    ("gneg", 1),
    ("gidx", 3),
    ("cmp", 3),
    ("csign", 1),
    ("bop", 2),
    ("imm", 32),
    ("off", 32),
    ("target", P.PC_BITS),
    # the result is dead (no instruction reads it again: ``codegen.liveness``): emitted and
    # committed as by an op without a result (last, so the other fields keep their places)
    ("nowb", 1),
)
ROM_BITS = sum(w for _, w in ROM_FIELDS)
#: rows per ROM bank: 8 key heads of 128 rows; 1,024-row banks written by ROMADDR's 10 bits
ROM_BANK_ROWS = 1 << P.ROMADDR_BITS
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


#: MLP neurons per layer that placement leaves free for reset neurons when the machine has the
#: float adders (without them the residual does not fit: bench/fadd_unit.py)
FADD_MLP_RESERVE = 1536


def mlp_reserve(shape: MachineShape) -> int:
    """The ``compile_circuit(mlp_reserve=...)`` the machine of ``shape`` is compiled with."""
    return FADD_MLP_RESERVE if shape.fadd else 0


def _match(c: Circuit, bits: Word | list[Bit], value: int) -> Bit:
    """[bits == value] in one MLP (one neuron)."""
    bl = list(bits)
    return c.all_of([b if (value >> i) & 1 else ~b for i, b in enumerate(bl)])


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


def _argmin(c: Circuit, valid: list[Bit], vals: list[Word]) -> tuple[list[Bit], Word, Bit]:
    """(one-hot of the first valid entry with the smallest value, that value, any valid)."""
    n = len(vals)
    # x is the first minimum iff for every other valid y: v[x] <= v[y] (y > x) or v[x] < v[y] (y < x)
    gt = {(x, y): vals[y] < vals[x] for x in range(n) for y in range(n) if x < y}
    win = []
    for x in range(n):
        conds = [valid[x]]
        for y in range(n):
            if y == x:
                continue
            if y > x:
                conds.append(c.any_of([~valid[y], ~gt[(x, y)]]))  # v[x] <= v[y]
            else:
                conds.append(c.any_of([~valid[y], gt[(y, x)]]))  # v[x] < v[y]
        win.append(c.all_of(conds))
    val = c.select(c.encode(c.concat(*win)), vals) if n > 1 else vals[0]
    return win, val, c.any_of(valid)


# ---- the units, in the order their signals are created (the node order fixes the layout: keep it)


@dataclass
class Fetch:
    """What fetch and decode hands every later unit: the token's kind and fields, the launch and
    control latches, the staged chunks, the decoded ROM row and the executing token's lanes."""

    tok: Word
    t: list[Bit]
    one0: Word
    is_data: Bit
    is_passm: Bit
    is_mask: Bit
    is_exec: Bit
    is_dumpaddr: Bit
    is_store: Bit
    is_short: Bit
    is_ushort: Bit
    is_high: Bit  # HIGH(lane, h): a lane result's bits 11..17 after its chunk 0 (NTHREADS' bit-9 form)
    is_block: Bit
    is_blockhi: Bit
    is_bar: Bit
    is_bank: Bit
    is_page: Bit  # PAGE / ENDPAGE (a BANK token with argument bit 9): not a ROM bank
    idx: Word
    d: Word
    nth: Word
    nbl: Word
    blk: Word
    ep: Bit
    gpar: Bit
    dlo: Word
    dhi: Word
    mode: Word
    cur: Word
    cg: Word
    cpc: Word
    bnk: Word
    m_exec: Bit
    m_mem: Bit
    m_dump: Bit
    g_exists: list[Bit]
    staged: list[Word]
    f: dict[str, Word]
    op: Word
    lane_exists: list[Bit]
    mask: list[Bit]


@dataclass
class Operands:
    """Register file output per lane: operands a and b, the raw register a, guard and c predicate."""

    exec_data: Bit  # a result chunk token (DATA in exec mode): commits here, sequences chunks in emit
    A: list[Word]
    B: list[Word]
    RA: list[Word]  # the register operand a itself (a return address for ``ret``)
    G: list[Bit]
    CV: list[Bit]


@dataclass
class Results:
    """Datapath output per lane: the 32-bit result and the setp predicate bit; the next pc."""

    res: list[Word]
    pbits: list[Bit]
    pc1: Word


@dataclass
class Schedule:
    """Scheduler output: the lanes the pass executes, the group state, the next PASS / MASK token."""

    eff: list[Bit]
    is_trap: Bit
    grp_live: list[Bit]
    grp_run: list[Bit]
    min_run: Word
    has_run: Bit
    runs: list[Bit]
    lives: list[Bit]
    cont: Bit
    cand: list[Bit]
    has_sel: Bit
    sel_g: Word
    sel_pc: Word
    full: Bit
    q_mask: list[Bit]
    any_live: Bit
    next_tok: Word
    mask_tok: Word


@dataclass
class Emitted:
    """The next token and the emit signals the debug outputs show."""

    out: Word
    c_next: Bit
    c_data: Bit
    L_eff: list[Bit]
    uniform: Bit


def _ctl_is(c: Circuit, tok: Word, k: int) -> Bit:
    """[tok is the control token of kind k]."""
    t, sub = list(tok.bits), tok[10:14]
    return c.all_of([t[15], t[14]] + [b if (k >> i) & 1 else ~b for i, b in enumerate(sub.bits)])


def _ctl_part(c: Circuit, tok: Word, k: int, hi: bool) -> Bit:
    """[tok is the control token of kind k with argument bit 9 = hi] (BLOCK / NBLOCKS: which part
    of the 16-bit value it carries)."""
    t, sub = list(tok.bits), tok[10:14]
    b9 = t[P.BLOCK_LO_BITS] if hi else ~t[P.BLOCK_LO_BITS]
    return c.all_of([t[15], t[14], b9] + [b if (k >> i) & 1 else ~b for i, b in enumerate(sub.bits)])


def _lane_end(c: Circuit, tok: Word, lanes: Iterable[int]) -> Bit:
    """[tok is SHORT(x, v) or HIGH(x, h) with x in ``lanes``]: the token that ends lane x's result.
    One function of the token's top bits: a signal every later layer carries, so one per use."""
    want = set(lanes)

    def fn(*bits: int) -> int:
        v = sum(b << i for i, b in enumerate(bits)) << 7
        if v >> 14 != 3:
            return 0
        kind = (v >> 10) & 15
        if kind == P.SHORT:
            return int((v >> 8) & 3 in want)
        return int(kind == P.NTHREADS and bool(v & P.HIGH_FLAG) and (v >> P.HIGH_BITS) & 3 in want)

    return c.lut(list(tok.bits[7:16]), fn)


def _latch(c: Circuit, name: str, width: int, value: Word, enable: Bit) -> Word:
    """A one-row memory holding ``value`` from the last token that enabled it."""
    one0 = c.const(0, 1)
    m = c.memory(name, rows=1, width=width)
    m.write(one0, value[:width], enable)  # type: ignore[arg-type]
    return m.read(one0)


def _exists(c: Circuit, nth: Word, group: Word, lane: int) -> Bit:
    """Thread 4*group + lane exists in this launch."""
    return c.concat(c.const(lane, 2), group, c.const(0, 1)) < nth


def _resolve(c: Circuit, row: Word, live_if_fresh: Bit, gpar: Bit, ep: Bit) -> tuple[Word, Bit, Bit]:
    """A lane row -> (pc, live, running), seen from the current block and barrier epoch."""
    cur_blk = row[P.PC_BITS + 3] ^ gpar  # rows store the inverted block parity: a blank row is stale
    live = c.all_of([live_if_fresh, ~c.all_of([cur_blk, row[P.PC_BITS]])])
    waits = c.all_of([cur_blk, row[P.PC_BITS + 1], ~(row[P.PC_BITS + 2] ^ ep)])
    pc = c.concat(*[c.all_of([cur_blk, b]) for b in row[: P.PC_BITS].bits])
    return pc, live, c.all_of([live, ~waits])  # type: ignore[return-value]


def _rom_read(c: Circuit, shape: MachineShape, cur: Word, bnk: Word, cpc: Word, row: Word,
              load: list[Bit]) -> Word:
    """The ROM row at ``cpc``; a token where every bit of ``load`` is set writes ``row`` at
    ``cur``'s 10 bits in the bank that the BANK latch's high bits name."""
    nbanks = -(-shape.rom_rows // ROM_BANK_ROWS)
    hi_bits = max(0, (nbanks - 1).bit_length())
    reads = []
    for b in range(nbanks):
        rows = min(ROM_BANK_ROWS, shape.rom_rows - b * ROM_BANK_ROWS)
        nbits = (rows - 1).bit_length()
        m = c.memory("rom" if nbanks == 1 else f"rom{b}", rows=rows, width=ROM_BITS)
        mine = [x if (b >> i) & 1 else ~x for i, x in enumerate(bnk[1 : 1 + hi_bits].bits)]
        m.write(cur[:nbits], row, c.all_of(load + mine))
        reads.append(m.read(cpc[:nbits]))
    if nbanks == 1:
        return reads[0]
    sel = cpc[P.PC_BITS - hi_bits : P.PC_BITS]
    return c.select(sel, reads + [reads[0]] * ((1 << hi_bits) - nbanks))


def fetch_decode(c: Circuit, shape: MachineShape) -> Fetch:
    """Decode + ROM read (doc section 5, layers 0-1): the token, the launch registers, the control
    latch (mode | pc-or-address | group), the staging memory, the ROM row and the active lanes."""
    tok = c.input("tok", 16)
    t = list(tok.bits)
    one0 = c.const(0, 1)
    is_data = ~t[15]
    is_pass_full = c.all_of([t[15], ~t[14], t[13]])
    is_passm = c.all_of([t[15], ~t[14], ~t[13]])
    idx, d = tok[11:15], tok[0:11]
    sub, arg = tok[10:14], tok[0:10]

    def ctl_is(k: int) -> Bit:
        return _ctl_is(c, tok, k)

    is_dumpaddr = ctl_is(P.DUMPADDR)
    is_store, is_mask = ctl_is(P.STORE), ctl_is(P.MASK)
    is_short, is_ushort = ctl_is(P.SHORT), ctl_is(P.USHORT)
    is_block, is_bar = ctl_is(P.BLOCK), ctl_is(P.BAR)
    is_exec = is_pass_full | is_passm  # both PASS forms execute; MASK only sets a group's mask

    # ---- launch registers and the control latch: mode | a (pc or address) | group
    # NTHREADS(n) sets the thread count; its bit-9 form is HIGH, a lane result's last token (protocol.py)
    nth = _latch(c, "nth", 7, arg, _ctl_part(c, tok, P.NTHREADS, False))
    is_high = _ctl_part(c, tok, P.NTHREADS, True)
    # block count and running block: 16 bits each, the low 9 from NBLOCKS / BLOCK tokens, the high
    # 7 from their HI forms (argument bit 9 set; protocol.py); the low latch of BLOCK is the parity
    nbl = c.concat(_latch(c, "nbl", P.BLOCK_LO_BITS, arg, _ctl_part(c, tok, P.NBLOCKS, False)),
                   _latch(c, "nbh", P.BLOCK_HI_BITS, arg, _ctl_part(c, tok, P.NBLOCKS, True)))
    is_blockhi = _ctl_part(c, tok, P.BLOCK, True)
    blk = c.concat(_latch(c, "blk", P.BLOCK_LO_BITS, arg, _ctl_part(c, tok, P.BLOCK, False)),
                   _latch(c, "bhi", P.BLOCK_HI_BITS, arg, is_blockhi))
    ep = _latch(c, "ep", 1, arg, is_bar)[0]
    gpar = blk[0]
    dlo = _latch(c, "dlo", 10, arg, ctl_is(P.DUMPLO))
    dhi = _latch(c, "dhi", 10, arg, ctl_is(P.DUMPHI))
    # each of these is ONE function of the token's top bits (one MLP): the control latch, and
    # everything addressed through it, sits as early as possible
    top = [t[15], t[14], *sub.bits]  # t15, t14, then the control kind (t10..t13)

    def top_lut(fn) -> Bit:
        return c.lut(top, lambda t15, t14, *k: int(fn(t15, t14, sum(b << i for i, b in enumerate(k)))))

    mode0 = top_lut(lambda t15, t14, k: t15 and t14 and k in (P.ROMADDR, P.DUMPADDR))
    mode1 = top_lut(lambda t15, t14, k: t15 and t14 and k in (P.MEMADDR, P.DUMPADDR))
    ctl_en = top_lut(lambda t15, t14, k: t15 and (not t14 or k in (P.ROMADDR, P.MEMADDR, P.DUMPADDR)))
    # a PASS stores its pc and group, an address token its argument (the latch is written only then)
    a_val = c.concat(tok[0 : P.PASS_PC_BITS], t[P.PASS_PC_BITS] & t[14])
    g_val = c.concat(*[t[P.PASS_PC_BITS + i] & ~t[14] for i in range(4)])
    ctl = _latch(c, "ctl", 16, c.concat(mode0, mode1, a_val, g_val), ctl_en)
    mode, cur, cg = ctl[0:2], ctl[2:12], ctl[12:16]
    # the pc of the executing pass: the PASS token's 9 bits and the ROM bank of the last BANK
    # token (a separate latch read beside ``ctl``: no extra layer before the ROM read)
    is_bank = ctl_is(P.BANK)
    is_page = _ctl_part(c, tok, P.BANK, True)  # PAGE / ENDPAGE: argument bit 9 (protocol.py)
    bank_bits = P.PC_BITS - P.PASS_PC_BITS
    bnk = _latch(c, "bnk", bank_bits, c.concat(arg[0], arg[2 : 1 + bank_bits]),
                 _ctl_part(c, tok, P.BANK, False))
    cpc = c.concat(cur[: P.PASS_PC_BITS], bnk)
    m_exec, _m_rom, m_mem, m_dump = (_match(c, mode, k) for k in range(4))
    g_exists = [c.threshold(list(nth.bits), [1 << i for i in range(7)], 4 * h + 1) for h in range(GROUPS)]

    # ---- staging of loaded rows, ROM
    stage = c.memory("stage", rows=16, width=P.CHUNK)
    stage.write(idx, d, is_data)
    staged = [stage.read(c.const(k, 4)) for k in range(max(ROM_CHUNKS, P.IDX_UNIFORM + 2))]
    # the ROM in banks of up to ROM_BANK_ROWS rows (one bank's key heads fit one layer's mixer):
    # a DATA token in ROM mode writes the bank named by the BANK latch's high bits (ROMADDR's
    # argument is the row within it); every bank reads the pc's row and the pc's high bits select
    f = _fields(_rom_read(c, shape, cur, bnk, cpc, c.concat(*staged[:ROM_CHUNKS])[:ROM_BITS],
                          [~t[15], mode[0], ~mode[1]]))

    # ---- the executing token's active lanes: every thread of the group (PASS f=1), or the group's
    # sticky mask (PASS f=0), the last MASK(g, m) token's m. The table is addressed by the token's
    # own group bits (a MASK's argument bits 4..7, a PASS's bits 9..12), never by the scheduler state;
    # its late mirror ``mtl`` (scheduler) is written by the same tokens, so both always agree
    lane_exists = [_exists(c, nth, cg, lane) for lane in range(LANES)]
    mte = c.memory("mte", rows=GROUPS, width=LANES)
    mte.write(tok[4:8], tok[0:4], is_mask)
    mrow = mte.read(tok[P.PASS_PC_BITS : P.PASS_PC_BITS + 4])
    mask = [c.any_of([c.all_of([is_pass_full, lane_exists[x]]), c.all_of([is_passm, mrow[x]])])
            for x in range(LANES)]
    return Fetch(
        tok=tok, t=t, one0=one0, is_data=is_data, is_passm=is_passm, is_exec=is_exec,
        is_mask=is_mask, is_dumpaddr=is_dumpaddr, is_store=is_store, is_short=is_short, is_ushort=is_ushort,
        is_high=is_high,
        is_block=is_block, is_blockhi=is_blockhi, is_bar=is_bar, is_bank=is_bank, is_page=is_page, idx=idx,
        d=d, nth=nth, nbl=nbl, blk=blk,
        ep=ep, gpar=gpar, dlo=dlo, dhi=dhi, mode=mode, cur=cur, cg=cg, cpc=cpc, bnk=bnk, m_exec=m_exec,
        m_mem=m_mem, m_dump=m_dump, g_exists=g_exists, staged=staged, f=f, op=f["op"],
        lane_exists=lane_exists, mask=mask,
    )


def commit(c: Circuit, lane: int, tok: Word, staged: Sequence[Word] | Mapping[int, Word], is_short: Bit,
           is_ushort: Bit, m_exec: Bit, is_high: Bit | None = None) -> tuple[Bit, Word]:
    """When the register file's lane position ``lane`` is written, and with what: (write enable,
    32-bit value). A register is written whole at its last chunk token (its lane's third chunk or
    the third uniform chunk, with the two staged chunks before it), by a HIGH for this lane (its
    staged chunk 0 and the token's 7 bits), by a SHORT for this lane or by a USHORT, in exec mode;
    the enable is one function of the token's top bits, then "and in exec mode".
    (``bench/late_units.py``'s late copy of the register file commits by this same rule; without
    ``is_high`` it is the rule before HIGH.)"""
    t = list(tok.bits)
    idx, d = tok[11:15], tok[0:11]
    top = [t[i] for i in range(7 if is_high is not None else 8, 16)]

    def writes(*bits: int) -> int:
        v = sum(b << i for i, b in enumerate(bits)) << (16 - len(bits))
        if not v >> 15:
            return int((v >> 11) & 15 in (3 * lane + 2, P.IDX_UNIFORM + 2))
        if v >> 14 & 1:
            kind = (v >> 10) & 15
            if is_high is not None and kind == P.NTHREADS:
                return int(bool(v & P.HIGH_FLAG) and (v >> P.HIGH_BITS) & 3 == lane)
            return int(kind == P.USHORT or (kind == P.SHORT and (v >> 8) & 3 == lane))
        return 0

    uni = _match(c, idx, P.IDX_UNIFORM + 2)
    en = c.all_of([c.lut(top, writes), m_exec])
    wlong = c.mux(uni, c.concat(staged[P.IDX_UNIFORM], staged[P.IDX_UNIFORM + 1], d),
                  c.concat(staged[3 * lane], staged[3 * lane + 1], d))[:32]
    # SHORT(lane, 8 bits) / USHORT(10 bits, every lane): a small result in one token
    wshort = c.concat(tok[0:8], c.all_of([is_ushort, t[8]]), c.all_of([is_ushort, t[9]]), c.const(0, 22))
    if is_high is None:
        return en, c.mux(is_short | is_ushort, wshort, wlong)
    # HIGH(lane, h): chunk 0 staged by the DATA token before it, h its bits 11..17
    whigh = c.concat(staged[3 * lane], tok[0 : P.HIGH_BITS], c.const(0, 32 - P.CHUNK - P.HIGH_BITS))
    return en, c.select(c.concat(is_short | is_ushort, is_high), [wlong, wshort, whigh])


def register_file(c: Circuit, shape: MachineShape, fx: Fetch) -> Operands:
    """RF read and operand select (doc section 5, layers 2-3), per lane position; row = group * 32 +
    register. A result's last chunk token commits the word to both port copies (write before read)."""
    t, f, cg, idx, d, m_exec = fx.t, fx.f, fx.cg, fx.idx, fx.d, fx.m_exec
    tok, staged, is_ushort = fx.tok, fx.staged, fx.is_ushort
    reg_bits = (shape.nregs - 1).bit_length()
    exec_data = c.all_of([fx.is_data, m_exec])
    wrow = c.concat(f["dst"][:reg_bits], cg)
    A: list[Word] = []
    B: list[Word] = []
    RA: list[Word] = []
    G: list[Bit] = []
    CV: list[Bit] = []
    tid_lo = [c.concat(c.const(lane, 2), cg) for lane in range(LANES)]
    for lane in range(LANES):
        en, wval = commit(c, lane, tok, staged, fx.is_short, is_ushort, m_exec, fx.is_high)
        rfv = []
        for port, reg in (("a", f["ra"]), ("b", f["rb"])):
            bank = c.memory(f"rf{port}{lane}", rows=shape.nregs * GROUPS, width=32)
            bank.write(wrow, wval, en)  # type: ignore[arg-type]
            rfv.append(bank.read(c.concat(reg[:reg_bits], cg)))
        rf_a, rf_b = rfv
        RA.append(rf_a)
        pen = c.all_of([c.all_of([~t[15], *idx.bits, d[4 + lane]]), m_exec])
        prow = c.concat(f["dst"][:3], cg)
        pv = []
        for port, pidx in (("g", f["gidx"]), ("c", f["cidx"])):
            pr = c.memory(f"pr{port}{lane}", rows=shape.npreds * GROUPS, width=1)
            pr.write(prow, d[lane : lane + 1], pen)
            pv.append(pr.read(c.concat(pidx, cg))[0])
        g, cp = pv
        if shape.lane_rows:  # gen 0, gneg 1: a one-lane row, the lane in gidx bits 0-1 (``LANE_ROW``)
            G.append(c.lut([f["gen"][0], f["gneg"][0], g, *f["gidx"].bits[:2]],
                           lambda en, ng, v, k0, k1, ln=lane: int(
                               v ^ ng if en else (not ng) or k0 + 2 * k1 == ln)))
        else:
            G.append(c.lut([f["gen"][0], f["gneg"][0], g], lambda en, ng, v: int((not en) or (v ^ ng))))
        CV.append(c.lut([f["cpt"][0], f["cneg"][0], cp], lambda pt, ng, v: int((not ng) if pt else (v ^ ng))))
        zero = c.const(0, 32)
        specials = [
            c.concat(tid_lo[lane], c.const(0, 26)),  # thread index in the block
            c.concat(tid_lo[lane][:5], c.const(0, 27)),  # laneid
            c.concat(cg[3], c.const(0, 31)),  # warpid
            c.concat(fx.blk, c.const(0, 32 - len(fx.blk))),  # ctaid.x
        ]
        base = c.mux(f["a_imm"][0], f["imm"], rf_a)
        A.append(c.select(f["a_sr"], [base, *specials, zero, zero, zero]))
        # b: register, the immediate, or (second immediate) the ``off`` field
        B.append(c.select(c.concat(f["b_off"], f["b_imm"]), [rf_b, rf_b, f["imm"], f["off"]]))
    return Operands(exec_data=exec_data, A=A, B=B, RA=RA, G=G, CV=CV)


@dataclass
class Pages:
    """The page latches (``protocol.py``): the page of MEMADDR / DUMPADDR and of the dump's last word."""

    page: Word | None  # None: a shape of one page (1,024 words)
    end: Word | None


def global_memory(c: Circuit, shape: MachineShape, fx: Fetch, ops: Operands
                  ) -> tuple[Word, list[Word], Pages]:
    """Address add + global memory read (doc section 5): ONE read port over one copy of the
    memory, read at every token at the address of the lane whose result that token's step emits
    (the dump's word in DUMP mode); written by STORE(lane) tokens and the prompt's MEM loads.
    Returns the port's word, each lane's word address (``load_result``) and the page latches.

    Why one port: a load's result leaves the machine one lane at a time (chunks, SHORT), so each
    step needs one lane's word, not four; the four lanes' addresses stay in the register file
    (re-read at every token of the pass) and the lanes the pass executes are latched early
    (``lef``), so the emitting lane is known before the banks. One copy instead of four gives the
    same 8 bank layers four times the words (16,384 on the 2B shape).

    Why banks, built after the scheduler: a memory sits in one layer (16 key heads of 128 rows),
    so a memory of more than ``gmem_bank_rows`` words is banks in successive layers, each written
    when the address's high bits name it and all read at once, the high bits selecting. Built
    after the scheduler and the units, the banks take layers beside them (the scheduler's ``mpc``
    keeps its layer) and the loaded word joins the result late (``emit``), as the multiplier's
    does."""
    f, cur, staged, tok, idx = fx.f, fx.cur, fx.staged, fx.tok, fx.idx
    rw_bits = (shape.gmem_words - 1).bit_length()
    gw_bits = (shape.gmem_words + shape.ro_words - 1).bit_length()
    rows = min(shape.gmem_bank_rows, shape.gmem_words)
    rb = (rows - 1).bit_length()
    nbanks = -(-shape.gmem_words // rows)
    words = [(ops.A[lane] + f["off"])[2 : 2 + gw_bits] for lane in range(LANES)]
    # MEMADDR / DUMPADDR: the control latch's 10 bits, the page latch's above them
    pg_bits = gw_bits - P.ADDR_BITS
    pages = Pages(None, None)
    maddr = cur[:gw_bits]
    if pg_bits > 0:
        assert pg_bits <= P.PAGE_BITS
        pval = c.concat(*[tok[b] for b in P.PAGE_ARG_BITS[:pg_bits]])
        pages = Pages(_latch(c, "gpg", pg_bits, pval, c.all_of([fx.is_page, ~fx.t[0]])),
                      _latch(c, "dhp", pg_bits, pval, c.all_of([fx.is_page, fx.t[0]])))
        maddr = c.concat(cur[: P.ADDR_BITS], pages.page)
    sl = tok[0:2]
    st_word = c.select(sl, words)
    st_data = c.select(sl, ops.B)
    g_addr = c.mux(fx.is_store, st_word, maddr)
    g_en = fx.is_store | c.all_of([fx.is_data, fx.m_mem])
    g_data = Word(c, [c.all_of([b, g_en]) for b in
                      c.mux(fx.is_store, st_data, c.concat(*staged[:NCHUNK])[:32]).bits])
    # a writable bank takes a word whose address's high bits name it (a store into the read-only
    # words above them names none: dropped; the bounds watch refuses it first)
    ens = [c.all_of([g_en, _match(c, g_addr[rb:gw_bits], k)]) if gw_bits > rb else g_en
           for k in range(nbanks)]
    # the lane whose word this step emits (``emit``'s order, from the early latch of the pass's
    # lanes): the pass's first lane at the executing token and at the uniform chunks, lane x at
    # its chunks 0 and 1, the next lane after x at its last chunk, its HIGH or its SHORT
    lef = list(_latch(c, "lef", LANES, c.concat(*[c.all_of([fx.mask[x], ops.G[x]]) for x in range(LANES)]),
                      fx.is_exec).bits)
    xd = c.all_of([fx.is_data, fx.m_exec])
    done = [c.any_of([c.all_of([xd, _match(c, idx, 3 * x + 2)]), _lane_end(c, tok, [x])])
            for x in range(LANES)]
    start = fx.is_exec | c.all_of([xd, c.any_of([_match(c, idx, P.IDX_UNIFORM + j) for j in range(2)])])
    port = []
    for y in range(LANES):
        terms = [c.all_of([xd, c.any_of([_match(c, idx, 3 * y + j) for j in range(2)])]),
                 c.all_of([start, lef[y]] + [~lef[z] for z in range(y)])]
        terms += [c.all_of([done[x], lef[y]] + [~lef[z] for z in range(x + 1, y)]) for x in range(y)]
        port.append(c.any_of(terms))
    addr = c.mux(fx.m_dump, maddr, c.select(c.encode(c.concat(*port)), words))
    # a bank reads (and writes) at row 0 unless this token's word is its own (an ld pass, the
    # dump; a store or MEM word into it): an idle bank's input then repeats from token to token,
    # so the fast runtime's memo serves it (a bank step costs ~5 us instead of ~42 on the 2B shape)
    rd = c.any_of([fx.m_dump, fx.is_dumpaddr, _match(c, fx.op, OP["ld"])])
    sel = addr[rb:gw_bits]
    entries: list[Word] = []
    for k in range(nbanks):
        gmem = c.memory("gmem" if nbanks == 1 and not shape.ro_words else f"gmem_{k}", rows=rows, width=32)
        gmem.write(Word(c, [c.all_of([b, ens[k]]) for b in g_addr[:rb].bits]), g_data, ens[k])
        on = c.all_of([rd, _match(c, sel, k)]) if len(sel) else rd
        entries.append(gmem.read(Word(c, [c.all_of([b, on]) for b in addr[:rb].bits])))
    entries += read_only_memory(c, shape, fx, addr, maddr, rd, gw_bits, rows)
    if len(entries) == 1:
        return entries[0], words, pages
    assert rw_bits <= gw_bits
    return c.select(sel, entries + [entries[0]] * ((1 << len(sel)) - len(entries))), words, pages  # type: ignore[arg-type]


def read_only_memory(c: Circuit, shape: MachineShape, fx: Fetch, addr: Word, maddr: Word, rd: Bit,
                     gw_bits: int, rows: int) -> list[Word]:
    """The read-only words above the writable ones (docs/machine-in-weights.md 9.16): four words a
    row, ``ro_bank_rows`` rows a bank (one layer's 16 key heads on the 2B shape, 8,192 words),
    written whole by the prompt (MEMADDR of the row's first word, then 12 chunks: the row is
    written at chunk 11 from the 12 staged chunks), read through the same port as the writable
    banks (the row at the address's middle bits, the word by its low two). Why: a store replaces
    a DeltaNet row's whole value, so writable words take a row each; words never stored to can
    share one, four times the words per layer. Returns one entry per ``rows`` words of the port's
    select (the writable banks' granularity), from the first read-only word on."""
    if not shape.ro_words:
        return []
    bw = 4 * shape.ro_bank_rows  # words per read-only bank
    assert shape.gmem_words % bw == 0 and bw % rows == 0 and shape.ro_words % bw == 0
    ob = (bw - 1).bit_length()
    first = shape.gmem_words // bw  # the bank number (address >> ob) of the first read-only bank
    row_bits = ob - 2
    wen = c.all_of([fx.is_data, fx.m_mem, _match(c, fx.idx, 4 * NCHUNK - 1)])
    # the row's 12 chunks from a stage of its own placed beside the banks (``place_after`` the
    # port's address): the early stage's outputs would cross the crowded middle layers (132 bits;
    # the 2B residual has no room there), this stage's inputs are 16 bits
    late = c.memory("rostage", rows=16, width=P.CHUNK)
    late.write(fx.idx, fx.d, c.all_of([fx.is_data, fx.m_mem]))
    late.place_after(addr[0])
    rows12 = [late.read(c.const(k, 4)) for k in range(4 * NCHUNK)]
    data = c.concat(*[c.concat(*rows12[NCHUNK * j: NCHUNK * (j + 1)])[:32] for j in range(4)])
    # an idle bank's input repeats (the fast runtime's memo): the data is 0 but at a prompt's row
    # write (one gated copy for all the banks: only the prompt writes them); the row address is
    # the MEMADDR latch's, which changes only at MEMADDR, DUMPADDR and PAGE tokens
    wa = maddr[2:ob]
    dg = Word(c, [c.all_of([b, wen]) for b in data.bits]) if shape.gmem_late else data
    out: list[Word] = []
    for k in range(shape.ro_words // bw):
        bank = c.memory(f"romem_{k}", rows=shape.ro_bank_rows, width=128)
        bank.write(wa, dg, c.all_of([wen, _match(c, maddr[ob:gw_bits], first + k)]))
        on = c.all_of([rd, _match(c, addr[ob:gw_bits], first + k)])
        row = bank.read(Word(c, [c.all_of([b, on]) for b in addr[2:ob].bits]))
        word = c.select(addr[0:2], [row[32 * j: 32 * (j + 1)] for j in range(4)])
        out += [word] * (bw // rows)
    assert row_bits > 0
    return out


def load_result(c: Circuit, fx: Fetch, dp: Results, words: list[Word]) -> None:
    """``ld``: the pass's result per lane is the lane's word ADDRESS, so the latch's uniform test
    (equal results) reads "every lane loads the same word"; the word itself comes through the read
    port at each token that emits it (``emit``)."""
    is_ld = _match(c, fx.op, OP["ld"])
    for lane in range(LANES):
        a = words[lane]
        dp.res[lane] = c.mux(is_ld, c.concat(a, c.const(0, 32 - len(a))), dp.res[lane])


def datapath(c: Circuit, fx: Fetch, ops: Operands) -> Results:
    """The integer unit per lane (doc section 5): eight units (the multiplier: ``multiplier``; the
    loaded word: ``load_result``), few 32-bit results live at once (the residual is the scarce
    resource: every live bit is a dimension), the result mux, the setp bit."""
    f, op = fx.f, fx.op
    pc1 = (fx.cpc + 1)[: P.PC_BITS]
    units = ("selmov", "arith", "logic", "shift", "minmax", "ld", "count", "link")
    unit_of = {"mov": 0, "sel": 0, "add": 1, "sub": 1, "and": 2, "or": 2, "xor": 2, "not": 2, "shl": 3,
               "shr": 3, "shrs": 3, "brev": 3, "min": 4, "max": 4, "ld": 5, "popc": 6, "clz": 6, "call": 7}
    assert len(units) == 8

    def op_lut(pred) -> Bit:
        return c.lut(op.bits, lambda *bs: int(pred(ROM_OPS[sum(b << i for i, b in enumerate(bs))]
                                                   if sum(b << i for i, b in enumerate(bs)) < len(ROM_OPS)
                                                   else "")))

    unit = c.concat(*[op_lut(lambda n, k=k: (unit_of.get(n, 0) >> k) & 1) for k in range(3)])
    is_sub, is_mov = op_lut(lambda n: n == "sub"), op_lut(lambda n: n == "mov")
    is_min = op_lut(lambda n: n == "min")
    lg0, lg1 = op_lut(lambda n: n in ("or", "not")), op_lut(lambda n: n in ("xor", "not"))  # and or xor not
    rev_in, rev_out = op_lut(lambda n: n in ("shl", "brev")), op_lut(lambda n: n == "shl")
    arith_sh, no_shift = op_lut(lambda n: n == "shrs"), op_lut(lambda n: n == "brev")
    is_clz = op_lut(lambda n: n == "clz")
    res: list[Word] = []
    pbits: list[Bit] = []
    for lane in range(LANES):
        a, b = ops.A[lane], ops.B[lane]
        selmov = c.mux(ops.CV[lane] | is_mov, a, b)
        arith = c.add(a, Word(c, [x ^ is_sub for x in b.bits]), is_sub)
        logic = Word(c, [
            c.lut([x, y, lg0, lg1], lambda x_, y_, l0, l1: [x_ & y_, x_ | y_, x_ ^ y_, 1 - x_][l0 + 2 * l1])
            for x, y in zip(a.bits, b.bits, strict=True)
        ])
        # one right shifter serves shl (reversed in and out), shr, shr.s and brev (reversed in, no shift)
        sh = c.mux(no_shift, c.const(0, 5), b[:5])
        big = c.all_of([~no_shift, c.any_of(b.bits[5:])])
        fill = c.all_of([arith_sh, a[31]])
        x = c.mux(rev_in, Word(c, list(reversed(a.bits))), a)
        y = (c.concat(x, fill).as_signed() >> sh)[:32]
        y = c.mux(big, Word(c, [fill] * 32), y)
        shift = c.mux(rev_out, Word(c, list(reversed(y.bits))), y)
        # comparisons: signed = unsigned with the sign bits flipped; gt = not lt and not eq
        sa = Word(c, list(a.bits[:31]) + [a[31] ^ f["csign"][0]])
        sb = Word(c, list(b.bits[:31]) + [b[31] ^ f["csign"][0]])
        eq = a == b
        lt = sa < sb
        gt = c.all_of([~lt, ~eq])
        minmax = c.mux(c.mux(is_min, lt, gt), a, b)
        # popc, and clz = popc of the thermometer "no one at or above position i"
        therm = [c.all_of([~v for v in a.bits[i:]]) for i in range(32)]
        count = _popcount(c, [c.mux(is_clz, t_, v) for t_, v in zip(therm, a.bits, strict=True)])
        link = c.concat(pc1, c.const(0, 32 - P.PC_BITS))
        opts = [selmov, arith, logic, shift, minmax, c.const(0, 32), count, link]
        res.append(c.select(unit, [o.as_unsigned() for o in opts]))  # type: ignore[union-attr]
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
                [*f["bop"].bits, r, ops.CV[lane]],
                lambda b0, b1, r_, cv: int([r_, r_ and cv, r_ or cv, r_ ^ cv][b0 + 2 * b1]),
            )
        )
    return Results(res=res, pbits=pbits, pc1=pc1)


def multiplier(c: Circuit, fx: Fetch, ops: Operands, dp: Results) -> None:
    """``mul``: the low word of a * b per lane (the compiler's Booth radix-4 product, column
    compression and a two-layer adder), replacing the datapath's result of a ``mul`` pass. The high
    word and the float significand products are short sequences of it (``codegen/softcore.py``).

    Why built after the scheduler: units are placed as early as their inputs allow, in the order
    they are built; the operands exist at layer ~5, where the register file's and the scheduler's
    MLPs are full, so a multiplier built first pushes them (and the depth) later. Built after them
    it takes the free MLPs of layers 9-17, before the result latch reads it."""
    is_mul = _match(c, fx.op, OP["mul"])
    for lane in range(LANES):
        prod = (ops.A[lane] * ops.B[lane])[:32]
        dp.res[lane] = c.mux(is_mul, prod, dp.res[lane])


def float_adder(c: Circuit, fx: Fetch, ops: Operands, dp: Results) -> None:
    """``fadd``: ``a + b`` rounded to nearest even per lane (``fpu.fadd``; ``.ftz`` when the ROM
    row's ``csign`` bit is set; ``cmp`` bit 0: ``a - b``, the ISA's ``fsub``; ``cmp`` bit 1: rounded
    to odd, ``fadd`` with ``odd``), replacing the datapath's result of an ``fadd`` pass. The two
    modes cost one residual slot: they are bits the ROM row had free. Built after the multiplier,
    for the same reason (it takes the MLP room the earlier units left)."""
    is_fadd = _match(c, fx.op, OP["fadd"])
    ftz, neg, odd = fx.f["csign"][0], fx.f["cmp"][0], fx.f["cmp"][1]
    for lane in range(LANES):
        dp.res[lane] = c.mux(is_fadd, fadd(c, ops.A[lane], ops.B[lane], ftz, neg=neg, odd=odd), dp.res[lane])


def one_lane_guard(c: Circuit, fx: Fetch, ops: Operands) -> None:
    """A one-lane row (``fmulf``) executes in the lane its ``target`` bits 0-1 name: the other lanes
    see the row as a guarded-off instruction (their pc advances, nothing is written or emitted), so
    the emit and the commit need no new rule. Built right after the register file: the guard is
    what the scheduler's lanes read."""
    is_one = _match(c, fx.op, OP["fmulf"])
    k = fx.f["target"][0:2]
    for lane in range(LANES):
        ops.G[lane] = c.lut([is_one, *k.bits, ops.G[lane]], lambda one, k0, k1, g, ln=lane: int(
            g and (not one or k0 + 2 * k1 == ln)))


def float_multiplier(c: Circuit, fx: Fetch, ops: Operands, dp: Results) -> None:
    """``fmulf``: ``a * b`` of the lane the row names (``fpu.fmul_fast``; with the row's ``cmp`` bit 0
    the error ``a * b - fmulf(a, b)``), one unit for the four
    lanes (operands selected by the row's ``target`` bits 0-1, the product muxed into every lane's
    result: only the named lane's is emitted, ``one_lane_guard``). Built after the adders, for the
    reason the multiplier is built after the scheduler."""
    is_fm = _match(c, fx.op, OP["fmulf"])
    # the lane (``target`` bits 0-1) and, as the index's third bit, "not an fmulf row": an index past
    # the four options selects 0, so outside its rows the unit sees zero operands and its neurons
    # repeat their values from token to token (the fast runtime's memos hit; no extra layer)
    pick = c.concat(fx.f["target"][0:2], ~is_fm)
    # ``cmp`` bit 0: the rounding's error instead of the product (``fpu.fmul_fast``'s ``err``)
    y = fmul_fast(c, c.select(pick, ops.A), c.select(pick, ops.B), fx.f["cmp"][0])[:32]
    for lane in range(LANES):
        dp.res[lane] = c.mux(is_fm, y, dp.res[lane])
    # ``frange``: the predicate that the product above is mul.rn of the lane's operands, per lane
    is_fr = _match(c, fx.op, OP["frange"])
    for lane in range(LANES):
        ok = fmul_range_ok(c, ops.A[lane], ops.B[lane], fx.f["csign"][0])
        dp.pbits[lane] = c.mux(is_fr, ok, dp.pbits[lane])


def scheduler(c: Circuit, fx: Fetch, ops: Operands, pc1: Word) -> Schedule:
    """Next-PC and reconvergence (doc sections 0 and 5, late layers): every lane's scheduler row, the
    group and warp minimum pcs, and the choice of the next pass (group, pc) with its lane mask."""
    op, cg, cpc, ep, gpar, mask = fx.op, fx.cg, fx.cpc, fx.ep, fx.gpar, fx.mask
    is_exec, is_block, is_bar, is_bank, t = fx.is_exec, fx.is_block, fx.is_bar, fx.is_bank, fx.t
    # ---- scheduler state: every lane's pc, written only for the lanes the token names
    eff = [c.all_of([mask[lane], ops.G[lane]]) for lane in range(LANES)]
    is_bra = _match(c, op, OP["bra"]) | _match(c, op, OP["call"])
    is_exit, is_bar_op = _match(c, op, OP["exit"]), _match(c, op, OP["bar"])
    is_ret, is_trap = _match(c, op, OP["ret"]), _match(c, op, OP["trap"])
    grp_pc, grp_live, grp_run, data_rows = [], [], [], []
    for lane in range(LANES):
        data_row = data_row_of(c, fx.f, ops.G[lane], is_bra, is_exit, is_bar_op, pc1, ep, gpar, is_ret,
                               ops.RA[lane])
        data_rows.append(data_row)
        bank = c.memory(f"pcs{lane}", rows=GROUPS, width=P.PC_BITS + 4)
        bank.write(cg, data_row, c.all_of([is_exec, mask[lane]]))
        pc, live, run = _resolve(c, bank.read(cg), fx.lane_exists[lane], gpar, ep)
        grp_pc.append(pc)
        grp_live.append(live)
        grp_run.append(run)

    # the executing group's summary: minimum pc over running lanes and over live lanes
    _, min_run, has_run = _argmin(c, grp_run, grp_pc)
    _, min_all, has_live = _argmin(c, grp_live, grp_pc)
    summary = c.concat(min_run, min_all, has_run, has_live, ep, ~gpar)
    runs, mins, lives = [], [], []
    for w in range(GROUPS // WARP_GROUPS):
        mb = c.memory(f"mpc{w}", rows=WARP_GROUPS, width=2 * P.PC_BITS + 4)
        mb.write(cg[:3], summary, c.all_of([is_exec, cg[3] if w else ~cg[3]]))
        for k in range(WARP_GROUPS):
            h = w * WARP_GROUPS + k
            row = mb.read(c.const(k, 3))
            o = 2 * P.PC_BITS
            cur_blk = row[o + 3] ^ gpar
            same_ep = ~(row[o + 2] ^ ep)
            run = c.all_of([fx.g_exists[h], c.mux(cur_blk, c.mux(same_ep, row[o], row[o + 1]), 1)])
            mn = c.mux(same_ep, row[: P.PC_BITS], row[P.PC_BITS : o])
            mins.append(c.concat(*[c.all_of([cur_blk, b]) for b in mn.bits]))
            runs.append(run)
            lives.append(c.all_of([fx.g_exists[h], c.mux(cur_blk, row[o + 1], 1)]))

    # ---- choose the next pass (group, pc)
    # inside a warp instruction; BLOCK / BAR (and a BANK or MASK written where they were: their bit r)
    # restart at warp 0. A MASK token makes the same choice as the step that wrote it (the state is
    # unchanged): it carries that step's restart (r, bit 8) and whether that step could not continue
    # the instruction (x, bit 9: a BANK step)
    is_mask = fx.is_mask
    cont = ~(is_block | is_bar | c.all_of([is_bank, t[1]]) | c.all_of([is_mask, t[8]]))
    no_cont = is_bank | c.all_of([is_mask, t[9]])
    cw = cg[3]
    gt_g = [c.const(h, 4) > cg for h in range(GROUPS)]
    in_cw = [cw if h >= WARP_GROUPS else ~cw for h in range(GROUPS)]
    at_p = [c.all_of([runs[h], in_cw[h], gt_g[h], mins[h] == cpc]) for h in range(GROUPS)]
    w_win, w_min, w_any = [], [], []
    for w in range(2):
        hs = range(w * WARP_GROUPS, (w + 1) * WARP_GROUPS)
        win, mn, anyr = _argmin(c, [runs[h] for h in hs], [mins[h] for h in hs])
        w_win.append(win)
        w_min.append(mn)
        w_any.append(anyr)
    cont_any = c.any_of(at_p)
    cont_first = [c.all_of([at_p[h]] + [~at_p[k] for k in range(h)]) for h in range(GROUPS)]
    # candidates in priority order: continue this instruction, this warp's next instruction,
    # warp 1 after warp 0, warp 0 (a new round or a fresh start), warp 1 (fresh start)
    cand = [
        # (never right after BANK: the step that wrote it did not continue the instruction, and
        # ``cpc`` now carries the new bank)
        c.all_of([cont, cont_any, ~no_cont]),
        c.all_of([cont, c.mux(cw, w_any[1], w_any[0])]),
        c.all_of([cont, ~cw, w_any[1]]),
        c.all_of([c.any_of([~cont, cw]), w_any[0]]),
        c.all_of([~cont, w_any[1]]),
    ]
    cand_first = [c.all_of([cand[k]] + [~cand[j] for j in range(k)]) for k in range(len(cand))]
    has_sel = c.any_of(cand)
    warp_g = [c.concat(c.encode(c.concat(*w_win[w])), c.const(w, 1)) for w in range(2)]
    sel_g = c.select(
        c.encode(c.concat(*cand_first)),
        [c.encode(c.concat(*cont_first)), c.mux(cw, warp_g[1], warp_g[0]), warp_g[1], warp_g[0], warp_g[1],
         warp_g[0], warp_g[0], warp_g[0]],
    )
    sel_pc = c.select(
        c.encode(c.concat(*cand_first)),
        [cpc, c.mux(cw, w_min[1], w_min[0]), w_min[1], w_min[0], w_min[1], cpc, cpc, cpc],
    )
    # which lanes of the chosen group sit at the chosen pc
    q_g, q_pc = sel_g, sel_pc
    q_mask, q_ex = [], []
    for lane in range(LANES):
        bank = c.memory(f"pcq{lane}", rows=GROUPS, width=P.PC_BITS + 4)
        bank.write(cg, data_rows[lane], c.all_of([is_exec, mask[lane]]))
        ex = _exists(c, fx.nth, q_g, lane)  # type: ignore[arg-type]
        pc, _, run = _resolve(c, bank.read(q_g), ex, gpar, ep)  # type: ignore[arg-type]
        q_mask.append(c.all_of([run, pc == q_pc]))
        q_ex.append(ex)
    full = c.all_of([~(q_mask[x] ^ q_ex[x]) for x in range(LANES)])
    any_live = c.any_of(lives)
    # the next block: blk + 1; at the step after BLOCKHI (the high part latched, the low still the
    # last block's) its low part is 0. When that low part is 0 otherwise, BLOCKHI goes first
    nbits = len(fx.blk)
    lo_bits = P.BLOCK_LO_BITS
    nb1 = c.mux(fx.is_blockhi, c.concat(c.const(0, lo_bits), fx.blk[lo_bits:]), (fx.blk + 1)[:nbits])
    more_blocks = nb1 < fx.nbl
    wrap = c.all_of([~fx.is_blockhi] + [~b for b in nb1[:lo_bits].bits])
    pass_tok = c.concat(q_pc[: P.PASS_PC_BITS], q_g, full, c.const(0b10, 2))
    # the sticky mask: a partial mask equal to the group's last MASK is named by PASS f=0 alone;
    # otherwise MASK(g, m, r, x) first (it writes both tables; the next step writes the PASS)
    mtl = c.memory("mtl", rows=GROUPS, width=LANES)
    mtl.write(fx.tok[4:8], fx.tok[0:4], is_mask)
    stored = mtl.read(q_g)
    use_mask = c.all_of([~full, ~c.all_of([~(q_mask[x] ^ stored[x]) for x in range(LANES)])])
    mask_tok = c.concat(*q_mask, q_g, ~cont, no_cont, c.const(P.ctl(P.MASK) >> 10, 6))
    pass_tok = c.mux(use_mask, mask_tok, pass_tok)
    # a pass in the other half of the ROM: BANK(its half, whether this step restarted) first;
    # the next step (state unchanged) chooses the same pass and writes the PASS
    hb = P.PC_BITS - P.PASS_PC_BITS
    bank_tok = c.concat(sel_pc[P.PASS_PC_BITS], ~cont, sel_pc[P.PASS_PC_BITS + 1 :],
                        c.const(0, P.ADDR_BITS - 1 - hb), c.const(P.ctl(P.BANK) >> 10, 6))
    other = c.any_of([sel_pc[P.PASS_PC_BITS + i] ^ fx.bnk[i] for i in range(hb)])
    pass_tok = c.mux(other, bank_tok, pass_tok)
    bar_tok = c.concat(~ep, c.const(0, 9), c.const(P.ctl(P.BAR) >> 10, 6))
    blk_tok = c.mux(
        wrap,
        c.concat(nb1[lo_bits:], c.const(0, P.ADDR_BITS - 1 - (nbits - lo_bits)), c.const(1, 1),
                 c.const(P.ctl(P.BLOCK) >> 10, 6)),
        c.concat(nb1[:lo_bits], c.const(0, P.ADDR_BITS - lo_bits), c.const(P.ctl(P.BLOCK) >> 10, 6)),
    )
    # the dump starts at DUMPLO's word; after a PAGE the model wrote (the dump crossed into the
    # next page: ``emit``) at word 0 of that page
    dump_tok = c.concat(*[c.all_of([b, ~fx.is_page]) for b in fx.dlo.bits],
                        c.const(P.ctl(P.DUMPADDR) >> 10, 6))
    to_dump = c.all_of([~has_sel, ~any_live, ~more_blocks])
    next_idx = c.concat(
        c.all_of([~has_sel, any_live]) | to_dump, c.all_of([~has_sel, ~any_live, more_blocks]) | to_dump
    )
    next_tok = c.select(next_idx, [pass_tok, bar_tok, blk_tok, dump_tok])
    return Schedule(
        eff=eff, is_trap=is_trap, grp_live=grp_live, grp_run=grp_run, min_run=min_run, has_run=has_run,
        runs=runs, lives=lives, cont=cont, cand=cand, has_sel=has_sel, sel_g=sel_g, sel_pc=sel_pc, full=full,
        q_mask=q_mask, any_live=any_live, next_tok=next_tok, mask_tok=mask_tok,
    )


def emit(c: Circuit, fx: Fetch, ops: Operands, dp: Results, sch: Schedule, pw: Word,
         pages: Pages) -> Emitted:
    """Emit (doc section 5): the late latch of the pass's results, then which token comes next (a
    result chunk, SHORT / USHORT, STORE, the scheduler's PASS / MASK / BAR / BLOCK, dump, FAULT, HALT)."""
    tok, idx, op, cur, m_dump = fx.tok, fx.idx, fx.op, fx.cur, fx.m_dump
    is_exec, is_data, is_store, is_ushort = fx.is_exec, fx.is_data, fx.is_store, fx.is_ushort
    res, eff, sl, halt = dp.res, sch.eff, tok[0:2], c.const(P.ctl(P.HALT), 16)
    # ---- the late latch: results of the pass
    extra = {OP[n] for n in REG_RESULT_EXTRA}
    # a dead result (the row's ``nowb``) makes the pass one without a result: no chunk, SHORT,
    # USHORT or predicate token follows it and nothing is committed (one neuron each, as before)
    nowb = fx.f["nowb"][0]
    kreg = c.lut([*op.bits, nowb], lambda *bs: int(not bs[-1] and (
        sum(b << i for i, b in enumerate(bs[:-1])) < REG_RESULT_OPS
        or sum(b << i for i, b in enumerate(bs[:-1])) in extra)))
    kpred = c.lut([*op.bits, nowb], lambda *bs: int(not bs[-1] and sum(b << i for i, b in enumerate(bs[:-1]))
                                                   in (OP["setp"], OP["frange"])))
    kstore = _match(c, op, OP["st"])
    pairs = [(x, y) for x in range(LANES) for y in range(x + 1, LANES)]
    same = [c.any_of([~eff[x], ~eff[y], res[x] == res[y]]) for x, y in pairs]
    # a uniform chunk writes all four lanes: only when every live lane of the group takes it
    uniform = c.all_of(same + [c.any_of([~sch.grp_live[x], eff[x]]) for x in range(LANES)])
    lat = c.memory("latch", rows=1, width=32 * LANES + LANES * 2 + 4)
    lat.write(fx.one0, c.concat(*res, *eff, *dp.pbits, kreg, kpred, kstore, uniform), is_exec)
    lr = lat.read(fx.one0)
    # an ``ld`` pass latched its lanes' addresses: the word every step emits is the read port's
    # (``global_memory`` reads it at the emitting lane's address)
    is_ld = _match(c, op, OP["ld"])
    L_res = [c.mux(is_ld, pw, lr[32 * x : 32 * (x + 1)]) for x in range(LANES)]
    o = 32 * LANES
    L_eff = list(lr[o : o + 4].bits)
    L_pb = lr[o + 4 : o + 8]
    L_reg, L_pred, L_store, L_uni = (lr[o + 8 + k] for k in range(4))

    # ---- output: which token comes next
    i_lane = [c.any_of([_match(c, idx, 3 * x + j) for j in range(3)]) for x in range(LANES)]
    i_last = c.any_of([_match(c, idx, 3 * x + 2) for x in range(LANES)])
    i_mid = c.any_of([_match(c, idx, 3 * x + j) for x in range(LANES) for j in range(2)])
    xd = ops.exec_data
    # a lane result below 2^18 (protocol.py's HIGH): after its chunk 0, HIGH(lane, bits 11..17)
    # instead of chunks 1 and 2. Each test reads the late ``low18`` beside the token's index, so
    # it is computed late (a function of the token alone would be carried through every layer)
    low18 = [c.all_of([~b for b in L_res[x].bits[P.CHUNK + P.HIGH_BITS:]]) for x in range(LANES)]
    i_low = [*idx.bits, *low18]

    def first_low(fn) -> Bit:  # fn(lane) over the index of a lane's chunk 0 whose value is below 2^18
        return c.lut(i_low, lambda *b: int(any(sum(v << i for i, v in enumerate(b[:4])) == 3 * x
                                                and b[4 + x] and fn(x) for x in range(LANES))))

    c_high = c.all_of([xd, first_low(lambda x: True)])
    h_lane = c.concat(first_low(lambda x: x & 1), first_low(lambda x: x >> 1))
    after = []
    for x in range(LANES):
        prev_d = [i_lane[y] for y in range(x)]
        prev_s = [_match(c, sl, y) for y in range(x)]
        no = c.const(0, 1)[0]
        after.append(
            c.any_of(
                [
                    is_exec,
                    c.all_of([xd, i_last, c.any_of(prev_d)]) if prev_d else no,
                    c.all_of([is_store, c.any_of(prev_s)]) if prev_s else no,
                    _lane_end(c, tok, range(x)) if x else no,
                ]
            )
        )
    cands = [c.all_of([L_eff[x], after[x]]) for x in range(LANES)]
    first = [c.all_of([cands[x]] + [~cands[y] for y in range(x)]) for x in range(LANES)]
    has_nl = c.any_of(cands)
    scan = c.any_of(
        [c.all_of([is_exec, L_reg, ~L_uni]), c.all_of([is_exec, L_store]), c.all_of([xd, i_last]), is_store,
         _lane_end(c, tok, range(LANES))]
    )
    nl = c.encode(c.concat(*first))
    c_next = c.any_of(
        [
            c.all_of([scan, ~has_nl]),
            c.all_of([is_exec, ~L_reg, ~L_pred, ~L_store]),
            c.all_of([xd, _match(c, idx, 14)]),
            c.all_of([xd, _match(c, idx, 15)]),
            fx.is_block,
            fx.is_bar,
            fx.is_bank,
            fx.is_mask,
            c.all_of([is_ushort, fx.m_exec]),
        ]
    )
    c_store_out = c.all_of([scan, has_nl, L_store])
    uval = c.select(c.encode(c.concat(*first_of(c, L_eff))), L_res)
    small = [c.all_of([~b for b in L_res[x].bits[8:]]) for x in range(LANES)]
    small_nl = c.select(nl, [Word(c, [small[x]]) for x in range(LANES)])[0]
    usmall = c.all_of([~b for b in uval.bits[10:]])
    c_short = c.all_of([scan, has_nl, ~L_store, small_nl])
    c_ushort = c.all_of([is_exec, L_reg, L_uni, usmall])
    q_lane = c.all_of([scan, has_nl, ~L_store, ~small_nl])
    q_inc = c.any_of(
        [
            c.all_of([xd, i_mid]),
            c.all_of([xd, _match(c, idx, 12)]),
            c.all_of([xd, _match(c, idx, 13)]),
            c.all_of([is_data, m_dump, ~idx[1], ~idx[2], ~idx[3]]),
        ]
    )  # dump chunk 0 or 1
    q_uni = c.all_of([is_exec, L_reg, L_uni, ~usmall])
    q_pred = c.all_of([is_exec, L_pred])
    dump_small = c.all_of([~b for b in pw.bits[10:]])
    q_dump0 = c.all_of([fx.is_dumpaddr, ~dump_small])
    c_dumpnext = c.all_of([is_data, m_dump, _match(c, idx, 2)]) | c.all_of([is_ushort, m_dump])
    c_data = c.any_of([q_lane, q_inc, q_uni, q_pred, q_dump0])
    three_nl = c.select(nl, [c.const(3 * x, 4) for x in range(LANES)])
    q = c.select(
        c.encode(c.concat(q_lane, q_inc, q_uni, q_pred)),
        [three_nl, (idx + 1)[:4], c.const(P.IDX_UNIFORM, 4), c.const(P.IDX_PRED, 4)],
    )
    # chunk values by target index
    table = [_chunk(L_res[x], j) for x in range(LANES) for j in range(NCHUNK)]
    table += [_chunk(uval, j) for j in range(NCHUNK)]
    table.append(c.concat(L_pb, *L_eff, c.const(0, 3)))
    dump_w = pw
    val = c.mux(m_dump, c.select(q[:2], [_chunk(dump_w, j) for j in range(NCHUNK)]), c.select(q, table))
    data_tok = c.concat(val, q, c.const(0, 1))
    # HIGH's 7 bits are chunk 1's low bits, the DATA value this step would otherwise write
    high_tok = c.concat(val[: P.HIGH_BITS], h_lane, c.const(1, 1), c.const(P.ctl(P.NTHREADS) >> 10, 6))
    store_tok = c.concat(nl, c.const(P.ctl(P.STORE) >> 2, 14))
    nxt = (cur + 1)[:10]
    dn_tok = c.concat(nxt, c.const(P.ctl(P.DUMPADDR) >> 10, 6))
    last = cur == fx.dhi
    if pages.page is not None:
        # the dump's last word is DUMPHI's word of ENDPAGE's page; after word 1,023 of a page the
        # model writes PAGE(page + 1), and the step after it DUMPADDR(0) (``scheduler``)
        pg, npg = pages.page, len(pages.page)
        last = c.all_of([last, pg == pages.end])  # type: ignore[arg-type]
        nxp = (pg + 1)[:npg]
        arg = [c.const(0, 1)[0]] * 9
        for i, b in enumerate(P.PAGE_ARG_BITS[:npg]):
            arg[b] = nxp[i]
        page_tok = c.concat(*arg, c.const(1, 1), c.const(P.ctl(P.BANK) >> 10, 6))
        dn_tok = c.mux(c.all_of(list(cur[:10].bits)), page_tok, dn_tok)
    dn_tok = c.mux(last, halt, dn_tok)
    # a trap with an active lane stops the launch: FAULT(first such lane), then HALT
    c_fault = c.all_of([is_exec, sch.is_trap, c.any_of(eff)])
    fault_lane = c.encode(c.concat(*first_of(c, eff)))
    fault_tok = c.concat(fault_lane, c.const(0, 8), c.const(P.ctl(P.FAULT) >> 10, 6))
    c_halt = _ctl_is(c, tok, P.FAULT)
    res_nl = c.select(nl, L_res)
    short_tok = c.concat(res_nl[:8], nl, c.const(P.ctl(P.SHORT) >> 10, 6))
    # a dumped word below 1024 is one USHORT token too
    c_ushort_dump = c.all_of([fx.is_dumpaddr, dump_small])
    ushort_tok = c.concat(c.mux(c_ushort_dump, pw[:10], uval[:10]), c.const(P.ctl(P.USHORT) >> 10, 6))
    c_small = c_short | c_ushort | c_ushort_dump
    out = c.select(
        c.encode(
            c.concat(
                c_data & ~c_fault & ~c_high, c_store_out, c_next & ~c_fault, c_dumpnext, c_high, c_fault,
                c_halt, c_small & ~c_fault,
            )
        ),
        [data_tok, store_tok, sch.next_tok, dn_tok, high_tok, fault_tok, halt,
         c.mux(c_short, short_tok, ushort_tok)],
    )  # type: ignore[list-item]
    return Emitted(out=out, c_next=c_next, c_data=c_data, L_eff=L_eff, uniform=uniform)


# a candidate unit of one lane: (circuit, the decoded ROM row, operand a, operand b) -> result word
LaneUnit = Callable[[Circuit, Fetch, Word, Word], Word]


def build_machine(shape: MachineShape | None = None, debug: bool = False,
                  extra: LaneUnit | None = None) -> Circuit:
    """The per-token machine circuit: input ``tok`` (16 bits), output ``out`` (16 bits).

    The units run in the order of docs/machine-in-weights.md (sections 4-5): fetch and decode,
    register file, datapath, scheduler, the units, global memory, emit. ``debug`` adds outputs for internal
    signals (for the exact evaluator, never for a model). ``extra``: a candidate unit, four of it
    (one per lane) muxed into the datapath's result under an op code past the table, for layout
    only (the benchmarks' room measurements; never in a shipped machine)."""
    shape = shape if shape is not None else MachineShape()
    assert shape.threads == LANES * GROUPS and shape.rom_rows <= 1 << P.PC_BITS
    c = Circuit("qwengpu_machine")
    fx = fetch_decode(c, shape)
    ops = register_file(c, shape, fx)
    if shape.fmulf:
        one_lane_guard(c, fx, ops)
    if not shape.gmem_late:
        pw, words, pages = global_memory(c, shape, fx, ops)
    dp = datapath(c, fx, ops)
    if not shape.gmem_late:
        load_result(c, fx, dp, words)
    sch = scheduler(c, fx, ops, dp.pc1)
    if shape.multiplier:
        multiplier(c, fx, ops, dp)
    if shape.fadd:
        float_adder(c, fx, ops, dp)
    if shape.fmulf:
        float_multiplier(c, fx, ops, dp)
    if extra is not None:
        is_new = _match(c, fx.op, len(ROM_OPS))
        for lane in range(LANES):
            dp.res[lane] = c.mux(is_new, extra(c, fx, ops.A[lane], ops.B[lane])[:32], dp.res[lane])
    if shape.gmem_late:
        pw, words, pages = global_memory(c, shape, fx, ops)
        load_result(c, fx, dp, words)
    em = emit(c, fx, ops, dp, sch, pw, pages)
    c.output("out", em.out)
    if debug:
        for name, v in dict(
            is_block=fx.is_block, c_next=em.c_next, c_data=em.c_data, has_sel=sch.has_sel,
            any_live=sch.any_live, cont=sch.cont, cand=c.concat(*sch.cand), sel_g=sch.sel_g,
            sel_pc=sch.sel_pc, full=sch.full, q_mask=c.concat(*sch.q_mask), runs=c.concat(*sch.runs),
            lives=c.concat(*sch.lives),
            mask=c.concat(*fx.mask), eff=c.concat(*sch.eff), cg=fx.cg, cpc=fx.cpc, op=fx.op, nth=fx.nth,
            blk=fx.blk, L_eff=c.concat(*em.L_eff), grp_live=c.concat(*sch.grp_live),
            grp_run=c.concat(*sch.grp_run), min_run=sch.min_run, has_run=sch.has_run, uniform=em.uniform,
        ).items():
            c.output("dbg_" + name, v)
    return c


def data_row_of(c: Circuit, f: dict[str, Word], g: Bit, is_bra: Bit, is_exit: Bit, is_bar_op: Bit,
                pc1: Word, ep: Bit, gpar: Bit, is_ret: Bit, a: Word) -> Word:
    """A lane's new scheduler row after the pass: pc | exited | waiting | epoch | ~block parity."""
    # one MLP per bit: branch target, return address or the next pc
    newpc = c.concat(*[
        c.lut([is_bra, is_ret, g, tb, ab, pb], lambda br, rt, g_, tb_, ab_, pb_: int(
            tb_ if (br and g_) else ab_ if (rt and g_) else pb_))
        for tb, ab, pb in zip(f["target"].bits, a.bits[: P.PC_BITS], pc1.bits, strict=True)
    ])
    return c.concat(newpc, c.all_of([is_exit, g]), c.all_of([is_bar_op, g]), ep, ~gpar)


def _popcount(c: Circuit, bits: list[Bit]) -> Word:
    """The number of set bits among ``bits`` (at most 32) as a 32-bit word."""
    from qwengpu.compiler.ops import sum_columns

    cnt = sum_columns(c, [list(bits)] + [[] for _ in range(5)])
    return Word(c, cnt + [Bit(c, const=0)] * (32 - len(cnt)))


def first_of(c: Circuit, bits: list[Bit]) -> list[Bit]:
    """One-hot of the lowest set bit (all zero when none is set)."""
    return [c.all_of([bits[x]] + [~bits[y] for y in range(x)]) for x in range(len(bits))]
