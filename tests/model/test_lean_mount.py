"""The lean mount (the default ``qwengpu build``): the base's files verbatim + the machine sparse.

Proved here on small synthetic bases of both layouts (hidden 128, the machine's test layer shape):
text through our runtime is ``AutoModelForCausalLM.from_pretrained(BASE, dtype=D)``'s, logits bit
for bit on a prefill and on the one-token decode path, for D in bfloat16 and float32; sampling
settings are the base's ``generation_config.json``; a launch is the standalone machine's (and, in
the slow tests, the stock single checkpoint's) token for token; a damaged machine byte, a changed
base tensor and bad input are refused by name; the folder is at most the base plus the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

KERNELS = Path(__file__).resolve().parent.parent / "machine_weights" / "kernels"
VADD = KERNELS / "vadd.cu"
TEXT = [5, 100, 200, 300, 17, 999, 3, 64, 1000, 512, 7, 8]


@pytest.fixture(scope="module")
def cond_base(tmp_path_factory) -> Path:
    """The official layout (``Qwen3_5ForConditionalGeneration``: vision tower, ``text_config``),
    untied, bfloat16 on disk."""
    from qwengpu.model.synthetic import make_synthetic_base

    out = tmp_path_factory.mktemp("bases") / "cond128"
    return make_synthetic_base(out, layout="conditional", hidden=128, vocab=1024, layers=2, dtype="bfloat16",
                               tied=False)


@pytest.fixture(scope="module")
def lean_causal(small_base, tmp_path_factory) -> Path:
    from qwengpu.model.lean import build_lean

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    out = tmp_path_factory.mktemp("lean") / "causal"
    build_lean(small_base, out)
    yield out
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="module")
def lean_cond(cond_base, lean_causal, tmp_path_factory) -> Path:
    from qwengpu.model.lean import build_lean

    out = tmp_path_factory.mktemp("lean") / "cond"
    build_lean(cond_base, out)  # the machine part is the causal build's (linked, its hash checked)
    yield out
    shutil.rmtree(out, ignore_errors=True)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int16 if t.dtype == torch.bfloat16 else torch.int32)


# ---------------------------------------------------------------------------------------------
# the folder
# ---------------------------------------------------------------------------------------------
def test_folder_is_the_base_verbatim_plus_the_machine_sparse(lean_causal, small_base):
    from qwengpu.model.lean import MACHINE_DIR, MACHINE_FILE, read_lean_sidecar

    rec = read_lean_sidecar(lean_causal)
    for p in small_base.iterdir():  # every base file, byte for byte (hard links here: same filesystem)
        q = lean_causal / p.name
        assert q.read_bytes() == p.read_bytes(), p.name
        assert os.stat(q).st_ino == os.stat(p).st_ino
    assert (lean_causal / "generation_config.json").is_file()
    size = sum(p.stat().st_size for p in lean_causal.rglob("*") if p.is_file())
    base = sum(p.stat().st_size for p in small_base.iterdir())
    machine = (lean_causal / MACHINE_DIR / MACHINE_FILE).stat().st_size
    assert size <= base + rec["machine_dense_bytes"]  # the target: at most the base plus the machine
    assert machine < rec["machine_dense_bytes"] / 4  # stored sparse (~12 % of dense here)
    assert rec["machine_layers"] == 40 and rec["base_vocab"] == 1024 and rec["layout"] == "causal"


def test_sparse_round_trip_keeps_every_bit():
    from qwengpu.model.lean import from_sparse, to_sparse

    t = torch.tensor([[0.0, -0.0, 1.5, float("inf")], [float("nan"), 0.0, -2.0, 1e-45]])
    mask, vals = to_sparse(t)
    assert vals.numel() == 6  # -0.0 is a non-zero bit pattern: kept
    assert torch.equal(_bits(from_sparse(mask, vals, (2, 4))), _bits(t))


# ---------------------------------------------------------------------------------------------
# text: the base's own logits, bit for bit, in the user's dtype
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["causal", "conditional"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_text_is_the_base_bit_for_bit(layout, dtype, request):
    from transformers import AutoModelForCausalLM

    from qwengpu.runtime.lean import LeanText

    base_dir = request.getfixturevalue("small_base" if layout == "causal" else "cond_base")
    mount = request.getfixturevalue("lean_causal" if layout == "causal" else "lean_cond")
    D = getattr(torch, dtype)
    ref = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=D).eval()
    ours = LeanText(mount, dtype=dtype)
    assert next(ours.model.parameters()).dtype == D
    ids = torch.tensor([TEXT])
    with torch.no_grad():
        a, b = ref(ids, use_cache=True), ours(ids, use_cache=True)  # prefill (chunked path)
        assert a.logits.shape[-1] == 1024
        assert torch.equal(_bits(a.logits), _bits(b.logits))
        for t in (42, 7):  # one-token decode with the cache (recurrent path)
            a = ref(torch.tensor([[t]]), cache=a.cache, use_cache=True)
            b = ours(torch.tensor([[t]]), cache=b.cache, use_cache=True)
            assert torch.equal(_bits(a.logits), _bits(b.logits))
        ga = ref.generate(ids, max_new_tokens=4, do_sample=False)
        gb = ours.generate(ids, max_new_tokens=4, do_sample=False)
    assert torch.equal(ga, gb)
    # sampling settings: the base's generation_config.json (the synthetic base says top_k 20)
    assert ours.generation_config.top_k == 20 == ref.generation_config.top_k
    assert ours.generation_config.top_p == ref.generation_config.top_p


def test_text_refuses_machine_ids_float16_and_missing_devices(lean_causal):
    from qwengpu.errors import QwenGPUError
    from qwengpu.runtime.lean import LeanText, check_device_dtype

    with pytest.raises(QwenGPUError, match="float16 is not supported"):
        check_device_dtype("cpu", "float16")
    if not torch.cuda.is_available():
        with pytest.raises(QwenGPUError, match="no CUDA device"):
            check_device_dtype("cuda", "bfloat16")
    ours = LeanText(lean_causal, dtype="bfloat16")
    with pytest.raises(QwenGPUError, match="not a text token"):
        ours(torch.tensor([[5, 1024 + 3]]))


def test_chat_reply_through_the_lean_mount_is_the_bases(lean_causal, small_base):
    """The chat host's path: ``load_chat_model`` gives the lean text runtime (the base's own dtype by
    default) and the base's tokenizer; a greedy reply is the base's, token for token."""
    from qwengpu.host.repliers import ModelReplier, load_chat_model
    from qwengpu.runtime.lean import LeanText
    from qwengpu.runtime.mounted_text import load_mount_text

    model, tok = load_chat_model(str(lean_causal))
    assert isinstance(model, LeanText) and model.dtype == "bfloat16"
    assert load_mount_text(lean_causal, dtype="float32").dtype == "float32"
    bmodel, btok = load_chat_model(str(small_base), dtype="bfloat16")
    assert len(tok) == len(btok)
    msgs = [{"role": "user", "content": "What is 2 + 2?"}]
    a = ModelReplier(model, tok, max_new_tokens=8).reply(msgs, None)
    b = ModelReplier(bmodel, btok, max_new_tokens=8).reply(msgs, None)
    assert a.text == b.text and a.stats["tokens"] == b.stats["tokens"] > 0


def test_memory_estimate_refuses_with_numbers(lean_causal, monkeypatch):
    from qwengpu.model import memory
    from qwengpu.model.memory import MemoryLimitError
    from qwengpu.runtime.lean import LeanText

    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 1 << 20)
    with pytest.raises(MemoryLimitError, match=r"needs about .* GiB .* 0\.00 GiB are available"):
        LeanText(lean_causal, dtype="bfloat16")


# ---------------------------------------------------------------------------------------------
# launches: the standalone machine's, token for token
# ---------------------------------------------------------------------------------------------
def test_launch_through_the_lean_mount_is_the_standalone_machines(lean_causal, standalone_vadd):
    from qwengpu.runner import run_kernel
    from qwengpu.runtime.mounted import mounted_model

    mm = mounted_model(lean_causal)
    run = mm.launch(VADD)
    assert run.prompt == standalone_vadd.prompt
    assert run.trace == standalone_vadd.trace
    assert [int(x) for x in run.outputs["out"]] == standalone_vadd.out
    res = run_kernel(VADD, engine="model", model_dir=str(lean_causal))
    assert res.passed and res.stats["runtime"] == "lean-fast"


# ---------------------------------------------------------------------------------------------
# trusting nothing: damaged machine bytes, changed base tensors, bad input
# ---------------------------------------------------------------------------------------------
def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, copy_function=shutil.copy2)
    return dst


def _flip_first_nonzero(path: Path, tensor: str) -> None:
    with open(path, "r+b") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        lo, hi = header[tensor]["data_offsets"]
        f.seek(8 + n + lo)
        data = np.frombuffer(f.read(hi - lo), dtype=np.uint8)
        at = int(np.flatnonzero(data)[0])
        f.seek(8 + n + lo + at)
        f.write(bytes([int(data[at]) ^ 0x01]))


def test_a_damaged_machine_byte_is_named(lean_causal, tmp_path):
    from qwengpu.model.lean import MACHINE_DIR, MACHINE_FILE, LeanError
    from qwengpu.runtime.lean import LeanMount

    bad = _copy(lean_causal, tmp_path / "bad")
    _flip_first_nonzero(bad / MACHINE_DIR / MACHINE_FILE, "model.layers.12.mlp.gate_proj.weight.values")
    want = r"machine tensor model\.layers\.12\.mlp\.gate_proj\.weight \(values\) is damaged"
    with pytest.raises(LeanError, match=want):
        LeanMount.load(bad)


def test_a_base_tensor_changed_after_the_build_is_named(lean_causal, tmp_path):
    from qwengpu.model.lean import LeanError, check_base, read_lean_sidecar
    from qwengpu.runtime.lean import LeanText

    bad = _copy(lean_causal, tmp_path / "bad")
    rec = read_lean_sidecar(bad)
    name = "model.layers.1.mlp.down_proj.weight"
    shard = rec["base_where"][name]
    check_base(bad, rec)  # a plain copy (same sizes, mtimes kept): accepted without hashing
    _flip_first_nonzero(bad / shard, name)
    with pytest.raises(LeanError, match=rf"base tensor {name} changed after the build"):
        LeanText(bad)
    (bad / "tokenizer_config.json").write_text("{}")
    with pytest.raises(LeanError, match="tokenizer_config.json: the base file changed"):
        check_base(bad, rec)


def test_build_refuses_bad_input(lean_causal, small_base, tmp_path):
    from qwengpu.model.lean import LeanError, build_lean
    from qwengpu.model.mount import MountError, build_mount

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("keep me")
    with pytest.raises(MountError, match="exists and is not empty"):
        build_mount(small_base, busy)  # the stock export into a non-empty folder
    with pytest.raises(LeanError, match="exists and is not empty"):
        build_lean(small_base, busy)
    assert [p.name for p in busy.iterdir()] == ["x"]
    with pytest.raises(LeanError, match="is itself a mount"):
        build_lean(lean_causal, tmp_path / "twice")
    with pytest.raises(MountError, match="no such checkpoint folder"):
        build_lean(tmp_path / "nothing", tmp_path / "o")
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no temporary folder left


# ---------------------------------------------------------------------------------------------
# the stock single checkpoint (qwengpu build --stock) equals the lean runtime
# ---------------------------------------------------------------------------------------------
def _kl_max(a: torch.Tensor, b: torch.Tensor) -> float:
    la, lb = torch.log_softmax(a.double(), -1), torch.log_softmax(b.double(), -1)
    return float((la.exp() * (la - lb)).sum(-1).max())


def _export_equals_lean(stock_dir: Path, lean_dir: Path, base_dir: Path, kernel: Path) -> None:
    from transformers import AutoModelForCausalLM

    from qwengpu.runtime.lean import LeanMount, LeanText

    V = 1024
    run = LeanMount.load(lean_dir).launch(kernel)
    stock = AutoModelForCausalLM.from_pretrained(str(stock_dir), dtype=torch.float32).eval()
    with torch.no_grad():  # teacher-forced prefill of prompt + trace: every argmax is the lean trace's
        seq = torch.tensor([[t + V for t in run.prompt + run.trace[:-1]]])
        pred = stock(seq).logits[0, len(run.prompt) - 1:].argmax(-1) - V
    assert pred.tolist() == run.trace
    ids = torch.tensor([TEXT])
    ref = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32).eval()
    ours = LeanText(lean_dir, dtype="float32")
    with torch.no_grad():
        a, b, s = ref(ids, use_cache=True), ours(ids, use_cache=True), stock(ids, use_cache=True)
        assert torch.equal(_bits(a.logits), _bits(b.logits))
        assert _kl_max(s.logits[0, :, :V], b.logits[0]) <= 1e-9
        assert float(s.logits[0, :, V:].max()) < float(s.logits[0, :, :V].min())  # machine tokens below text
        for t in (42, 7):
            b = ours(torch.tensor([[t]]), cache=b.cache, use_cache=True)
            s = stock(torch.tensor([[t]]), cache=s.cache, use_cache=True)
            assert _kl_max(s.logits[0, :, :V], b.logits[0]) <= 1e-9


@pytest.mark.slow
def test_stock_export_equals_the_lean_runtime_causal(small_mount, lean_causal, small_base):
    _export_equals_lean(small_mount, lean_causal, small_base, VADD)


@pytest.mark.slow
def test_stock_export_equals_the_lean_runtime_conditional(cond_base, lean_cond, tmp_path):
    from qwengpu.model.mount import build_mount

    stock = tmp_path / "stock"
    build_mount(cond_base, stock)
    _export_equals_lean(stock, lean_cond, cond_base, VADD)


def test_cli_build_writes_the_lean_mount_and_refuses_cleanly(small_base, lean_causal, tmp_path, capsys,
                                                             monkeypatch):
    import errno

    from qwengpu.cli import main
    from qwengpu.model import lean
    from qwengpu.model.lean import LEAN_FORMAT, mount_format

    def cli(argv: list[str]) -> tuple[int, str, str]:
        code = main(argv)
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        return code, out, err

    out = tmp_path / "m"
    code, stdout, _ = cli(["build", "--base", str(small_base), "--out", str(out), "--json"])
    info = json.loads(stdout.strip().splitlines()[-1])
    assert code == 0 and mount_format(out) == LEAN_FORMAT and info["format"] == LEAN_FORMAT
    assert info["machine_bytes"] < info["machine_dense_bytes"] / 4
    code, _, err = cli(["build", "--base", str(small_base), "--out", str(tmp_path / "w"), "--width", "4096"])
    assert code == 7 and "--width sets the stock checkpoint" in err and not (tmp_path / "w").exists()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lean, "_place", full)  # the disk fills up while the base's files are placed
    code, _, err = cli(["build", "--base", str(small_base), "--out", str(tmp_path / "f")])
    assert code == 7 and "No space left on device" in err
    assert not (tmp_path / "f").exists() and not [p for p in tmp_path.iterdir() if ".build-" in p.name]


def test_verify_lean_hashes_everything_and_names_a_hidden_change(lean_causal, small_base, tmp_path):
    """A base tensor flipped with its mtime restored passes the cheap load check, not ``verify``."""
    from qwengpu.model.lean import check_base, read_lean_sidecar
    from qwengpu.model.lean_verify import verify_lean

    rep = verify_lean(lean_causal, small_base, quick=True)
    assert rep["ok"], rep["problems"]
    assert rep["tensors_hashed"] > 500
    bad = _copy(lean_causal, tmp_path / "bad")
    rec = read_lean_sidecar(bad)
    name = "model.layers.0.linear_attn.in_proj_qkv.weight"
    shard = bad / rec["base_where"][name]
    st = shard.stat()
    _flip_first_nonzero(shard, name)
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    check_base(bad, rec)  # the cheap check trusts size + mtime
    rep = verify_lean(bad, quick=True)
    assert not rep["ok"] and any(name in p for p in rep["problems"])
    rep = verify_lean(lean_causal, bad, quick=True)  # --base: the given base differs, by tensor
    assert not rep["ok"] and any(f"base tensor {name}: differs" in p for p in rep["problems"])


@pytest.mark.slow
def test_verify_lean_against_the_machine_cache(lean_causal):
    from qwengpu.model.lean_verify import verify_lean

    rep = verify_lean(lean_causal)
    assert rep["ok"], rep["problems"]
    rec = json.loads((lean_causal / "qwengpu_mount.json").read_text())
    assert rep["tensors_recomputed"] == len(rec["machine"])


def test_verify_lean_names_a_damaged_machine_byte(lean_causal, tmp_path):
    from qwengpu.model.lean import MACHINE_DIR, MACHINE_FILE
    from qwengpu.model.lean_verify import verify_lean

    bad = _copy(lean_causal, tmp_path / "bad")
    _flip_first_nonzero(bad / MACHINE_DIR / MACHINE_FILE, "model.layers.0.mlp.up_proj.weight.mask")
    rep = verify_lean(bad, quick=True)
    assert not rep["ok"] and any("model.layers.0.mlp.up_proj.weight (mask) is damaged" in p
                                 for p in rep["problems"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cli_device_and_dtype_refusals(lean_causal, capsys):
    from qwengpu.cli import main

    run = ["run", str(VADD), "--engine", "model", "--model", str(lean_causal)]
    ask = ["ask", "What is 2 + 2?", "--model", str(lean_causal)]
    cases = [
        (run + ["--device", "cuda"], "no CUDA device"),
        (run + ["--dtype", "bfloat16"], "exact in float32 only"),
        (ask + ["--dtype", "float16"], "float16 is not supported"),
        (ask + ["--device", "cuda"], "no CUDA device"),
    ]
    for argv, msg in cases:
        code = main(argv)
        err = capsys.readouterr().err
        assert code != 0 and msg in err and "Traceback" not in err, (argv, err)


def test_stock_only_readers_name_the_lean_format(lean_causal):
    from qwengpu.model.mount import MountError, read_mount_sidecar

    with pytest.raises(MountError, match="is a lean mount .* qwengpu build --stock"):
        read_mount_sidecar(lean_causal)
