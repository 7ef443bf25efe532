"""The fast runtime (``qwengpu.runtime.fast``) against the stock ``Qwen3_5ForCausalLM``.

Token equality over whole greedy runs, bit equality of the residual after every decoder layer (and
of the final norm) on short prefixes, the float facts the re-implementation relies on, the machine
slice's vadd launch, and a negative control (a damaged weight changes the fast runtime too).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from qwengpu.compiler import Circuit, build_model
from qwengpu.runtime import FastModel, run_trace_fast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "compiler"))
from circuit_helpers import small_config  # noqa: E402

KERNELS = Path(__file__).resolve().parent.parent / "machine_weights" / "kernels"


@pytest.fixture(scope="module", autouse=True)
def two_threads():
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, min(2, old)))
    yield
    torch.set_num_threads(old)


def walker_model():
    """Token x writes m[x mod 16] := x, reads r = m[x div 16], emits (x + r + 1) mod 256."""
    c = Circuit("walker")
    x = c.input("x", 8)
    m = c.memory("m", rows=16, width=8)
    m.write(x[:4], x)
    r = m.read(x[4:])
    c.output("y", x + r + 1)
    return build_model(c.compile(small_config(256, 1024)))


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
    return build_model(c.compile(small_config(256, 1024)))


@pytest.fixture(scope="module")
def walker():
    return walker_model()


@pytest.fixture(scope="module")
def alu():
    return alu_model()


def walker_ref(start: int, n: int) -> list[int]:
    mem: dict[int, int] = {}
    v, out = start, []
    for _ in range(n):
        mem[v & 15] = v
        v = (v + mem.get(v >> 4, 0) + 1) & 255
        out.append(v)
    return out


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
    with torch.no_grad():
        stock = walker.generate(torch.tensor([[201]]), max_new_tokens=300, do_sample=False)[0].tolist()
    assert got == stock[1:] == walker_ref(201, 300)
    assert fast.generate([201], 300) == got  # generate starts from a fresh state


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
    """Negative control: the runtime reads the weights. Flip one used MLP gate weight and one
    DeltaNet value weight: the fast trace changes, and still equals the damaged stock model's."""
    model = walker_model()
    clean = FastModel.from_model(model).generate([201], 120)
    layer = next(la for la in model.model.layers if la.mlp.gate_proj.weight.any())
    w = layer.mlp.gate_proj.weight
    r, col = (w != 0).nonzero()[0].tolist()
    with torch.no_grad():
        w[r, col] = -w[r, col]
    damaged = FastModel.from_model(model).generate([201], 120)
    assert damaged != clean
    with torch.no_grad():
        stock = model.generate(torch.tensor([[201]]), max_new_tokens=120, do_sample=False)[0].tolist()
    assert damaged == stock[1:]


# ---------------------------------------------------------------------------------------------
# the machine slice: a lowered CUDA kernel in the weights
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def machine():
    from qwengpu.machine.engine import machine_model, prepare

    _, model = machine_model()
    prompt = prepare(KERNELS / "vadd.cu")[2]
    return model, prompt


@pytest.fixture(scope="module")
def fast_vadd(machine):
    """Through the integration hook (it gathers once per model object and caches)."""
    from qwengpu.machine import protocol as P

    model, prompt = machine
    trace = run_trace_fast(model, prompt, 20000)
    assert trace[-1] == P.ctl(P.HALT)
    return trace


def test_vadd_trace_equals_stock_argmax(machine, fast_vadd):
    """Every fast token is the stock argmax given the same history (one stock prefill over the
    whole launch); by induction the fast trace is the stock greedy trace."""
    model, prompt = machine
    assert stock_teacher_forced(model, prompt, fast_vadd) == fast_vadd


def test_vadd_outputs_decode(machine, fast_vadd):
    """The fast trace dumps every output word of the launch (values: checked via the stock trace)."""
    from qwengpu.machine.engine import decode_dump, prepare

    words = decode_dump(fast_vadd)
    lo, hi = prepare(KERNELS / "vadd.cu")[4]
    assert set(range(lo, hi)) <= set(words)


def test_machine_hidden_states_bit_identical(machine, fast_vadd):
    from qwengpu.runtime.fast import _CACHE

    model, prompt = machine
    ids = prompt[:6]
    fast = _CACHE.get(model) or FastModel.from_model(model)
    fast.reset()
    assert_bits_equal(stock_layer_states(model, ids), fast.layer_states(ids))


@pytest.mark.slow
def test_vadd_trace_equals_stock_greedy_run(machine, fast_vadd):
    """The stock greedy loop of ``engine.generate`` itself (prefill + recurrent decode, ~1 min)."""
    from qwengpu.machine.engine import generate

    model, prompt = machine
    assert generate(model, prompt, 20000) == fast_vadd
