"""The machine as a stock checkpoint, and the per-compiler-version cache.

``build_checkpoint`` writes a folder that stock ``AutoModelForCausalLM.from_pretrained`` loads (no
custom code) and whose greedy ``generate`` writes the engine's own trace for a launch;
``load_or_build`` loads a verified cache entry instead of building, and rebuilds (with a warning)
an entry whose weights were damaged. Every cache here lives under ``tmp_path``, never in ``~``.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from qwengpu.compiler import CircuitIO
from qwengpu.errors import CheckpointError
from qwengpu.machine import protocol as P
from qwengpu.machine.circuit import MachineShape
from qwengpu.model import machine_checkpoint as C
from qwengpu.runtime import engine
from qwengpu.runtime.engine import prepare, run_machine
from qwengpu.runtime.engine import test_config as machine_config

K = Path(__file__).parent / "kernels"
ROOT = Path(__file__).resolve().parents[2]
REAL_VERSION = C.compiler_version  # the tests below pin the module's name to one value
FIRST = 6  # tokens of the stock greedy loop compared in the default run (the whole trace: slow)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """``$QWENGPU_CACHE`` in a temporary folder; the version pinned for the whole module, so an edit
    of the compiler sources while the tests run cannot make the second call miss the first one's
    entry (that a source edit changes the version is tested on a copy of the sources)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    version = REAL_VERSION()
    engine.machine_model()  # the session's machine (built by its first user, here or earlier)
    session_entry = C.cache_root() / version
    root = tmp_path_factory.mktemp("qwengpu_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QWENGPU_CACHE", str(root))
        mp.setattr(C, "compiler_version", lambda config=None, shape=engine.DEFAULT_SHAPE: version)
        yield {"root": root / "machine", "version": version, "session_entry": session_entry}
    torch.set_num_threads(old)
    shutil.rmtree(root, ignore_errors=True)  # ~5 GB: not left for pytest's retention of tmp folders


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system (a developer's home cache): a copy
        shutil.copy2(src, dst)


@pytest.fixture(scope="module")
def reference(cache):
    """``load_or_build`` on this module's cache, seeded with the session's entry (hard links: the
    session built it through the same ``load_or_build``; a build of an empty cache, ~90 s on CI's
    machine, is the slow ``test_an_empty_cache_builds_once_and_saves``): it loads, and gives the
    engine's vadd trace."""
    shutil.copytree(cache["session_entry"], cache["root"] / cache["version"], copy_function=_link_or_copy)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(C, "_build", lambda *a, **kw: pytest.fail("built although the entry was there"))
        io, model = C.load_or_build()
    run = run_machine(K / "vadd.cu", model=model)
    assert run.passed and run.trace[-1] == P.ctl(P.HALT)
    del model
    gc.collect()
    _, _, prompt, _, _ = prepare(K / "vadd.cu")
    assert prompt == run.prompt
    return {"io": io, "prompt": run.prompt, "trace": run.trace}


@pytest.fixture(scope="module")
def ckpt(cache, reference, tmp_path_factory):
    out = tmp_path_factory.mktemp("ckpt") / "machine"
    assert C.build_checkpoint(out) == out
    yield out
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="module")
def stock(cache, reference):
    """The cache entry ``load_or_build`` wrote, loaded by stock transformers (the entry is the same stock
    checkpoint format as ``build_checkpoint``'s folder, which the slow tests below build: a second
    compile of the machine, ~60 s of the default run on CI's machine)."""
    from transformers import AutoModelForCausalLM

    entry = cache["root"] / cache["version"]
    model = AutoModelForCausalLM.from_pretrained(entry)  # stock: no trust_remote_code, no qwengpu code
    model.eval()
    yield model
    del model
    gc.collect()


def _generate(model, prompt: list[int], n: int) -> list[int]:
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False)
    return out[0, len(prompt):].tolist()


# ---------------------------------------------------------------------------------------------
# the version
# ---------------------------------------------------------------------------------------------
def test_version_changes_with_shape_config_and_sources(tmp_path, monkeypatch):
    v = REAL_VERSION()
    # the test shape's machine: no units, one 1,024-row ROM bank, 2,048 words in banks of 1,024 rows
    # built before the datapath, one-lane rows
    test_shape = MachineShape(rom_rows=1024, gmem_words=2048, gmem_bank_rows=1024, gmem_late=False,
                              lane_rows=True)
    assert v == REAL_VERSION(machine_config(), test_shape) and len(v) == 16
    assert v == REAL_VERSION(machine_config(), engine.shape_for(machine_config()))
    assert REAL_VERSION(shape=MachineShape(rom_rows=64)) != v
    assert REAL_VERSION(shape=MachineShape(gmem_words=256)) != REAL_VERSION(shape=MachineShape(rom_rows=64))
    assert REAL_VERSION(machine_config(intermediate=2 * machine_config().intermediate_size)) != v
    # a copy of the hashed sources: editing any of them names a new entry
    pkg = tmp_path / "qwengpu"
    shutil.copytree(C._PKG / "compiler", pkg / "compiler", ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "machine").mkdir()
    for name in C._SOURCES:
        shutil.copy(C._PKG / name, pkg / name)
    monkeypatch.setattr(C, "_PKG", pkg)
    base = REAL_VERSION()
    for name in ("machine/circuit.py", "machine/protocol.py", "compiler/mlp.py", "compiler/configs/x.json"):
        f = pkg / name
        before = f.read_bytes() if f.exists() else None
        f.write_text((before or b"").decode() + "\n# edited\n")
        assert REAL_VERSION() != base, name
        if before is None:
            f.unlink()
        else:
            f.write_bytes(before)
        assert REAL_VERSION() == base
    # a machine module the circuit comes to import is hashed too
    (pkg / "machine" / "extra.py").write_text("K = 1\n")
    with open(pkg / "machine" / "circuit.py", "a") as f:
        f.write("\nfrom qwengpu.machine import extra  # noqa\n")
    base = REAL_VERSION()
    (pkg / "machine" / "extra.py").write_text("K = 2\n")
    assert REAL_VERSION() != base


# ---------------------------------------------------------------------------------------------
# the cache: the second call loads (before the stock model below is loaded: one model at a time)
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # a whole build of the test-shape machine (~90 s on CI's machine)
def test_an_empty_cache_builds_once_and_saves(tmp_path, monkeypatch):
    """The first ``load_or_build`` on an empty cache builds once and saves the entry; the next call
    (a fresh process's: the in-process memo is ``engine.machine_model``'s) loads it."""
    monkeypatch.setenv("QWENGPU_CACHE", str(tmp_path))
    calls = []
    real = C._build

    def spy(*a, **kw):
        calls.append(a)
        return real(*a, **kw)

    monkeypatch.setattr(C, "_build", spy)
    io, model = C.load_or_build()
    del model
    gc.collect()
    assert len(calls) == 1
    version = C.compiler_version()
    assert [r["version"] for r in C.cache_entries()] == [version] and C.cache_entries()[0]["complete"]
    io2, model = C.load_or_build()
    del model
    gc.collect()
    assert len(calls) == 1 and io2.fingerprint == io.fingerprint


def test_second_call_loads_instead_of_building(cache, reference, monkeypatch):
    entry = cache["root"] / cache["version"]
    assert (entry / C.MACHINE_SIDECAR).exists()
    monkeypatch.setattr(C, "_build", lambda *a, **kw: pytest.fail("rebuilt although the entry was valid"))
    io, model = C.load_or_build()
    try:
        assert isinstance(io, CircuitIO) and io.fingerprint == reference["io"].fingerprint
        assert run_machine(K / "vadd.cu", model=model).trace == reference["trace"]
    finally:
        del model
        gc.collect()
    rows = C.cache_entries()
    assert [r["version"] for r in rows] == [cache["version"]] and rows[0]["complete"]
    assert rows[0]["bytes"] > 10**9


# ---------------------------------------------------------------------------------------------
# build_checkpoint: a stock checkpoint whose greedy generate is the engine's trace
# ---------------------------------------------------------------------------------------------
def _assert_stock_folder(folder: Path, version: str) -> None:
    names = sorted(p.name for p in folder.iterdir())
    assert "config.json" in names and any(n.endswith(".safetensors") for n in names)
    assert not any(n.endswith(".py") for n in names)  # no custom code
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["model_type"] == "qwen3_5_text" and cfg["architectures"] == ["Qwen3_5ForCausalLM"]
    assert "auto_map" not in cfg and cfg["vocab_size"] == 1 << 16
    meta = C.read_machine_sidecar(folder)
    assert meta["compiler_version"] == version and meta["vocab_size"] == 1 << 16


def test_cache_entry_is_a_stock_checkpoint(cache, reference):
    _assert_stock_folder(cache["root"] / cache["version"], cache["version"])


@pytest.mark.slow  # a second compile (build_checkpoint streams the machine), ~60 s
def test_checkpoint_folder_is_stock(ckpt, cache):
    _assert_stock_folder(ckpt, cache["version"])
    assert not any(p.name.startswith(".") for p in ckpt.parent.iterdir())  # no temporary folder left


@pytest.mark.slow  # needs ``ckpt``: a second compile
def test_streamed_checkpoint_equals_the_in_memory_build(ckpt, cache):
    """``build_checkpoint`` streams the machine one layer at a time (``stream_checkpoint``); the cache
    entry ``load_or_build`` saved was built whole in memory (``build_model``): every tensor is the
    same, bit for bit, and so is the circuit record (less its container hashes)."""
    from safetensors import safe_open

    entry = cache["root"] / cache["version"]
    with safe_open(str(ckpt / "model.safetensors"), framework="pt") as fa, \
            safe_open(str(entry / "model.safetensors"), framework="pt") as fb:
        assert set(fa.keys()) == set(fb.keys()) and len(list(fa.keys())) > 500
        for k in sorted(fa.keys()):
            a, b = fa.get_tensor(k), fb.get_tensor(k)
            assert a.dtype == b.dtype == torch.float32 and a.shape == b.shape, k
            assert torch.equal(a.view(torch.int32), b.view(torch.int32)), k
    ra, rb = (json.loads((d / "qwengpu_circuit.json").read_text()) for d in (ckpt, entry))
    assert {k: v for k, v in ra.items() if k != "files"} == {k: v for k, v in rb.items() if k != "files"}


def test_stock_generate_writes_the_engine_trace(stock, reference):
    """transformers' own greedy ``generate`` on the engine's vadd prompt: the first tokens of the
    trace ``run_machine`` wrote (the whole trace: the slow test below)."""
    assert next(stock.parameters()).dtype == torch.float32
    assert _generate(stock, reference["prompt"], FIRST) == reference["trace"][:FIRST]


@pytest.mark.slow
def test_stock_generate_whole_trace(stock, reference):
    got = _generate(stock, reference["prompt"], len(reference["trace"]))
    assert got == reference["trace"]
    assert got[-1] == P.ctl(P.HALT)


def test_build_refuses_non_empty_folder(tmp_path, monkeypatch):
    (tmp_path / "keep.txt").write_text("mine")
    monkeypatch.setattr(C, "stream_checkpoint", lambda *a, **kw: pytest.fail("built although refused"))
    with pytest.raises(CheckpointError, match="not empty"):
        C.build_checkpoint(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


# ---------------------------------------------------------------------------------------------
# the cache
# ---------------------------------------------------------------------------------------------
def test_machine_model_uses_the_cache_once_per_process(monkeypatch):
    calls = []
    monkeypatch.setattr(engine, "_MODEL_CACHE", {})
    monkeypatch.setattr(
        C, "load_or_build", lambda config, shape, **kw: calls.append(shape) or ("io", "model")
    )
    shape = MachineShape(rom_rows=64)
    assert engine.machine_model(shape=shape) == ("io", "model")
    assert engine.machine_model(shape=shape) == ("io", "model")
    assert calls == [shape]


def _tiny_build(calls):
    """A stand-in for the machine build: a small real circuit with the machine's 16-bit tokens."""
    from transformers import Qwen3_5TextConfig

    from qwengpu.compiler import Circuit, build_model, compile_circuit

    def build(config, shape, progress=None):
        calls.append(shape)
        c = Circuit("tiny_machine")
        tok = c.input("tok", 16)
        c.output("out", tok ^ c.const(0x5A5A, 16))
        cfg = Qwen3_5TextConfig(hidden_size=256, intermediate_size=1024, num_hidden_layers=1,
                                num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                linear_num_key_heads=16, linear_num_value_heads=16,
                                linear_key_head_dim=128, linear_value_head_dim=64, vocab_size=64)
        compiled = compile_circuit(c, cfg)
        return compiled, build_model(compiled)

    return build


def test_corrupt_entry_is_rebuilt(tmp_path, monkeypatch, capsys):
    calls: list = []
    monkeypatch.setattr(C, "_build", _tiny_build(calls))
    monkeypatch.setattr(C, "compiler_version", lambda config=None, shape=None: "v-tiny")
    io, model = C.load_or_build(cache_dir=tmp_path)
    assert len(calls) == 1
    entry = tmp_path / "v-tiny"
    io2, _ = C.load_or_build(cache_dir=tmp_path)  # verified and loaded
    assert len(calls) == 1 and io2.fingerprint == io.fingerprint
    assert "warning" not in capsys.readouterr().err
    weights = next(entry.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0x01  # one flipped bit in the weights
    weights.write_bytes(bytes(data))
    io3, model3 = C.load_or_build(cache_dir=tmp_path)
    err = capsys.readouterr().err
    assert len(calls) == 2, "a damaged entry must be rebuilt, not trusted"
    warnings = [ln for ln in err.splitlines() if "warning" in ln]  # (transformers' bars aside)
    assert len(warnings) == 1 and "SHA-256 mismatch" in warnings[0], err
    assert io3.fingerprint == io.fingerprint
    C.load_or_build(cache_dir=tmp_path)  # the rebuilt entry is whole again
    assert len(calls) == 2 and "warning" not in capsys.readouterr().err


def test_entry_of_another_version_is_rebuilt(tmp_path, monkeypatch, capsys):
    calls: list = []
    monkeypatch.setattr(C, "_build", _tiny_build(calls))
    monkeypatch.setattr(C, "compiler_version", lambda config=None, shape=None: "v-a")
    C.load_or_build(cache_dir=tmp_path)
    os.rename(tmp_path / "v-a", tmp_path / "v-b")  # an entry whose record names another version
    monkeypatch.setattr(C, "compiler_version", lambda config=None, shape=None: "v-b")
    C.load_or_build(cache_dir=tmp_path)
    assert len(calls) == 2 and "compiler version 'v-a'" in capsys.readouterr().err
    assert C.read_machine_sidecar(tmp_path / "v-b")["compiler_version"] == "v-b"


def test_prune_keeps_the_most_recent_entries(tmp_path):
    for i, name in enumerate(["a", "b", "c", "d"]):
        (tmp_path / name).mkdir()
        (tmp_path / name / C.MACHINE_SIDECAR).write_text(json.dumps({"format": C.MACHINE_FORMAT}))
        os.utime(tmp_path / name / C.MACHINE_SIDECAR, (1000 + i, 1000 + i))
    stale = tmp_path / ".a.build-1234"
    stale.mkdir()
    os.utime(stale, (1000, 1000))
    removed = C.prune(tmp_path, keep=2, protect="a")
    assert sorted(p.name for p in removed) == [".a.build-1234", "b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "c", "d"]


# ---------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------
def _cli(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, QWENGPU_CACHE=str(cache_dir))
    return subprocess.run([sys.executable, "-m", "qwengpu.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env)


@pytest.mark.parametrize("shape", ["test", "2b"])
def test_cli_build_refuses_non_empty_folder(tmp_path, shape):
    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "notes.txt").write_text("not a checkpoint")
    p = _cli("machine", "build", "--out", str(out), "--shape", shape, cache_dir=tmp_path / "cache")
    assert p.returncode == 7, p.stderr
    assert "error:" in p.stderr and "exists and is not empty" in p.stderr and "--overwrite" in p.stderr
    assert "Traceback" not in p.stderr
    assert [q.name for q in out.iterdir()] == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "not a checkpoint"
    assert not any(q.name.startswith(".") for q in tmp_path.iterdir())


def test_cli_build_rejects_unknown_shape(tmp_path):
    p = _cli("machine", "build", "--out", str(tmp_path / "x"), "--shape", "9b", cache_dir=tmp_path)
    assert p.returncode == 2 and "invalid choice" in p.stderr


def test_cli_cache_lists_and_clears(tmp_path):
    root = tmp_path / "machine"
    entry = root / "0123456789abcdef"
    entry.mkdir(parents=True)
    meta = {"format": C.MACHINE_FORMAT, "config": {"hidden_size": 8}}
    (entry / C.MACHINE_SIDECAR).write_text(json.dumps(meta))
    (entry / "model.safetensors").write_bytes(bytes(1000))
    p = _cli("machine", "cache", "--json", cache_dir=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["root"] == str(root) and [e["version"] for e in out["entries"]] == [entry.name]
    assert out["entries"][0]["bytes"] > 1000 and out["entries"][0]["complete"]
    p = _cli("machine", "cache", "--clear", "--yes", cache_dir=tmp_path)
    assert p.returncode == 0 and entry.name in p.stdout and "removed 1 entry" in p.stdout
    assert not entry.exists()
