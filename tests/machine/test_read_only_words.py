"""The machine's read-only words (``MachineShape.ro_words``): page tokens of 6 bits, row loads, and
where a launch's buffers go (``engine.prepare``, ``runner.machine_limit_reason``)."""

from __future__ import annotations

import json

import pytest

from qwengpu.errors import MachineLimitError
from qwengpu.machine import protocol as P
from qwengpu.model.configs import shape_for
from qwengpu.runtime.engine import machine_config, prepare
from qwengpu.simt.memory import GLOBAL_BASE


def test_page_tokens_name_64_pages_and_keep_the_first_32_as_before():
    for page in range(64):
        for end in (False, True):
            tk = P.Reader().read(P.ctl(P.BANK, P.page_arg(page, end)))
            assert (tk.kind, tk.a) == ("ENDPAGE" if end else "PAGE", page)
    # pages below 32 keep their tokens (every earlier prompt is unchanged); page bit 5 is argument bit 1
    assert P.page_arg(5) == P.PAGE_FLAG | 5 << 4 and P.page_arg(37) == P.PAGE_FLAG | 5 << 4 | 2


def test_a_read_only_row_is_one_memaddr_and_twelve_chunks():
    toks = [P.Reader().read(t) for t in P.mem_load([(7, 1)], 3, [(33 * 1024 + 8, (1, 2, 3, 0xFFFFFFFF))])]
    kinds = [t.kind for t in toks]
    assert kinds == ["MEMADDR", "DATA", "DATA", "DATA", "PAGE", "MEMADDR"] + ["DATA"] * 12
    assert toks[4].a == 33 and toks[5].a in (8, 33 * 1024 + 8)
    data = toks[6:]
    assert [t.a for t in data] == list(range(12))  # DATA(index, chunk)
    words = [sum(data[3 * j + i].b << (11 * i) for i in range(3)) & 0xFFFFFFFF for j in range(4)]
    assert words == [1, 2, 3, 0xFFFFFFFF]


def _write(tmp_path, src: str, spec: dict):
    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.json").write_text(json.dumps(spec))
    return tmp_path / "k.cu"


VADD = """extern "C" __global__ void k(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}"""


def test_the_8192_element_vector_add_fits_the_2b_machine(tmp_path):
    """The issue's natural size: 32 blocks of 256 threads over 8,192 floats (24,588 words with guards;
    16,384 are writable): the two inputs go to the read-only words, the output stays below them."""
    n = 8192
    cu = _write(tmp_path, VADD, {"kernel": "k", "grid": 32, "block": 256, "args": [
        {"name": "a", "type": "f32*", "data": [1.5] * n}, {"name": "b", "type": "f32*", "data": [2.0] * n},
        {"name": "out", "type": "f32*", "size": n}, {"name": "n", "type": "i32", "value": n}],
        "outputs": ["out"]})
    shape = shape_for(machine_config("2b"))
    _, _, prompt, gmem, (lo, hi) = prepare(cu, shape=shape)
    where = {b.name: ((b.start - GLOBAL_BASE) // 4, b.readonly) for b in gmem.buffers}
    assert where["out"][0] + n <= shape.gmem_words and not where["out"][1]
    assert where["a"][1] and where["b"][1] and where["a"][0] >= shape.gmem_words
    assert hi <= shape.gmem_words  # the dump reads the output only
    assert sum(1 for t in prompt if P.Reader().read(t).kind == "PAGE") >= 12


def test_an_input_the_kernel_stores_to_is_never_read_only(tmp_path):
    """The same sizes, but the kernel also writes into ``a``: no read-only placement; refused by the
    writable words, naming them."""
    n = 8192
    src = VADD.replace("out[i] = a[i] + b[i];", "out[i] = a[i] + b[i]; ((float*)a)[i] = 0.0f;")
    cu = _write(tmp_path, src, {"kernel": "k", "grid": 32, "block": 256, "args": [
        {"name": "a", "type": "f32*", "size": n}, {"name": "b", "type": "f32*", "size": n},
        {"name": "out", "type": "f32*", "size": n}, {"name": "n", "type": "i32", "value": n}],
        "outputs": ["out"]})
    with pytest.raises(MachineLimitError, match="words"):
        prepare(cu, shape=shape_for(machine_config("2b")))


def _two_big_inputs(tmp_path, src: str, n: int, grid: int, block: int):
    """A launch of ``src`` with two inputs of n words, a 16-word output and ``n`` = 16."""
    return _write(tmp_path, src, {"kernel": "k", "grid": grid, "block": block, "args": [
        {"name": "a", "type": "f32*", "size": n}, {"name": "b", "type": "f32*", "size": n},
        {"name": "out", "type": "f32*", "size": 16}, {"name": "n", "type": "i32", "value": 16}],
        "outputs": ["out"]})


def test_inputs_beyond_the_read_only_words_are_refused_naming_them(tmp_path):
    n = 30000  # two inputs of 30,000 words: 60,008 with guards, 49,152 read-only words
    cu = _two_big_inputs(tmp_path, VADD, n, 118, 256)
    with pytest.raises(MachineLimitError, match="read-only"):
        prepare(cu, shape=shape_for(machine_config("2b")))


EX2 = """extern "C" __global__ void k(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = exp2f(a[i]) + b[i];
}"""


def _decode_rows(prompt: list[int]) -> dict[int, int]:
    """word -> value of the read-only rows a prompt loads (page tokens followed)."""
    r, page, addr, words = P.Reader(), 0, None, {}
    chunks: list[int] = []
    for t in prompt:
        tk = r.read(t)
        if tk.kind == "PAGE":
            page = tk.a
        elif tk.kind == "MEMADDR":
            addr, chunks = page * P.PAGE_WORDS + (tk.a & (P.PAGE_WORDS - 1)), []
        elif tk.kind == "DATA" and addr is not None:
            chunks.append(tk.b)
            if len(chunks) == 12:
                for j in range(4):
                    words[addr + j] = sum(chunks[3 * j + i] << (11 * i) for i in range(3)) & 0xFFFFFFFF
        elif tk.kind not in ("DATA",):
            addr = None if tk.kind != "MEMADDR" else addr
    return words


def test_ex2s_table_is_loaded_into_the_top_read_only_words(tmp_path):
    """A kernel with ``ex2`` on the 2B shape reads its two tables (``ex2_model.TABLE_WORDS``,
    ``TABLE2_WORDS``) from the top 1,024 read-only words: the prompt loads them as read-only rows
    (the launch's own inputs stay writable here), the program's loads address them, and the
    buffer table the bounds watch checks addresses against holds them, read-only."""
    from qwengpu.codegen import ex2_model as em

    n = 64
    cu = _write(tmp_path, EX2, {"kernel": "k", "grid": 1, "block": 64, "args": [
        {"name": "a", "type": "f32*", "data": [0.1 * i for i in range(n)]},
        {"name": "b", "type": "f32*", "data": [1.0] * n},
        {"name": "out", "type": "f32*", "size": n}, {"name": "n", "type": "i32", "value": n}],
        "outputs": ["out"]})
    shape = shape_for(machine_config("2b"))
    _, prog, prompt, gmem, _ = prepare(cu, shape=shape)
    top = shape.gmem_words + shape.ro_words
    base, base2 = top - 512, top - 1024
    assert prog.rodata == ((base, em.TABLE_WORDS), (base2, em.TABLE2_WORDS))
    words = _decode_rows(prompt)
    want = {base + i: v for i, v in enumerate(em.TABLE_WORDS)}
    want.update((base2 + i, v) for i, v in enumerate(em.TABLE2_WORDS) if any(
        em.TABLE2_WORDS[(i // 4 * 4):(i // 4 * 4 + 4)]))  # an all-zero row is not loaded
    assert {w: v for w, v in words.items() if w >= base2} == want
    offs = {x.mod("off") for x in prog.code if x.op == "ld"}
    assert {4 * base, 4 * (base + 256), 4 * base2, 4 * (base2 + 256)} <= offs
    tabs = sorted((b.start - GLOBAL_BASE) // 4 for b in gmem.buffers
                  if b.name == "(program data)" and b.readonly and b.size == 4 * 512)
    assert tabs == [base2, base]
    assert not prepare(_write(tmp_path, VADD, json.loads((tmp_path / "k.json").read_text())),
                       shape=shape)[1].rodata  # no ex2, no table


def test_read_only_inputs_reaching_the_table_are_refused_naming_it(tmp_path):
    """Inputs that would fit the 49,152 read-only words but reach the top 1,024 the ex2 tables take."""
    cu = _two_big_inputs(tmp_path, EX2, 24400, 1, 64)
    with pytest.raises(MachineLimitError, match="constant tables take 1024"):
        prepare(cu, shape=shape_for(machine_config("2b")))
