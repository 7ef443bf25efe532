"""``qwengpu kl``: KL(base ‖ mounted) on both paths, from stock transformers forwards.

Expected values come from the definition: a model against itself has KL exactly 0 and top-1
agreement 1; a damaged copy has KL > 0; machine-token mass m costs exactly −log(1 − m) when the
text logits are otherwise equal (closed form, computed here in NumPy)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from qwengpu.errors import QwenGPUError  # noqa: E402
from qwengpu.model import kl as klmod  # noqa: E402
from qwengpu.model.synthetic import make_synthetic_base  # noqa: E402

TEXT = (
    "The quick brown fox jumps over the lazy dog. The answer is 42.\n"
    'extern "C" __global__ void k(int *out) { out[threadIdx.x] = 2 * threadIdx.x; }\n'
)


@pytest.fixture(scope="module")
def kl_bases(tmp_path_factory):
    """A small causal base, the same weights in the conditional layout (float32 on disk), a damaged
    copy of the causal one, and a text file."""
    root = tmp_path_factory.mktemp("kl")
    kw = dict(hidden=64, layers=2, vocab=1024, shards=2)
    base = make_synthetic_base(root / "base", layout="causal", dtype="float32", **kw)
    cond = make_synthetic_base(root / "cond", layout="conditional", dtype="float32", **kw)
    bad = root / "bad"
    shutil.copytree(base, bad)
    from safetensors.torch import load_file, save_file

    index = json.loads((bad / "model.safetensors.index.json").read_text())
    name = "model.layers.0.mlp.down_proj.weight"
    shard = bad / index["weight_map"][name]
    tensors = load_file(str(shard))
    tensors[name] = tensors[name] * 3.0
    save_file(tensors, str(shard), metadata={"format": "pt"})
    text = root / "text.txt"
    text.write_text(TEXT)
    return {"base": base, "cond": cond, "bad": bad, "text": text}


def test_base_against_itself_is_zero(kl_bases):
    r = klmod.compute_kl(kl_bases["base"], kl_bases["base"], kl_bases["text"])
    assert set(r["paths"]) == {"prefill", "decode"}
    assert r["tokens"] == r["text_tokens"] > 20
    for s in r["paths"].values():
        assert s["tokens"] == r["tokens"]
        assert s["mean_kl"] == 0.0 and s["max_kl"] == 0.0
        assert s["top1_agreement"] == 1.0 and s["max_machine_mass"] == 0.0


def test_conditional_layout_of_the_same_weights_is_zero(kl_bases):
    """Same seed, same text tensors: the official layout loads to the same causal model."""
    r = klmod.compute_kl(kl_bases["base"], kl_bases["cond"], kl_bases["text"], paths=("prefill",))
    assert r["paths"]["prefill"]["max_kl"] == 0.0


def test_damaged_copy_is_not_zero(kl_bases):
    r = klmod.compute_kl(kl_bases["base"], kl_bases["bad"], kl_bases["text"], max_tokens=16)
    assert r["tokens"] == 16 < r["text_tokens"]
    for s in r["paths"].values():
        assert s["tokens"] == 16
        assert 0.0 < s["mean_kl"] <= s["max_kl"]
        assert s["min_kl"] >= 0.0
    # the two paths see the same damage (different DeltaNet algorithms, same distributions)
    a, b = r["paths"]["prefill"]["mean_kl"], r["paths"]["decode"]["mean_kl"]
    assert abs(a - b) <= 1e-4 * a


def test_bfloat16_base_differs_from_float32(kl_bases):
    r = klmod.compute_kl(kl_bases["base"], kl_bases["base"], kl_bases["text"], paths=("prefill",),
                         base_dtype="bfloat16", max_tokens=8)
    assert r["base_dtype"] == "bfloat16"
    assert r["paths"]["prefill"]["mean_kl"] > 0.0


def test_statistics_against_closed_form():
    """Machine-token mass m in the mounted distribution costs −log(1 − m) per token when the text
    logits are the base's; KL of two arbitrary rows equals NumPy's sum p (log p − log q)."""
    rng = np.random.default_rng(0)
    v, extra = 50, 7
    base = rng.normal(size=(5, v)).astype(np.float32) * 3
    machine = rng.normal(size=(5, extra)).astype(np.float32) - 4
    st = klmod.PathStats()
    st.add(torch.from_numpy(base), torch.from_numpy(np.concatenate([base, machine], 1)), v)
    b64, m64 = base.astype(np.float64), machine.astype(np.float64)
    mass = np.exp(m64).sum(1) / (np.exp(b64).sum(1) + np.exp(m64).sum(1))
    want = -np.log1p(-mass)
    s = st.summary()
    assert s["tokens"] == 5 and s["top1_agreement"] == 1.0
    assert s["max_kl"] == pytest.approx(want.max(), rel=1e-12)
    assert s["mean_kl"] == pytest.approx(want.mean(), rel=1e-12)
    assert s["max_machine_mass"] == pytest.approx(mass.max(), rel=1e-12)

    other = rng.normal(size=(5, v)).astype(np.float32)
    st2 = klmod.PathStats()
    st2.add(torch.from_numpy(base), torch.from_numpy(other), v)
    lp = b64 - np.log(np.exp(b64).sum(1, keepdims=True))
    lq = other.astype(np.float64) - np.log(np.exp(other.astype(np.float64)).sum(1, keepdims=True))
    kl = (np.exp(lp) * (lp - lq)).sum(1)
    assert st2.summary()["mean_kl"] == pytest.approx(kl.mean(), rel=1e-12)
    assert st2.summary()["top1_agreement"] == float((base.argmax(1) == other.argmax(1)).mean())


def test_machine_token_winning_counts_as_disagreement():
    base = torch.tensor([[0.0, 1.0, 2.0]])
    mounted = torch.tensor([[0.0, 1.0, 2.0, 9.0]])
    st = klmod.PathStats()
    st.add(base, mounted, 3)
    assert st.summary()["top1_agreement"] == 0.0
    assert st.summary()["max_machine_mass"] > 0.99


def test_memory_estimate_refuses_with_numbers(kl_bases, monkeypatch):
    monkeypatch.setattr(klmod, "available_bytes", lambda device: 1 << 20)
    msg = r"not enough memory on cpu: the base needs .* GiB .* 0.00 GiB available"
    with pytest.raises(QwenGPUError, match=msg):
        klmod.compute_kl(kl_bases["base"], kl_bases["base"], kl_bases["text"])


def test_estimate_counts_weights_from_headers(kl_bases):
    """The element count from the safetensors headers is the loaded model's parameter count
    (mtp tensors excluded, as the loader drops them; tied head counted once)."""
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(kl_bases["cond"], dtype=torch.float32)
    n = sum(p.numel() for p in m.parameters())
    assert klmod.checkpoint_elements(kl_bases["cond"]) == n
    est = klmod.estimate(kl_bases["base"], kl_bases["cond"], 100, "bfloat16", ("prefill",), "cpu")
    assert est.base_weights == 2 * n and est.model_weights == 4 * n


def test_cli_json_and_errors(kl_bases, capsys, tmp_path):
    from qwengpu.cli import main

    # the command measures mounts only (the JSON and table output: tests/model/test_kl_mount_only.py)
    for model in ("bad", "base"):
        rc = main(["kl", "--base", str(kl_bases["base"]), "--model", str(kl_bases[model]), "--text",
                   str(kl_bases["text"]), "--json", "--path", "prefill", "--max-tokens", "4"])
        cap = capsys.readouterr()
        assert rc != 0 and cap.out == "" and "not a qwengpu mount" in cap.err and "Traceback" not in cap.err

    empty = tmp_path / "empty.txt"
    empty.write_text("")
    for argv, msg in [
        (["--model", str(tmp_path / "nope"), "--text", str(kl_bases["text"])], "no such checkpoint"),
        (["--model", str(kl_bases["base"]), "--text", str(tmp_path / "none.txt")], "cannot read"),
        (["--model", str(kl_bases["base"]), "--text", str(empty)], "no tokens"),
        (["--model", str(kl_bases["base"]), "--text", str(kl_bases["text"]), "--max-tokens", "0"],
         "at least 1"),
        (["--model", str(tmp_path), "--text", str(kl_bases["text"])], "no config.json"),
    ]:
        rc = main(["kl", "--base", str(kl_bases["base"]), *argv])
        err = capsys.readouterr().err
        assert rc != 0 and msg in err and "Traceback" not in err


def test_smaller_vocabulary_is_not_a_mount(kl_bases, tmp_path):
    small = make_synthetic_base(tmp_path / "small", hidden=64, layers=1, vocab=512, dtype="float32")
    with pytest.raises(QwenGPUError, match="smaller than the base"):
        klmod.compute_kl(kl_bases["base"], small, kl_bases["text"])


# ---------------------------------------------------------------------------------------------
# KL(base ‖ mounted) on real mounts (qwengpu/model/mount.py): the shared hidden-128 causal mount
# (tests/model/conftest.py) by default, the official conditional layout at a width that is not a
# power-of-two multiple (c = 3) with -m slow.
# ---------------------------------------------------------------------------------------------
MOUNT_TEXT = "The answer is 42. What is the sum of 1 and 2? It is 3.\n__global__ void k() {}\n"


def _mount_kl(base, mount, tmp_path, max_tokens: int = 12) -> dict:
    text = tmp_path / "mount_text.txt"
    text.write_text(MOUNT_TEXT)
    r = klmod.compute_kl(base, mount, text, max_tokens=max_tokens)
    assert r["model_vocab"] == r["base_vocab"] + 65536
    return r


@pytest.mark.slow  # 21 s; the default run compares the mount's text with the base exactly
# (tests/model/test_mount_stock.py) and runs the KL path on a damaged base weight (below)
def test_kl_of_the_mount_is_below_1e_9(small_base, small_mount, tmp_path):
    """Both paths, float32: the mounted model's distribution is the base's (no mass on the machine's
    65,536 tokens). c = 4 makes every scaling exact, but the matmul at the mounted width may sum in
    another order than at the base's (a few ulps on some CPUs): the stock export's contract is
    KL <= 1e-9; bit-identical text is the lean runtime's (tests/model/test_lean_mount.py)."""
    r = _mount_kl(small_base, small_mount, tmp_path)
    for s in r["paths"].values():
        assert s["tokens"] == 12
        assert s["max_kl"] <= 1e-9 and s["mean_kl"] <= 1e-9
        assert s["top1_agreement"] == 1.0 and s["max_machine_mass"] <= 1e-30


def test_kl_sees_a_damaged_base_weight_in_the_mount(small_base, small_mount, damaged_copy, tmp_path):
    """Negative control: one flipped sign in the mount's copy of a base weight is seen by the KL."""
    rec = json.loads((small_mount / "qwengpu_mount.json").read_text())
    first_base = rec["layers"]["base"][0]
    bad = damaged_copy(small_mount, tmp_path / "bad", f"model.layers.{first_base}.mlp.down_proj.weight")
    text = tmp_path / "t.txt"
    text.write_text(MOUNT_TEXT)
    r = klmod.compute_kl(small_base, bad, text, max_tokens=12, paths=("prefill",))
    assert r["paths"]["prefill"]["max_kl"] > 0.0


@pytest.mark.slow
def test_kl_of_a_conditional_mount_is_below_1e_9(tmp_path):
    """The official layout (vision tower, mtp.*, untied), hidden 256: width 2304, c = 3 (not a power
    of two: logits differ in the last bits, the KL stays far below 1e-9)."""
    from qwengpu.model.mount import build_mount

    base = make_synthetic_base(tmp_path / "cbase", layout="conditional", hidden=256, vocab=2048, tied=False,
                               dtype="bfloat16", seed=5)
    mount = tmp_path / "cmount"
    rec = build_mount(base, mount)
    assert rec["layout"] == "conditional" and rec["c"] == 3.0
    try:
        r = _mount_kl(base, mount, tmp_path)
        for s in r["paths"].values():
            assert s["max_kl"] <= 1e-9 and s["top1_agreement"] == 1.0
        # as most users run it: the base in bfloat16 against the float32 mount
        text = tmp_path / "mount_text.txt"
        rb = klmod.compute_kl(base, mount, text, max_tokens=12, paths=("prefill",), base_dtype="bfloat16")
        assert rb["paths"]["prefill"]["mean_kl"] > r["paths"]["prefill"]["mean_kl"]
    finally:
        shutil.rmtree(mount, ignore_errors=True)
