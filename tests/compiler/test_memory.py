"""Exact memories in a stock Qwen3.5 Gated DeltaNet: bit-exact against a dict model, both kernel paths.

Every test drives the *stock* transformers module (``Qwen3_5GatedDeltaNet`` or a whole
``Qwen3_5DecoderLayer``) with residual vectors that satisfy the contract and compares the
residual delta, bit for bit on every hidden dim, with ``ReferenceMemory``.  Chunked path: the
whole sequence in one call (``torch_chunk_gated_delta_rule``).  Recurrent path: one token per
call with a ``DynamicCache`` (``torch_recurrent_gated_delta_rule`` after the first token), as
``generate`` does.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

transformers = pytest.importorskip("transformers")
from transformers import Qwen3_5TextConfig  # noqa: E402
from transformers.cache_utils import DynamicCache  # noqa: E402
from transformers.models.qwen3_5 import modeling_qwen3_5 as qmod  # noqa: E402

from qwengpu.compiler import numerics  # noqa: E402
from qwengpu.compiler.memory import (  # noqa: E402
    ENCODINGS,
    FitError,
    MemoryBank,
    ReadPort,
    ReferenceMemory,
    head_capacity,
    margin_report,
    plan_memory,
    program_linear_attention,
    read_chain_robustness,
)

ONE = 0


def make_config(dk=128, dv=64, nk=4, nv=8, hidden=256):
    return Qwen3_5TextConfig(
        hidden_size=hidden, linear_num_key_heads=nk, linear_num_value_heads=nv, linear_key_head_dim=dk,
        linear_value_head_dim=dv, num_hidden_layers=1, layer_types=["linear_attention"], vocab_size=16,
        intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
    )


class Dims:
    """Hands out residual dims 1, 2, ... (0 is one_dim)."""

    def __init__(self):
        self.next = 1

    def take(self, n):
        out = tuple(range(self.next, self.next + n))
        self.next += n
        return out


def make_bank(dims, name, rows, width, addr_bits, ports=1, enable=True):
    return MemoryBank(
        name=name, rows=rows, width=width, write_addr=dims.take(addr_bits), write_data=dims.take(width),
        write_enable=dims.take(1)[0] if enable else None,
        read_ports=tuple(ReadPort(dims.take(addr_bits), dims.take(width)) for _ in range(ports)),
    )


def layout_small():
    """hidden 256, d_k 128 (long query scale), d_v 64, GQA 2: width split, 2 ports, always-write bank."""
    d = Dims()
    a = make_bank(d, "a", rows=100, width=70, addr_bits=7, ports=2)
    b = make_bank(d, "b", rows=5, width=3, addr_bits=3, enable=False)
    return make_config(), [a, b]


def layout_rows_split():
    """d_k 32: a 70-row bank spans three key heads per port (address decode across heads)."""
    d = Dims()
    a = make_bank(d, "a", rows=70, width=20, addr_bits=7, ports=1)
    b = make_bank(d, "b", rows=2, width=1, addr_bits=1, ports=1)
    return make_config(dk=32, dv=32, nk=4, nv=4), [a, b]


def layout_pow4():
    """d_k 64 (power-of-four: the query scale is exactly 1/8), no GQA."""
    d = Dims()
    a = make_bank(d, "a", rows=64, width=32, addr_bits=6, ports=2)
    b = make_bank(d, "b", rows=1, width=8, addr_bits=0, ports=1)  # a latch
    return make_config(dk=64, dv=64, nk=4, nv=4), [a, b]


LAYOUTS = {"small": layout_small, "rows_split": layout_rows_split, "pow4": layout_pow4}


def build(layout, encoding="dense", dtype=torch.float32):
    config, banks = LAYOUTS[layout]()
    module = qmod.Qwen3_5GatedDeltaNet(config, 0).eval().to(dtype)
    plan = program_linear_attention(module, config, banks, ONE, encoding=encoding)
    return config, banks, module, plan


# ----------------------------------------------------------------------------------------------
# workloads


@dataclasses.dataclass
class Op:
    """One token's action on one bank."""

    enable: bool
    waddr: int
    data: int
    raddrs: tuple[int, ...]


def edge_data(width):
    top = (1 << width) - 1
    return st.one_of(st.just(0), st.just(top), st.just(1 << (width - 1)), st.just(1),
                     st.integers(0, top), st.just(top ^ (1 << (width - 1))))


def op_strategy(bank):
    n = len(bank.write_addr)
    addr = st.integers(0, 2**n - 1) if n else st.just(0)
    hot = st.integers(0, min(3, 2**n - 1)) if n else st.just(0)

    @st.composite
    def op(draw):
        waddr = draw(st.one_of(hot, addr))
        raddrs = tuple(draw(st.one_of(st.just(waddr), hot, addr)) for _ in bank.read_ports)
        return Op(draw(st.booleans()), waddr, draw(edge_data(bank.width)), raddrs)

    return op()


def tokens_strategy(banks, max_size):
    return st.lists(st.tuples(*[op_strategy(b) for b in banks]), min_size=1, max_size=max_size)


def random_tokens(banks, n, seed, hot=4):
    rng = random.Random(seed)
    toks = []
    for _ in range(n):
        ops = []
        for b in banks:
            span = 2 ** len(b.write_addr)

            def pick(span=span):
                return rng.randrange(min(hot, span) if rng.random() < 0.7 else span)

            waddr = pick()
            data = rng.choice([0, (1 << b.width) - 1, 1 << (b.width - 1), rng.getrandbits(b.width)])
            raddrs = tuple(waddr if rng.random() < 0.4 else pick() for _ in b.read_ports)
            ops.append(Op(rng.random() < 0.6, waddr, data, raddrs))
        toks.append(tuple(ops))
    return toks


def encode(config, banks, toks, seed=0, dtype=torch.float32):
    """Residual inputs (normalized = x) and the expected mixer delta, from ReferenceMemory."""
    hidden = config.hidden_size
    ref = ReferenceMemory(banks)
    used = max(max(p.out) for b in banks for p in b.read_ports) + 1
    gen = torch.Generator().manual_seed(seed)
    noise = (torch.randint(0, 2, (len(toks), used), generator=gen) * 2 - 1).tolist()
    x = torch.zeros(1, len(toks), hidden, dtype=torch.float64)
    exp = torch.zeros(1, len(toks), hidden, dtype=torch.float64)
    for t, ops in enumerate(toks):
        v = [float(n) for n in noise[t]] + [0.0] * (hidden - used)  # noise on every used dim, then fields
        v[ONE] = 1.0
        for b, op in zip(banks, ops, strict=True):
            for i, d in enumerate(b.write_addr):
                v[d] = 1.0 if (op.waddr >> i) & 1 else -1.0
            for i, d in enumerate(b.write_data):
                v[d] = 1.0 if (op.data >> i) & 1 else -1.0
            if b.write_enable is not None:
                v[b.write_enable] = 1.0 if op.enable else -1.0
            for port, ra in zip(b.read_ports, op.raddrs, strict=True):
                for i, d in enumerate(port.addr):
                    v[d] = 1.0 if (ra >> i) & 1 else -1.0
                for d in port.out:
                    v[d] = -1.0
        x[0, t] = torch.tensor(v, dtype=torch.float64)
        for d, val in ref.step(v).items():
            exp[0, t, d] = val
    return x.to(dtype), exp


def run_chunked(module, x):
    with torch.no_grad():
        return module(x)


def run_recurrent(module, config, x, segments=None):
    """Token by token with a cache (segments: lengths of multi-token prefill calls to interleave)."""
    cache = DynamicCache(config=config)
    outs, t = [], 0
    segments = list(segments or [])
    with torch.no_grad():
        while t < x.shape[1]:
            n = segments.pop(0) if segments else 1
            outs.append(module(x[:, t: t + n], cache=cache))
            t += n
    return torch.cat(outs, dim=1)


def assert_exact(out, exp):
    """Bit-exact on every dim (+0 and -0 both count as zero: they add identically to the residual)."""
    out64 = out.to(torch.float64)
    bad = out64 != exp
    if bad.any():
        t, d = bad[0].nonzero()[0].tolist()
        raise AssertionError(f"{int(bad.sum())} wrong dims; first: token {t} dim {d}: got {out64[0, t, d]!r} "
                             f"expected {exp[0, t, d]!r}")
    assert torch.equal(numerics.float_bits(out.abs().to(torch.float32)),
                       numerics.float_bits(exp.to(torch.float32)))


# ----------------------------------------------------------------------------------------------
# float facts


def test_measured_thresholds_match_constants():
    m = numerics.measure_activation_thresholds()
    assert m["silu_identity_min"] == numerics.SILU_IDENTITY_MIN
    assert m["silu_zero_max"] == numerics.SILU_ZERO_MAX
    assert m["sigmoid_one_min"] <= numerics.SIGMOID_ONE_MIN
    assert m["sigmoid_zero_max"] >= numerics.SIGMOID_ZERO_MAX
    assert m["softplus_zero_max"] == numerics.SOFTPLUS_ZERO_MAX
    assert m["silu_tiny_halves"] == 1.0


def test_query_scale_facts():
    for d in (32, 64, 128, 256, 512):
        chunked, recurrent = numerics.query_scales(d)
        assert chunked == recurrent
    # the two-hot trick fails on the chunked path for d_k = 128: fl(2**-.5) * fl32(128**-.5) != 2**-4
    half = torch.full((9,), 2**-0.5, dtype=torch.float32)
    assert float((half * 128**-0.5)[0]) != 2**-4
    assert float((half / 128**0.5)[0]) == 2**-4
    x, y = numerics.snap_factor(numerics.query_scales(128)[0])
    assert y == 1.0 and numerics.round_to(x) == x


# ----------------------------------------------------------------------------------------------
# planning


def test_capacity_of_qwen35_2b_layer():
    cfg = Qwen3_5TextConfig(hidden_size=2048, linear_num_key_heads=16, linear_num_value_heads=16,
                            linear_key_head_dim=128, linear_value_head_dim=128, num_hidden_layers=1,
                            layer_types=["linear_attention"])
    d = Dims()
    bank = make_bank(d, "regs", rows=128, width=128, addr_bits=7, ports=1)
    plan = plan_memory(cfg, [bank])
    assert (plan.rows_per_key_head, plan.bits_per_value_head, plan.free_key_heads) == (128, 128, 15)
    assert head_capacity(cfg) == {"key_heads": 16, "rows_per_key_head": 128, "value_heads_per_key_head": 1,
                                  "bits_per_value_head": 128}
    assert head_capacity(cfg, "robust")["bits_per_value_head"] == 126
    many = make_bank(d, "many", rows=128, width=100, addr_bits=7, ports=15)
    assert plan_memory(cfg, [bank, many]).free_key_heads == 0  # 16 ports of 128 rows
    assert read_chain_robustness(plan, cfg.rms_norm_eps) == {"rsqrt-1ulp": False, "rsqrt": True,
                                                              "rsqrt+1ulp": True}
    port = bank.read_ports[0]
    narrow = dataclasses.replace(bank, width=126, write_data=bank.write_data[:126],
                                 read_ports=(ReadPort(port.addr, port.out[:126]),))
    robust = plan_memory(cfg, [narrow], encoding="robust")
    assert robust.bits_per_value_head == 126 and robust.free_key_heads == 15
    assert len(plan_memory(cfg, [bank], encoding="robust").key_heads_used) == 2  # 128 bits: 2 heads
    with pytest.raises(FitError, match="needs 17 key heads.*linear_num_key_heads"):
        plan_memory(cfg, [bank, many, make_bank(d, "x", rows=2, width=1, addr_bits=1)])
    big = make_bank(Dims(), "ram", rows=1024, width=256, addr_bits=10, ports=1)
    assert len(plan_memory(cfg, [big]).key_heads_used) == 16  # 8 row groups x 2 width groups


def test_plan_rejects_bad_specs():
    cfg, (a, b) = layout_small()
    with pytest.raises(ValueError, match="address bits"):
        plan_memory(cfg, [dataclasses.replace(a, rows=200)])
    with pytest.raises(ValueError, match="write_data"):
        plan_memory(cfg, [dataclasses.replace(a, width=69)])
    with pytest.raises(ValueError, match="out dim of both"):
        plan_memory(cfg, [a, dataclasses.replace(b, name="c", read_ports=(ReadPort(b.read_ports[0].addr,
                                                                                   a.read_ports[0].out[:3]),))])
    with pytest.raises(ValueError, match="outside the residual"):
        plan_memory(cfg, [dataclasses.replace(a, write_enable=256)])
    with pytest.raises(ValueError, match="no read ports"):
        plan_memory(cfg, [dataclasses.replace(a, read_ports=())])
    with pytest.raises(FitError, match="chunked .* recurrent"):
        plan_memory(make_config(dk=96), [b])


# ----------------------------------------------------------------------------------------------
# exactness


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_chunked_long_sequence(encoding):
    config, banks, module, _ = build("small", encoding)
    x, exp = encode(config, banks, random_tokens(banks, 2100, seed=1))
    assert_exact(run_chunked(module, x), exp)


@pytest.mark.parametrize("layout", ["small", "rows_split", "pow4"])
def test_recurrent_and_mixed_paths(layout):
    config, banks, module, _ = build(layout)
    x, exp = encode(config, banks, random_tokens(banks, 100, seed=2))
    assert_exact(run_recurrent(module, config, x), exp)
    # prefill 40 (chunked, fresh state), decode 8, prefill 40 (chunked with initial state), decode
    assert_exact(run_recurrent(module, config, x, segments=[40] + [1] * 8 + [40]), exp)


@pytest.mark.parametrize("layout", ["rows_split", "pow4"])
def test_chunked_other_layouts(layout):
    config, banks, module, _ = build(layout)
    x, exp = encode(config, banks, random_tokens(banks, 700, seed=3))
    assert_exact(run_chunked(module, x), exp)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_toggle_storm_inside_one_chunk(encoding):
    """The one order-sensitive sum: a row rewritten with alternating data at every token of a chunk,
    read at every token (terms +x, -x, +x, ... of the intra-chunk read)."""
    config, banks, module, _ = build("small", encoding)
    a, b = banks
    top = (1 << a.width) - 1
    toks = []
    for t in range(192):
        data = (top if t % 2 else 0) ^ (t * 0x9E3779B1 & top if t % 7 == 0 else 0)
        toks.append((Op(t % 11 != 5, 3, data, (3, 3 if t % 3 else 4)), Op(True, t % 2, t % 8, (t % 2,))))
    x, exp = encode(config, banks, toks)
    assert_exact(run_chunked(module, x), exp)
    assert_exact(run_recurrent(module, config, x, segments=[64, 1, 1, 63]), exp)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_chunked(data):
    layout = data.draw(st.sampled_from(sorted(LAYOUTS)))
    encoding = data.draw(st.sampled_from(ENCODINGS))
    config, banks, module, _ = _cached_build(layout, encoding)
    toks = data.draw(tokens_strategy(banks, 120))
    x, exp = encode(config, banks, toks, seed=len(toks))
    assert_exact(run_chunked(module, x), exp)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_recurrent(data):
    layout = data.draw(st.sampled_from(sorted(LAYOUTS)))
    encoding = data.draw(st.sampled_from(ENCODINGS))
    config, banks, module, _ = _cached_build(layout, encoding)
    toks = data.draw(tokens_strategy(banks, 24))
    x, exp = encode(config, banks, toks, seed=len(toks))
    assert_exact(run_recurrent(module, config, x), exp)


_BUILT: dict = {}


def _cached_build(layout, encoding):
    key = (layout, encoding)
    if key not in _BUILT:
        _BUILT[key] = build(layout, encoding)
    return _BUILT[key]


def _contract_residual(config, x, norm_log4=3):
    """Give x fillers so sum(x^2) == 4**m * hidden (the input RMSNorm is then exactly x)."""
    hidden = config.hidden_size
    target = 4**norm_log4 * hidden
    fill = (hidden - 4, hidden - 3, hidden - 2, hidden - 1)
    x = x.clone()
    assert not x[..., list(fill)].any()
    rest = target - int(x[0, 0].pow(2).sum())
    assert bool((x.pow(2).sum(-1) == x[0, 0].pow(2).sum()).all())
    vals = _four_squares(rest)
    for d, v in zip(fill, vals, strict=True):
        x[..., d] = float(v)
    return x


def _four_squares(n):
    import math

    for a in range(math.isqrt(n), -1, -1):
        for b in range(min(a, math.isqrt(n - a * a)), -1, -1):
            for c in range(min(b, math.isqrt(n - a * a - b * b)), -1, -1):
                d2 = n - a * a - b * b - c * c
                d = math.isqrt(d2)
                if d * d == d2 and d <= c:
                    return (a, b, c, d)
    raise ValueError(n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decoder_layer_residual_contract(dtype):
    """A whole stock decoder layer (input RMSNorm + mixer + zeroed MLP), cached decode, in place."""
    config, banks = layout_small()
    layer = qmod.Qwen3_5DecoderLayer(config, 0).eval().to(dtype)
    program_linear_attention(layer.linear_attn, config, banks, ONE)
    with torch.no_grad():
        layer.input_layernorm.weight.fill_(2.0**3 - 1)
        for p in layer.mlp.parameters():
            p.zero_()
    x, exp = encode(config, banks, random_tokens(banks, 60, seed=5))
    x = _contract_residual(config, x).to(dtype)
    want = (x.to(torch.float64) + exp)
    with torch.no_grad():
        full = layer(x, position_embeddings=None)
        cache = DynamicCache(config=config)
        steps = torch.cat([layer(x[:, t: t + 1], position_embeddings=None, cache=cache)
                           for t in range(x.shape[1])], dim=1)
    for got in (full, steps):
        assert torch.equal(got.to(torch.float64), want)
        assert bool((got.to(torch.float64).pow(2).sum(-1) == 64 * config.hidden_size).all())


# ----------------------------------------------------------------------------------------------
# diagnostics, negative controls, bfloat16


def test_margin_report_is_positive():
    config, banks, module, plan = build("small")
    x, _ = encode(config, banks, random_tokens(banks, 200, seed=6))
    rep = margin_report(module, plan, x)
    assert rep.pop("value_levels") == 0
    assert min(rep.values()) > 1, rep
    assert rep["key_off"] == rep["query_off"] == numerics.SILU_ZERO_MAX + 128  # nearest off unit: -128
    assert rep["key_on"] == rep["query_on"] == 128 - numerics.SILU_IDENTITY_MIN


PERTURB = {
    "norm_weight+1ulp": lambda m: m.norm.weight.data.__setitem__(
        0, numerics.next_float(float(m.norm.weight.detach()[0]), 1)),
    "out_proj-1ulp": lambda m: _bump(m.out_proj.weight, -1),
    "beta_gain_16": lambda m: m.in_proj_b.weight.data.mul_(16 / 128),
    "conv_prev_tap": lambda m: m.conv1d.weight.data[..., -2].fill_(2.0**-40),
    "key_gain_32": lambda m: m.in_proj_qkv.weight.data[m.key_dim: 2 * m.key_dim].mul_(0.25),
}


def _bump(w, ulps):
    nz = w.data.nonzero()[0].tolist()
    w.data[tuple(nz)] = numerics.next_float(float(w.data[tuple(nz)]), ulps)


@pytest.mark.parametrize("name", sorted(PERTURB))
def test_negative_control_detects_perturbation(name):
    config, banks, module, _ = build("small")
    x, exp = encode(config, banks, random_tokens(banks, 300, seed=7))
    assert_exact(run_chunked(module, x), exp)
    PERTURB[name](module)
    with pytest.raises(AssertionError):
        assert_exact(run_chunked(module, x), exp)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_bfloat16_module_is_exact_after_calibration(encoding):
    """Measured: programming a bf16 module calibrates the read chain in bf16 (the module dtype).
    Keys (+-128 k), beta, decay, z and the values are exact bf16 numbers, both kernels compute in
    fp32 as analysed, the read value is rounded to bf16 once (a constant), and W snaps it to 2."""
    config, banks, module, plan = build("small", encoding, dtype=torch.bfloat16)
    assert plan.chain.dtype == torch.bfloat16
    assert numerics.representable(plan.chain.norm_weight, torch.bfloat16)
    x, exp = encode(config, banks, random_tokens(banks, 200, seed=8), dtype=torch.bfloat16)
    assert_exact(run_chunked(module, x), exp)
    assert_exact(run_recurrent(module, config, x[:, :40]), exp[:, :40])


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_qwen35_2b_shape_long(encoding):
    """The real 2B linear-attention shape, 4096 tokens chunked and 1500 recurrent."""
    cfg = Qwen3_5TextConfig(hidden_size=2048, linear_num_key_heads=16, linear_num_value_heads=16,
                            linear_key_head_dim=128, linear_value_head_dim=128, num_hidden_layers=1,
                            layer_types=["linear_attention"])
    d = Dims()
    width = 128 if encoding == "dense" else 126
    banks = [make_bank(d, "regs", rows=128, width=width, addr_bits=7, ports=3),
             make_bank(d, "ram", rows=256, width=200, addr_bits=8, ports=1),
             make_bank(d, "latch", rows=1, width=64, addr_bits=0, ports=2, enable=False)]
    module = qmod.Qwen3_5GatedDeltaNet(cfg, 0).eval()
    program_linear_attention(module, cfg, banks, ONE, encoding=encoding)
    x, exp = encode(cfg, banks, random_tokens(banks, 4096, seed=9, hot=16))
    assert_exact(run_chunked(module, x), exp)
    assert_exact(run_recurrent(module, cfg, x[:, :1500], segments=[300] + [1] * 1200), exp[:, :1500])
