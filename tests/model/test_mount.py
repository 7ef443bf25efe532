"""The mount: the machine's layers in front of a (synthetic) Qwen3.5, one stock checkpoint.

What is proved here, on a real mount of the whole machine (39 layers) on a hidden-128 base:
text through the mount is the base's (prefill logits bit for bit, the machine layers adding exact
zeros; decode within float32 summation-order noise), launches through it are the standalone
machine's token for token (our runtime, the stock recurrent ``generate`` and the stock chunked
prefill of prompt + trace), outputs equal the interpreter's and the kernel's meaning, ``verify``
recomputes every tensor, a flipped bit in a compiled weight breaks a launch and is named, and bad
input is refused with a message before anything is written.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

KERNELS = Path(__file__).resolve().parent.parent / "machine_weights" / "kernels"

VADD = KERNELS / "vadd.cu"
TEXT = [5, 100, 200, 300, 17, 999, 3, 64, 1000, 512, 7, 8]


def _vadd_expected() -> list[int]:
    """vadd's meaning from its spec, independently of any engine (c[i] = a[i] + b[i], int32)."""
    spec = json.loads(VADD.with_suffix(".json").read_text())
    args = {a["name"]: a for a in spec["args"]}
    return [int(x) for x in spec["expected"][spec["outputs"][0]]], args


# ---------------------------------------------------------------------------------------------
# the checkpoint
# ---------------------------------------------------------------------------------------------
def test_mount_layout_config_and_sidecar(small_mount, small_base):
    rec = json.loads((small_mount / "qwengpu_mount.json").read_text())
    cfg = json.loads((small_mount / "config.json").read_text())
    assert rec["hidden"] == 128 and rec["mounted_hidden"] == 2048 and rec["c"] == 4.0
    assert cfg["hidden_size"] == 2048 and cfg["vocab_size"] == 1024 + 65536
    assert cfg["tie_word_embeddings"] is False and cfg["dtype"] == "float32"
    lm = rec["layers"]["machine"][1]
    assert rec["layers"]["base"] == [lm, lm + 2] and cfg["num_hidden_layers"] == lm + 2
    base_types = json.loads((small_base / "config.json").read_text())["layer_types"]
    assert cfg["layer_types"][lm:] == base_types
    # the machine's shape travels with the mount (the test shape has no multiplier: issue 14)
    assert rec["machine_shape"]["multiplier"] is False
    d = rec["dims"]
    # base dims, machine dims, fillers and the flag dim are disjoint and inside the width
    spans = [set(range(128)), set(d["machine_to"]), set(d["fillers"]), {d["flag"]}]
    assert sum(map(len, spans)) == len(set().union(*spans)) and max(set().union(*spans)) < 2048
    # the norm contract on machine tokens: sum(x^2) == 64 * H' exactly
    from qwengpu.model.mount import Checkpoint

    ck = Checkpoint(small_mount)
    rows = ck.rows("model.embed_tokens.weight", 1024, 1024 + 4096).double()
    assert bool((rows.pow(2).sum(1) == 64 * 2048).all())
    assert not rows[:, :128].ne(0).any() and not rows[:, d["flag"]].ne(0).any()
    # every tensor the sidecar names is in the index, and the index names real files
    index = json.loads((small_mount / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(rec["tensors"])
    assert all((small_mount / f).is_file() for f in set(index["weight_map"].values()))


def test_tokenizer_extended_both_ways(small_mount, small_base):
    from transformers import AutoTokenizer

    from qwengpu.model.mount import machine_token

    tok = AutoTokenizer.from_pretrained(str(small_mount))
    base = AutoTokenizer.from_pretrained(str(small_base))
    for t in (0, 1, 0x1234, 65535):
        assert tok.convert_ids_to_tokens(1024 + t) == machine_token(t)
        assert tok.convert_tokens_to_ids(machine_token(t)) == 1024 + t
    s = "Hello there, how are you? 1 + 2 = 3"
    assert tok.encode(s) == base.encode(s)
    assert tok.encode(machine_token(7), add_special_tokens=False) == [1031]
    msgs = [{"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(msgs, tokenize=False) == base.apply_chat_template(msgs, tokenize=False)
    for t, i in base.get_vocab().items():
        assert tok.convert_tokens_to_ids(t) == i


# ---------------------------------------------------------------------------------------------
# launches through the mount
# ---------------------------------------------------------------------------------------------
def test_launch_fast_equals_standalone_and_meaning(mounted_fast, standalone_vadd):
    from qwengpu.runner import run_kernel

    assert mounted_fast.runtime == "fast" and mounted_fast.fallback_reason is None
    assert mounted_fast.machine_shape.multiplier is False
    run = mounted_fast.launch(VADD)
    assert run.prompt == standalone_vadd.prompt
    assert run.trace == standalone_vadd.trace  # token for token the standalone machine's
    want, _ = _vadd_expected()
    got = [int(x) for x in run.outputs["out"]]
    assert got == want
    interp = run_kernel(VADD, engine="interp")
    assert np.array_equal(interp.outputs["out"].view(np.uint32), run.outputs["out"].view(np.uint32))
    assert run.stats["runtime"] == "mounted-fast" and run.stats["tokens"] == len(run.trace)


def test_runner_engine_model(small_mount, mounted_fast):
    from qwengpu.runner import run_kernel
    from qwengpu.runtime import mounted

    mounted._LOADED.clear()
    mounted._LOADED[(str(Path(small_mount).resolve()), "fast", "cpu:float32",
                     (small_mount / "qwengpu_mount.json").stat().st_mtime)] = mounted_fast
    res = run_kernel(VADD, engine="model", model_dir=str(small_mount))
    assert res.engine == "model" and res.passed
    js = res.as_json()
    assert js["stats"]["prompt_tokens"] > 0 and js["stats"]["tokens"] > 0 and "seconds" in js["stats"]


def test_check_engine_model_reports_tokens_and_logs(small_mount, mounted_fast, tmp_path, capsys):
    """``qwengpu check DIR --engine model --model M``: a kernel through the mount passes, its row
    carries the tokens the model wrote, and ``--log`` keeps the row as one JSON line."""
    from qwengpu.cli import main
    from qwengpu.runtime import mounted

    mounted._LOADED.clear()
    mounted._LOADED[(str(Path(small_mount).resolve()), "fast", "cpu:float32",
                     (small_mount / "qwengpu_mount.json").stat().st_mtime)] = mounted_fast
    log = tmp_path / "rows.jsonl"
    code = main(["check", str(KERNELS), "-k", "vadd", "--engine", "model", "--model", str(small_mount),
                 "--json", "--log", str(log)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["engine"] == "model" and out["passed"] == 1 and out["failed"] == 0
    (row,) = out["results"]
    assert row["status"] == "pass" and row["tokens"] > row["warp_instructions"] > 0
    assert [json.loads(line) for line in log.read_text().splitlines()] == [row]


def test_fast_runtime_falls_back_when_a_launch_token_is_text(mounted_fast):
    """A fed id below V is not a machine token: the fast path does not apply (stock runs instead),
    and a text token written during a launch is an error, never mapped."""
    V = mounted_fast.V
    ids = [V + 5, 3]  # one text token in the sequence
    assert not all(V <= t < V + 65536 for t in ids)
    fast_calls = []
    real = mounted_fast.fast.generate
    mounted_fast.fast.generate = lambda *a, **k: fast_calls.append(1) or real(*a, **k)
    try:
        with mock.patch.object(type(mounted_fast), "_stock_generate", return_value=[2]) as stock:
            assert mounted_fast.generate_ids(ids, 1, stop=V) == [2]
        assert stock.called and not fast_calls
    finally:
        mounted_fast.fast.generate = real
    from qwengpu.errors import ExecutionError

    with mock.patch.object(type(mounted_fast), "generate_ids",
                           lambda self, ids, n, stop, on_token=None: [on_token(7), 7][1:]):
        with pytest.raises(ExecutionError, match="text token 7"):
            mounted_fast.generate_machine([1, 2], 4)


def test_winning_logit_must_be_positive():
    """The head guard: a winner whose logit is not safely > 0 (base tokens score exactly 0) is refused."""
    from qwengpu.runtime.fast import Norm
    from qwengpu.runtime.mounted import NotExact, _MountHead

    norm = Norm(np.arange(2), np.ones(2, dtype=np.float32), np.float32(1e-6), np.float32(2))
    head = _MountHead(norm, np.array([[1.0, -1.0], [-1.0, 1.0]], dtype=np.float32), shortcuts=False)
    assert head.argmax_normed(np.array([2.0, 1.0], dtype=np.float32)) == 0
    with pytest.raises(NotExact):
        head.argmax_normed(np.array([1.0, 1.0], dtype=np.float32))  # both logits exactly 0


# ---------------------------------------------------------------------------------------------
# verify, and the negative control
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # ~95 s (recomputes every tensor twice); the default run keeps the damaged-weight check
def test_verify_recomputes_everything(small_mount, small_base):
    from qwengpu.model.verify import verify_mount

    rep = verify_mount(small_mount, small_base)
    assert rep["ok"], rep["problems"]
    n = len(json.loads((small_mount / "qwengpu_mount.json").read_text())["tensors"])
    assert rep["tensors_hashed"] == n and rep["tensors_recomputed"] == n
    assert rep["tokenizer"] == "ok"
    rep = verify_mount(small_mount)  # no base: the machine side recomputed, the rest hashed
    assert rep["ok"], rep["problems"]


def test_damaged_compiled_weight_breaks_a_launch_and_is_named(small_mount, standalone_vadd, tmp_path,
                                                              damaged_copy):
    from qwengpu.errors import QwenGPUError
    from qwengpu.model.verify import verify_mount
    from qwengpu.runtime.mounted import MountedModel

    name = "model.layers.12.mlp.gate_proj.weight"
    bad = damaged_copy(small_mount, tmp_path / "damaged", name)
    rep = verify_mount(bad, recompute=False)  # the build's record names the tensor
    assert not rep["ok"]
    assert any(name in p for p in rep["problems"]), rep["problems"]
    assert not any("layers.11." in p or "layers.13." in p for p in rep["problems"])
    mm = MountedModel.load(bad)
    try:
        # bounded: a damaged mount that never halts stops a few tokens past the clean trace's length
        # (its tokens differ by then, or it halted early; unbounded, the default 2,000,000-token
        # limit made this test 385 s of the default run; at twice the length 28 s)
        run = mm.launch(VADD, max_tokens=len(standalone_vadd.trace) + 8)
    except QwenGPUError:
        return  # the launch broke (a fault, no halt, a malformed dump)
    # the model no longer writes the machine's steps (this flip happens to leave vadd's four output
    # words right: like the standalone machine's negative control, the trace is what must break)
    assert run.trace != standalone_vadd.trace


def test_other_compiler_version_is_named(small_mount, tmp_path):
    from qwengpu.model.verify import verify_mount

    dst = tmp_path / "old"
    dst.mkdir()
    for p in small_mount.iterdir():
        if p.name != "qwengpu_mount.json":
            (dst / p.name).symlink_to(p)
    rec = json.loads((small_mount / "qwengpu_mount.json").read_text())
    rec["compiler_version"] = "0123456789abcdef"
    (dst / "qwengpu_mount.json").write_text(json.dumps(rec))
    rep = verify_mount(dst)
    assert not rep["ok"] and "compiler version 0123456789abcdef" in rep["problems"][0]


# ---------------------------------------------------------------------------------------------
# bad input: a clear message, a non-zero exit, nothing written
# ---------------------------------------------------------------------------------------------
def _cli(argv: list[str], capsys) -> tuple[int, str]:
    from qwengpu.cli import main

    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def _copy_base(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _left_behind(parent: Path) -> list[str]:
    return [p.name for p in parent.iterdir() if ".build-" in p.name]


def test_build_refuses_bad_input(small_base, small_mount, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    code, err = _cli(["build", "--stock", "--base", str(tmp_path / "nope"), "--out", str(out)], capsys)
    assert code == 7 and "no such checkpoint folder" in err
    (tmp_path / "empty").mkdir()
    code, err = _cli(["build", "--stock", "--base", str(tmp_path / "empty"), "--out", str(out)], capsys)
    assert code == 7 and "not a checkpoint folder" in err

    b = _copy_base(small_base, tmp_path / "llama")
    cfg = json.loads((b / "config.json").read_text())
    (b / "config.json").write_text(json.dumps(dict(cfg, model_type="llama")))
    code, err = _cli(["build", "--stock", "--base", str(b), "--out", str(out)], capsys)
    assert code == 7 and "'llama' is not Qwen3.5" in err

    b = _copy_base(small_base, tmp_path / "shape")
    (b / "config.json").write_text(json.dumps(dict(cfg, hidden_act="gelu")))
    code, err = _cli(["build", "--stock", "--base", str(b), "--out", str(out)], capsys)
    assert code == 7 and "hidden_act = 'gelu' cannot host the machine" in err
    (b / "config.json").write_text(json.dumps(dict(cfg, rms_norm_eps=1e-3)))
    code, err = _cli(["build", "--stock", "--base", str(b), "--out", str(out)], capsys)
    assert code == 7 and "rms_norm_eps = 0.001 cannot host the machine" in err

    b = _copy_base(small_base, tmp_path / "trunc")
    shard = sorted(b.glob("*.safetensors"))[0]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) - 1000])
    code, err = _cli(["build", "--stock", "--base", str(b), "--out", str(out)], capsys)
    assert code == 7 and "truncated shard" in err and shard.name in err

    b = _copy_base(small_base, tmp_path / "index")
    index = json.loads((b / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "model-00009-of-00009.safetensors"
    (b / "model.safetensors.index.json").write_text(json.dumps(index))
    code, err = _cli(["build", "--stock", "--base", str(b), "--out", str(out)], capsys)
    assert code == 7 and "model-00009-of-00009.safetensors, which is missing" in err

    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, err = _cli(["build", "--stock", "--base", str(small_base), "--out", str(out)], capsys)
    assert code == 7 and "exists and is not empty" in err
    assert [p.name for p in out.iterdir()] == ["keep.txt"]

    import qwengpu.model.mount as mount

    class Usage:
        free = 10 << 20

    monkeypatch.setattr(mount.shutil, "disk_usage", lambda p: Usage())
    code, err = _cli(["build", "--stock", "--base", str(small_base), "--out", str(tmp_path / "full")], capsys)
    assert code == 7 and "not enough free disk" in err and "GB" in err
    assert not (tmp_path / "full").exists() and not _left_behind(tmp_path)

    code, err = _cli(["build", "--stock", "--base", str(small_base), "--out", str(tmp_path / "w"),
                      "--width", "1000"], capsys)
    assert code == 7 and "too narrow" in err


def test_build_that_runs_out_of_disk_midway_leaves_nothing(small_base, tmp_path, capsys, monkeypatch):
    """The disk fills up while a shard is written (ENOSPC after the free-space estimate passed):
    a message naming the cause, exit 7, no OUT and no temporary folder left behind."""
    import errno

    import qwengpu.model.mount as mount

    def full(self, progress=None):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mount._ShardWriter, "write_all", full)
    out = tmp_path / "m"
    code, err = _cli(["build", "--stock", "--base", str(small_base), "--out", str(out)], capsys)
    assert code == 7 and "No space left on device" in err and str(out) in err
    assert not out.exists() and not _left_behind(tmp_path) and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_build_refuses_a_layer_shape_the_machine_does_not_fit(small_base, tmp_path, capsys):
    """A layer shape the machine cannot be compiled into (found by compiling: minutes)."""
    b = _copy_base(small_base, tmp_path / "narrow")
    cfg = json.loads((b / "config.json").read_text())
    (b / "config.json").write_text(json.dumps(dict(cfg, intermediate_size=1024)))
    code, err = _cli(["build", "--stock", "--base", str(b), "--out", str(tmp_path / "out")], capsys)
    assert code == 7 and "intermediate_size = 1024" in err and "cannot host the machine" in err
    assert not (tmp_path / "out").exists()


def test_run_engine_model_needs_model_and_float32(small_mount, capsys):
    code, err = _cli(["run", str(VADD), "--engine", "model"], capsys)
    assert code != 0 and "--engine model needs --model DIR" in err
    argv = ["run", str(VADD), "--engine", "model", "--model", str(small_mount), "--dtype", "bfloat16"]
    code, err = _cli(argv, capsys)
    assert code != 0 and "float32 only" in err


def test_memory_estimate_refuses_with_numbers(small_mount, monkeypatch):
    from qwengpu.model import memory

    stock = memory.estimate_bytes(small_mount, "stock")
    total = sum(p.stat().st_size for p in small_mount.glob("*.safetensors"))
    assert total <= stock <= total + 2 * memory.OVERHEAD
    fast = memory.estimate_bytes(small_mount, "fast")
    assert fast < stock
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 1 << 30)
    with pytest.raises(memory.MemoryLimitError, match=r"needs about \d+\.\d GiB; 1\.0 GiB are available"):
        memory.check_fits(small_mount, "stock")


# ---------------------------------------------------------------------------------------------
# the official layout
# ---------------------------------------------------------------------------------------------
def test_conditional_layout_plan(tmp_path, small_mount):
    """The ConditionalGeneration layout's plan (no write): language-model names, the vision merger's
    output padded to H', mtp.* copied verbatim, the config's vision out_hidden_size."""
    from qwengpu.model.machine_checkpoint import cache_root, compiler_version
    from qwengpu.model.mount import Checkpoint, inspect_machine, make_plan, mount_config
    from qwengpu.model.synthetic import make_synthetic_base

    cg = make_synthetic_base(tmp_path / "cg", layout="conditional", hidden=128, vocab=1024, tied=False)
    ck = Checkpoint(cg)
    machine = inspect_machine(cache_root() / compiler_version())
    plan = make_plan(ck, ck.config, machine)
    by = {t.name: t for t in plan.tensors}
    assert not any(n.startswith("model.layers.") for n in by)
    assert by["model.language_model.embed_tokens.weight"].shape == (1024 + 65536, 2048)
    fc2 = [t for n, t in by.items() if n.startswith("model.visual.merger.linear_fc2.")]
    assert fc2 and all(t.shape[0] == 2048 for t in fc2)
    mtp = [t for n, t in by.items() if n.startswith("mtp.")]
    assert mtp and all(t.origin == "copy" and t.dtype == torch.bfloat16 for t in mtp)
    w = by["model.visual.merger.linear_fc2.weight"]
    got = next(w.produce())
    src = ck.get("model.visual.merger.linear_fc2.weight").float()
    assert torch.equal(got[:128], src * 4) and not got[128:].ne(0).any()
    cfg = mount_config(ck.config, plan, machine)
    assert cfg["vision_config"]["out_hidden_size"] == 2048 and cfg["text_config"]["hidden_size"] == 2048
    assert cfg["tie_word_embeddings"] is False
    assert math.isclose(plan.c, 4.0)


@pytest.mark.slow
def test_conditional_mount_end_to_end(tmp_path, standalone_vadd):
    """Build the official layout, load it with stock transformers, text unchanged, a launch exact."""
    from transformers import AutoModelForCausalLM

    from qwengpu.model.mount import build_mount
    from qwengpu.model.synthetic import make_synthetic_base
    from qwengpu.runtime.mounted import MountedModel

    cg = make_synthetic_base(tmp_path / "cg", layout="conditional", hidden=128, vocab=1024, tied=False,
                             dtype="float32")
    out = build_mount(cg, tmp_path / "m")
    m = tmp_path / "m"
    assert out["layout"] == "conditional"
    run = MountedModel.load(m).launch(VADD)
    assert run.trace == standalone_vadd.trace
    base = AutoModelForCausalLM.from_pretrained(str(cg), dtype=torch.float32).eval()
    mount = AutoModelForCausalLM.from_pretrained(str(m), dtype=torch.float32).eval()
    ids = torch.tensor([TEXT])
    with torch.no_grad():
        lb, lm = base(ids).logits[0], mount(ids).logits[0]
    assert torch.equal(lm[:, :1024].view(torch.int32), lb.view(torch.int32))


def test_default_width():
    """H * 4^k when it fits below H + 2048 (c a power of two), else H + 2048."""
    from qwengpu.model.mount import default_width

    assert default_width(128, 1812, 2048) == 2048  # c = 4
    assert default_width(2048, 3734, 2048) == 4096  # the 2B: c = sqrt(2)
    assert default_width(256, 1942, 2048) == 2304  # c = 3
    assert default_width(512, 2198, 2048) == 2560


def test_long_mount_loads_say_what_they_are_doing(capsys):
    """A 2B mount's load reads ~31 GB: its stages are reported on stderr, throttled."""
    from qwengpu.runtime.mounted import load_notes

    note = load_notes(Path("M"), every=0.0)
    note("checking base layer 1/24")
    quiet = load_notes(Path("M"), every=3600.0)
    quiet("never shown")
    err = capsys.readouterr().err
    assert "loading the mount M" in err and "checking base layer 1/24" in err and "never shown" not in err
