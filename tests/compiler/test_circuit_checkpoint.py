"""Compiled layers as a stock checkpoint: save_pretrained, AutoModelForCausalLM.from_pretrained,
same results; a wrong or corrupt checkpoint is a clear CheckpointError."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from circuit_helpers import Harness, batch, small_config
from test_circuit_compositions import regfile_circuit, regfile_inputs
from transformers import AutoModelForCausalLM

from qwengpu.compiler import Circuit, compile_circuit, load_compiled, run, run_tokens, save_compiled
from qwengpu.errors import CheckpointError


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def regfile():
    return Harness(*regfile_circuit(), small_config())


@pytest.fixture(scope="module")
def saved(regfile, tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "regfile"
    save_compiled(regfile.model, regfile.compiled, path)
    return path


def test_folder_is_a_stock_checkpoint(saved):
    names = sorted(p.name for p in saved.iterdir())
    assert "config.json" in names and any(n.endswith(".safetensors") for n in names)
    assert not any(n.endswith(".py") for n in names)  # no custom code
    cfg = json.loads((saved / "config.json").read_text())
    assert cfg["model_type"] == "qwen3_5_text" and cfg["architectures"] == ["Qwen3_5ForCausalLM"]
    assert not any(p.name.startswith(".") for p in saved.parent.iterdir())  # no temp folder left


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_stock_reload_gives_the_same_results(regfile, saved, mode):
    model = AutoModelForCausalLM.from_pretrained(saved)
    n = 1500 if mode == "prefill" else 96
    inp = regfile_inputs(n, seed=31)
    want = regfile.python(inp)
    got = run(model, regfile.compiled, inp, mode=mode)
    for k in want:
        assert list(got[k]) == list(want[k]), k


def test_load_compiled_needs_no_circuit_object(regfile, saved):
    model, io = load_compiled(saved, expect=regfile.compiled)
    assert io.fingerprint == regfile.compiled.fingerprint()
    inp = regfile_inputs(700, seed=5)
    assert {k: list(v) for k, v in run(model, io, inp).items()} == {k: list(v) for k, v in
                                                                   regfile.python(inp).items()}


def test_token_checkpoint_roundtrip(tmp_path):
    c = Circuit("nibble")
    a, b = c.input("a", 4), c.input("b", 4)
    c.output("s", a + b)
    c.output("eq", a == b)
    h = Harness(c, {"s": lambda a, b: (a + b) & 15, "eq": lambda a, b: int(a == b)}, small_config(256, 1024))
    save_compiled(h.model, h.compiled, tmp_path / "nib")
    model, io = load_compiled(tmp_path / "nib")
    inp = batch([("a", 4), ("b", 4)], 300, seed=2)
    got = run_tokens(model, io, inp)
    assert list(got["s"]) == [(int(x) + int(y)) & 15 for x, y in zip(inp["a"], inp["b"], strict=True)]


def test_existing_folder_needs_overwrite(regfile, saved, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(saved, dst)
    with pytest.raises(CheckpointError, match="exists"):
        save_compiled(regfile.model, regfile.compiled, dst)
    save_compiled(regfile.model, regfile.compiled, dst, overwrite=True)
    load_compiled(dst, expect=regfile.compiled)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]


@pytest.fixture
def copy(saved, tmp_path):
    dst = tmp_path / "ck"
    shutil.copytree(saved, dst)
    return dst


def _weights(path):
    return next(p for p in path.iterdir() if p.suffix == ".safetensors")


def test_truncated_weights(copy):
    w = _weights(copy)
    data = w.read_bytes()
    w.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="SHA-256"):
        load_compiled(copy)


def test_one_flipped_byte(copy):
    w = _weights(copy)
    data = bytearray(w.read_bytes())
    data[-100] ^= 0x01
    w.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="SHA-256"):
        load_compiled(copy)


def test_missing_sidecar_or_config(copy):
    (copy / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json"):
        load_compiled(copy)
    (copy / "qwengpu_circuit.json").unlink()
    with pytest.raises(CheckpointError, match="qwengpu_circuit.json"):
        load_compiled(copy)


def test_wrong_model_type(copy):
    cfg = json.loads((copy / "config.json").read_text())
    cfg["model_type"] = "llama"
    (copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="model_type"):
        load_compiled(copy)


def test_checkpoint_of_another_circuit(copy):
    other = Circuit("other")
    x = other.input("x", 8)
    other.output("y", x + 3)
    with pytest.raises(CheckpointError, match="fingerprint"):
        load_compiled(copy, expect=compile_circuit(other, small_config()))


def test_not_a_folder(tmp_path):
    with pytest.raises(CheckpointError):
        load_compiled(tmp_path / "nope")


def test_failed_save_leaves_nothing(regfile, tmp_path, monkeypatch):
    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(regfile.model, "save_pretrained", boom)
    with pytest.raises(OSError):
        save_compiled(regfile.model, regfile.compiled, tmp_path / "x")
    assert list(tmp_path.iterdir()) == []
