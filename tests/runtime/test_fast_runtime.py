"""The fast runtime (``qwengpu.runtime.fast``) against the stock ``Qwen3_5ForCausalLM``.

Token equality over whole greedy runs, bit equality of the residual after every decoder layer (and
of the final norm) on short prefixes, the float facts the re-implementation relies on, the machine
slice's launches (vadd, intops, bitops), and negative controls (a damaged weight changes the fast
runtime too). Every guarded shortcut is shown to run (``FastModel.stats``), and where its guard
trips (two-hot keys, a head that is not a sign code, inexact head sums) the general path gives the
stock tokens too; ``shortcuts=False`` (general paths only) gives the same tokens everywhere.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from qwengpu.compiler import Circuit, build_model, compile_circuit
from qwengpu.runtime import FastModel, run_trace_fast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "compiler"))
from circuit_helpers import small_config  # noqa: E402

KERNELS = Path(__file__).resolve().parent.parent / "machine_weights" / "kernels"


def walker_model():
    """Token x writes m[x mod 16] := x, reads r = m[x div 16], emits (x + r + 1) mod 256."""
    c = Circuit("walker")
    x = c.input("x", 8)
    m = c.memory("m", rows=16, width=8)
    m.write(x[:4], x)
    r = m.read(x[4:])
    c.output("y", x + r + 1)
    return build_model(compile_circuit(c, small_config(256, 1024)))


def wide_walker_model():
    """The walker with 40-bit rows (x five times): two value heads share one key head (16 value
    heads over 8 key heads), so the runtime maps value heads to key heads. Emits (x + 2r + 1)."""
    c = Circuit("wide_walker")
    x = c.input("x", 8)
    m = c.memory("m", rows=16, width=40)
    m.write(x[:4], c.concat(x, x, x, x, x))
    r = m.read(x[4:])
    c.output("y", x + r[:8] + r[32:] + 1)
    return build_model(compile_circuit(c, small_config(256, 1024, linear_num_value_heads=16)))


def alu_model():
    """A 4-bit ALU (add, sub, xor, shift) with flags and a register file row feeding back."""
    c = Circuit("alu4")
    a, b, op = c.input("a", 4), c.input("b", 4), c.input("op", 2)
    y = c.select(op, [a + b, a - b, a ^ b, a << b[:2]])
    rf = c.memory("rf", rows=4, width=4)
    rf.write(a[:2], y)
    c.output("y", y + rf.read(b[2:]))
    c.output("zero", y == 0)
    c.output("lt", a.as_signed() < b.as_signed())
    return build_model(compile_circuit(c, small_config(256, 1024)))


@pytest.fixture(scope="module")
def walker():
    return walker_model()


@pytest.fixture(scope="module")
def alu():
    return alu_model()


def walker_ref(start: int, n: int, times: int = 1) -> list[int]:
    mem: dict[int, int] = {}
    v, out = start, []
    for _ in range(n):
        mem[v & 15] = v
        v = (v + times * mem.get(v >> 4, 0) + 1) & 255
        out.append(v)
    return out


def stock_generate(model, start: int, n: int) -> list[int]:
    with torch.no_grad():
        return model.generate(torch.tensor([[start]]), max_new_tokens=n, do_sample=False)[0].tolist()[1:]


def two_hot_walker():
    """The walker with one extra key unit: a copy of the key row of one address, its bias lowered
    by 128 - 2^-10. For that address the key is two-hot (128 and SiLU(2^-10)) -- the one-hot guard
    must trip -- while the extra entry is far too small to change a read, so the tokens stay the
    walker's; every other address keeps a one-hot key (the extra unit's SiLU is exactly -0)."""
    model = walker_model()
    la = next(layer.linear_attn for layer in model.model.layers
              if layer.block_type == "linear_attention" and layer.linear_attn.out_proj.weight.any())
    w = la.in_proj_qkv.weight
    kd, dk = la.num_k_heads * la.head_k_dim, la.head_k_dim
    used = (w[kd: 2 * kd] != 0).any(1).nonzero().flatten().tolist()
    j0 = used[3]
    j1 = next(j for j in range(j0 // dk * dk, (j0 // dk + 1) * dk) if j not in used)
    with torch.no_grad():
        row = w[kd + j0].clone()
        row[int(row.argmin())] -= 128 - 2.0**-10  # the bias weight (through the constant +1 dim)
        w[kd + j1] = row
    return model, j0 % dk


def stock_layer_states(model, ids: list[int]) -> list[list[torch.Tensor]]:
    """Per token (recurrent decode path with cache): residual after each decoder layer, final norm."""
    caps: list[torch.Tensor] = []

    def grab(_m, _i, out):
        caps.append((out[0] if isinstance(out, tuple) else out).reshape(-1).clone())

    hooks = [layer.register_forward_hook(grab) for layer in model.model.layers]
    hooks.append(model.model.norm.register_forward_hook(grab))
    res, cache = [], None
    try:
        with torch.no_grad():
            for t in ids:
                caps.clear()
                o = model(input_ids=torch.tensor([[t]]), cache=cache, use_cache=True)
                cache = o.cache
                res.append(list(caps))
    finally:
        for h in hooks:
            h.remove()
    return res


def assert_bits_equal(stock: list[list[torch.Tensor]], fast: list[list[np.ndarray]]) -> None:
    assert len(stock) == len(fast)
    for t, (a, b) in enumerate(zip(stock, fast, strict=True)):
        assert len(a) == len(b)
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            ub, vb = u.numpy().view(np.int32), v.view(np.int32)
            bad = np.count_nonzero(ub != vb)
            assert bad == 0, f"token {t}, boundary {i}: {bad} dims differ"


def stock_teacher_forced(model, prompt: list[int], trace: list[int]) -> list[int]:
    """The stock argmax at every step of ``trace`` in one prefill (chunked path)."""
    ids = torch.tensor([prompt + trace[:-1]])
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits
    return logits[0, len(prompt) - 1:].argmax(-1).tolist()


# ---------------------------------------------------------------------------------------------
# the float facts the re-implementation relies on
# ---------------------------------------------------------------------------------------------
def test_torch_rsqrt_is_one_over_sqrt():
    """Norms: the fast runtime computes ``1 / sqrt`` in numpy; torch's CPU rsqrt rounds the same way
    (vectorized and scalar paths), including at fl32(1e-6) (the dense DeltaNet read constant)."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(0, 4, 100_003), np.exp(rng.uniform(-80, 80, 100_003)),
                        [np.float32(1e-6), 64.0, 16384.0 + 1e-6]]).astype(np.float32)
    mine = np.float32(1.0) / np.sqrt(x)
    for chunk in (x, x[:7]):  # 7 elements: the scalar tail path
        got = torch.rsqrt(torch.from_numpy(chunk)).numpy()
        assert np.array_equal(got.view(np.int32), (np.float32(1.0) / np.sqrt(chunk)).view(np.int32))
    assert np.float32(1.0) / np.sqrt(np.float32(1e-6)) == np.float32(999.99994)
    assert mine.dtype == np.float32


def test_query_scale_matches_torch_python_scalar_division():
    rng = np.random.default_rng(1)
    for d in (32, 64, 128, 256):
        q = rng.standard_normal(10_000).astype(np.float32)
        want = (torch.from_numpy(q) / (d ** 0.5)).numpy()
        got = q / np.float32(torch.tensor([d ** 0.5], dtype=torch.float32).item())
        assert np.array_equal(want.view(np.int32), got.view(np.int32))


# ---------------------------------------------------------------------------------------------
# compiled circuits with token IO
# ---------------------------------------------------------------------------------------------
def test_walker_generate_equals_stock_and_reference(walker):
    fast = FastModel.from_model(walker)
    got = fast.generate([201], 300)
    assert got == stock_generate(walker, 201, 300) == walker_ref(201, 300)
    st = fast.stats()
    assert st["deltanet_onehot_steps"] == 300 and st["deltanet_general_steps"] == 0
    assert st["head_table"] > 0 and st["head_product"] == 0
    assert st["deltanet_plan_hits"] > 0 and st["deltanet_read_hits"] > 0 and st["mlp_memo_hits"] > 0
    assert fast.generate([201], 300) == got  # generate starts from a fresh state (memos stay valid)
    general = FastModel.from_model(walker, shortcuts=False)
    assert general.generate([201], 300) == got
    st = general.stats()
    assert st["deltanet_general_steps"] == 300 and st["deltanet_onehot_steps"] == 0
    assert st["head_table"] == 0 and st["mlp_memo_hits"] == 0


def test_grouped_value_heads_equal_stock_and_reference():
    """Two value heads per key head (the runtime's value head -> key head map)."""
    model = wide_walker_model()
    fast = FastModel.from_model(model)
    assert any(d.kmap is not None for d in fast.mixers)
    got = fast.generate([201], 200)
    assert got == stock_generate(model, 201, 200) == walker_ref(201, 200, times=2)
    assert fast.stats()["deltanet_onehot_steps"] == 200
    assert FastModel.from_model(model, shortcuts=False).generate([201], 200) == got
    ids = [201] + walker_ref(201, 15, times=2)
    fast.reset()
    assert_bits_equal(stock_layer_states(model, ids), fast.layer_states(ids))


def test_two_hot_keys_take_the_general_path():
    """The one-hot guard trips on the tokens with a two-hot key (and only there); those steps run
    the stock expressions, the others the shortcut, on one shared state: still the stock tokens,
    and bit-identical residuals after every layer."""
    model, addr = two_hot_walker()
    fast = FastModel.from_model(model)
    got = fast.generate([201], 300)
    assert got == stock_generate(model, 201, 300) == walker_ref(201, 300)
    st = fast.stats()
    hits = sum(1 for v in [201] + got[:-1] if v & 15 == addr)
    assert st["deltanet_general_steps"] == hits > 0
    assert st["deltanet_onehot_steps"] == 300 - hits
    ids = [201, addr, 16 + addr, 7, 16 * addr + 5, addr, 99, 32 + addr, 250, addr]
    fast.reset()
    assert_bits_equal(stock_layer_states(model, ids), fast.layer_states(ids))


def test_conv_taps_take_the_general_path():
    """A conv tap on the previous token (2^-40: every key picks up a tiny entry from the last
    token, too small to change a read): the one-hot shortcut is refused at build time and the
    general path runs the stock conv; the stock tokens and residuals come out."""
    model = walker_model()
    la = next(layer.linear_attn for layer in model.model.layers
              if layer.block_type == "linear_attention" and layer.linear_attn.out_proj.weight.any())
    with torch.no_grad():
        la.conv1d.weight[:, 0, -2] = 2.0**-40
    fast = FastModel.from_model(model)
    assert any(d.taps is not None for d in fast.mixers)
    got = fast.generate([201], 200)
    assert got == stock_generate(model, 201, 200) == walker_ref(201, 200)
    assert fast.stats()["deltanet_general_steps"] == 200
    ids = [201] + walker_ref(201, 12)
    fast.reset()
    assert_bits_equal(stock_layer_states(model, ids), fast.layer_states(ids))


def test_walker_hidden_states_bit_identical(walker):
    ids = [201] + walker_ref(201, 23)
    fast = FastModel.from_model(walker)
    assert_bits_equal(stock_layer_states(walker, ids), fast.layer_states(ids))


def test_skipped_attention_adds_exactly_zero(walker):
    """The claim behind skipping a softmax-attention layer: an all-zero o_proj adds exactly 0."""
    att = [layer.self_attn for layer in walker.model.layers if layer.block_type == "full_attention"]
    assert att and all(not a.o_proj.weight.any() for a in att)
    outs: list[torch.Tensor] = []
    hooks = [a.register_forward_hook(lambda _m, _i, o: outs.append(o[0])) for a in att]
    try:
        with torch.no_grad():
            walker(input_ids=torch.tensor([[201, 7, 99, 250]]), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    assert outs and all(torch.equal(o, torch.zeros_like(o)) for o in outs)


def test_alu_steps_equal_stock_teacher_forced(alu):
    """Random inputs (not fed back): every fast step's argmax equals the stock prefill's argmax."""
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 1 << 10, 300).tolist()
    fast = FastModel.from_model(alu)
    got = [fast.step(t) for t in ids]
    with torch.no_grad():
        want = alu(input_ids=torch.tensor([ids]), use_cache=False).logits[0].argmax(-1).tolist()
    assert got == want
    fast.reset()
    assert_bits_equal(stock_layer_states(alu, ids[:16]), fast.layer_states(ids[:16]))


def test_damaged_weight_changes_the_fast_runtime():
    """Negative control: the runtime reads the weights. Flip one used MLP gate weight: the fast
    trace changes (with and without shortcuts), and still equals the damaged stock model's."""
    model = walker_model()
    clean = FastModel.from_model(model).generate([201], 120)
    layer = next(la for la in model.model.layers if la.mlp.gate_proj.weight.any())
    w = layer.mlp.gate_proj.weight
    r, col = (w != 0).nonzero()[0].tolist()
    with torch.no_grad():
        w[r, col] = -w[r, col]
    damaged = FastModel.from_model(model).generate([201], 120)
    assert damaged != clean
    assert damaged == stock_generate(model, 201, 120)
    assert FastModel.from_model(model, shortcuts=False).generate([201], 120) == damaged


def test_damaged_deltanet_value_weight_changes_the_fast_runtime():
    """Negative control for the one-hot shortcut and its memos: zero the value weight of one
    stored bit (the bank now forgets that bit); the trace changes and equals the stock model's."""
    model = walker_model()
    clean = FastModel.from_model(model).generate([201], 120)
    la = next(layer.linear_attn for layer in model.model.layers
              if layer.block_type == "linear_attention" and layer.linear_attn.out_proj.weight.any())
    w = la.in_proj_qkv.weight
    kd = la.num_k_heads * la.head_k_dim
    v = int((w[2 * kd:] != 0).any(1).nonzero()[0]) + 2 * kd
    with torch.no_grad():
        w[v] = 0
    fast = FastModel.from_model(model)
    damaged = fast.generate([201], 120)
    assert damaged != clean
    assert damaged == stock_generate(model, 201, 120)
    assert fast.stats()["deltanet_onehot_steps"] == 120


def test_head_that_is_not_a_sign_code_uses_the_product():
    """Damage one lm_head weight (its column is no longer +-w): the head table is refused at build
    time, the product runs, and the tokens equal the damaged stock model's."""
    model = walker_model()
    w = model.lm_head.weight
    r, col = (w != 0).nonzero()[5].tolist()
    with torch.no_grad():
        w[r, col] *= 3
    fast = FastModel.from_model(model)
    assert fast.head.table is None
    assert fast.generate([201], 120) == stock_generate(model, 201, 120)
    assert fast.stats()["head_product"] > 0


def test_sign_code_head_table_equals_the_stock_argmax():
    """The head table against torch's argmax of ``F.linear`` (the stock logits): every input the
    exactness guard accepts gives the stock argmax, ties (zero inputs) included; inputs whose sums
    could round are refused (then the product runs)."""
    from qwengpu.runtime.fast import Head, Norm

    rng = np.random.default_rng(5)
    nc = 8
    mag = np.array([1, 2, 0.5, 3, 1, 8, 0.25, 1], dtype=np.float32)
    codes = rng.permutation(1 << nc)
    signs = ((codes[:, None] >> np.arange(nc)) & 1) * 2 - 1
    w = (signs * mag).astype(np.float32)
    head = Head(Norm(np.arange(nc), np.ones(nc, np.float32), np.float32(1e-6), np.float32(nc)), w)
    assert head.table is not None
    exact = np.array([0, -0.0, 0, 1, -1, 2, -3, 0.5, 7, -0.25, 1 << 12], np.float32)
    rounding = np.array([1 << 20, -(1 << 21), 1e-30, 3.1, -2.7, 1 / 3], np.float32)
    accepted = refused = 0
    for _ in range(3000):
        h = np.where(rng.random(nc) < 0.97, rng.choice(exact, nc), rng.choice(rounding, nc))
        h = h.astype(np.float32)
        got = head._table(h)
        want = int(torch.argmax(F.linear(torch.from_numpy(h), torch.from_numpy(w))))
        if got is None:
            refused += 1
        else:
            accepted += 1
            assert got == want, h
    assert accepted > 1000 and refused > 100


# ---------------------------------------------------------------------------------------------
# the machine slice: lowered CUDA kernels in the weights
# ---------------------------------------------------------------------------------------------
MACHINE_KERNELS = ["vadd", "intops", "bitops"]


@pytest.fixture(scope="module")
def machine():
    from qwengpu.runtime.engine import machine_model

    _, model = machine_model()
    return model


@pytest.fixture(scope="module")
def launches(machine):
    """Per kernel: (prompt, fast trace, stats of that run). Through the integration hook (it
    gathers once per model object and caches); memos cleared first, so each run is cold."""
    from qwengpu.machine import protocol as P
    from qwengpu.runtime.engine import prepare
    from qwengpu.runtime.fast import _CACHE, weights_version

    hit = _CACHE.get(machine)  # (an earlier module's flipped-and-restored weight bumps the version)
    if hit is None or hit[0] != weights_version(machine):
        _CACHE[machine] = (weights_version(machine), FastModel.from_model(machine))
    fast = _CACHE[machine][1]
    out = {}
    for name in MACHINE_KERNELS:
        prompt = prepare(KERNELS / f"{name}.cu")[2]
        fast.clear_memos()
        before = fast.stats()
        trace = run_trace_fast(machine, prompt, 20000)
        assert _CACHE[machine][1] is fast
        after = fast.stats()
        st = {k: after[k] - before[k] for k in after
              if k.startswith(("deltanet_", "mlp_memo", "mlp_column", "mlp_full", "head_"))}
        assert trace[-1] == P.ctl(P.HALT)
        out[name] = (prompt, trace, st)
    return out


@pytest.mark.parametrize(
    "name", [k if k == "vadd" else pytest.param(k, marks=pytest.mark.slow) for k in MACHINE_KERNELS]
)  # intops / bitops repeat tests/machine_weights' stock prefills: slow here, default there
def test_machine_trace_equals_stock_argmax(machine, launches, name):
    """Every fast token is the stock argmax given the same history (one stock prefill over the
    whole launch); by induction the fast trace is the stock greedy trace. The run took the
    shortcuts: one-hot DeltaNet steps only, the head table, de-duplicated rows, memo hits."""
    prompt, trace, st = launches[name]
    assert stock_teacher_forced(machine, prompt, trace) == trace
    n = len(prompt) + len(trace) - 1
    assert st["deltanet_general_steps"] == 0 and st["deltanet_onehot_steps"] > n
    assert st["head_table"] > 0 and st["head_product"] == 0
    assert st["deltanet_plan_hits"] > 0 and st["deltanet_read_hits"] > 0 and st["mlp_memo_hits"] > 0
    assert st["mlp_column_updates"] > st["mlp_full_products"] > 0  # ColumnUpdate ran, mostly updating
    from qwengpu.runtime.fast import _CACHE

    fast = _CACHE[machine][1]
    assert any(d.qk.smap is not None for d in fast.mixers) and any(m.sel is not None for m in fast.mlps)


@pytest.mark.parametrize("name", MACHINE_KERNELS)
def test_machine_outputs_decode(launches, name):
    """The fast trace dumps every output word of the launch, with the spec's expected values."""
    from qwengpu.runtime.engine import decode_dump, prepare
    from qwengpu.spec import compare, read_outputs

    _, trace, _ = launches[name]
    spec, _, _, gmem, (lo, hi) = prepare(KERNELS / f"{name}.cu")
    words = decode_dump(trace)
    assert set(range(lo, hi)) <= set(words)
    arena = np.zeros_like(gmem.arena)
    view = arena[: len(arena) // 4 * 4].view("<u4")
    for w, v in words.items():
        if w < len(view):
            view[w] = v
    gmem.arena = arena
    assert spec.expected and compare(spec, read_outputs(spec, gmem)) == []


@pytest.mark.slow  # 15 s; the debugging mode without shortcuts (the default path is checked against the
# stock argmax above, and its general paths by the small-model tests of this file)
def test_machine_general_paths_give_the_same_traces(machine, launches):
    """``shortcuts=False``: no one-hot shortcut, no memo, no head table, no row de-duplication."""
    from qwengpu.machine import protocol as P

    general = FastModel.from_model(machine, shortcuts=False)
    for name in MACHINE_KERNELS:
        prompt, trace, _ = launches[name]
        assert general.generate(prompt, 20000, stop=P.ctl(P.HALT)) == trace, name
    st = general.stats()
    assert st["deltanet_onehot_steps"] == 0 and st["head_table"] == 0 and st["mlp_memo_hits"] == 0
    assert st["mlp_column_updates"] == 0 and all(m.cols_update is None for m in general.mlps)
    assert all(not n.memo and not n._r for n in general.norms())  # no norm-factor memo either
    assert not general.head.cache  # and no head cache


@pytest.mark.slow  # 9 s; the fast runtime's negative control stays in the default run:
# test_damaged_weight_in_a_column_updated_mlp
def test_edited_weight_is_seen_by_the_integration_hook(machine, launches, flipped_weight):
    """``run_trace_fast`` (the path ``qwengpu run`` takes) keys its gathered runtime by the weights'
    version: a weight flipped in place after a run changes the trace (the negative control through
    the cached path), and restoring it gives the original trace again."""
    prompt, trace, _ = launches["vadd"]
    with flipped_weight(machine):
        assert run_trace_fast(machine, prompt, len(trace)) != trace
    assert run_trace_fast(machine, prompt, 20000) == trace


def test_damaged_weight_in_a_column_updated_mlp(machine, launches, flipped_weight):
    """Negative control through the column updates: flip a gate weight of an MLP that takes them;
    the trace changes, and the general paths (no column updates, no memos) give the same damaged
    trace, so the updates stay exact on a model whose circuit is broken."""
    from qwengpu.machine import protocol as P
    from qwengpu.runtime.fast import _CACHE

    prompt, trace, _ = launches["vadd"]
    fast = _CACHE[machine][1]  # gathered by the launches fixture from the undamaged weights
    layer = next(i for i, (_, m) in enumerate(fast.blocks) if m is not None and m.cols_update is not None)
    with flipped_weight(machine, layer):
        damaged = FastModel.from_model(machine)
        assert damaged.blocks[layer][1].cols_update is not None
        got = damaged.generate(prompt, len(trace), stop=P.ctl(P.HALT))
        assert got != trace
        assert damaged.stats()["mlp_column_updates"] > 0
        general = FastModel.from_model(machine, shortcuts=False)
        assert general.generate(prompt, len(trace), stop=P.ctl(P.HALT)) == got


def test_machine_hidden_states_bit_identical(machine, launches):
    from qwengpu.runtime.fast import _CACHE

    prompt = launches["vadd"][0]
    ids = prompt[:6]
    fast = _CACHE[machine][1] if machine in _CACHE else FastModel.from_model(machine)
    fast.reset()
    assert_bits_equal(stock_layer_states(machine, ids), fast.layer_states(ids))


@pytest.mark.slow
def test_vadd_trace_equals_stock_greedy_run(machine, launches):
    """The stock greedy loop of ``engine.generate`` itself (prefill + recurrent decode, minutes)."""
    from qwengpu.runtime.engine import generate

    prompt, trace, _ = launches["vadd"]
    assert generate(machine, prompt, 20000) == trace
