"""The machine cache's lean entry (``qwengpu.model.machine_sparse``): what ``qwengpu run`` loads.

On a tiny real circuit with the machine's 16-bit tokens (the cache machinery is the same; seconds):
the lean entry built by compiling equals the one converted from the dense stock checkpoint byte for
byte, its record's dense SHA-256s are the stock checkpoint's, and the fast runtime gathered from it
writes the stock forward's greedy tokens, token for token (and the walker's own reference). Damage,
an interrupted build and a full disk: refused or rebuilt with a clear message, never run. The slow
test does the same on the test-shape machine itself.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import namedtuple
from pathlib import Path

import pytest
import torch

from qwengpu.compiler import Circuit
from qwengpu.machine.circuit import MachineShape
from qwengpu.model import machine_checkpoint as C
from qwengpu.model import machine_sparse as S
from qwengpu.runtime import cached

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "compiler"))
from circuit_helpers import small_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHAPE = MachineShape()
MASK = 0xFFFF


def _tiny_circuit() -> Circuit:
    """Token t writes m[t mod 16] := t and emits t + m[(t >> 4) mod 16] + 1 (16-bit tokens: the
    machine's vocabulary), so the DeltaNet memory and the carry chain both matter."""
    c = Circuit("tiny_machine")
    t = c.input("tok", 16)
    m = c.memory("m", rows=16, width=16)
    m.write(t[:4], t)
    c.output("out", t + m.read(t[4:8]) + 1)
    return c


def _reference(start: int, n: int) -> list[int]:
    """The tiny circuit's greedy tokens from ``start``, in plain Python."""
    m, t, out = [0] * 16, start, []
    for _ in range(n):
        m[t & 15] = t
        t = (t + m[(t >> 4) & 15] + 1) & MASK
        out.append(t)
    return out


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The machine's cache on the tiny circuit, in ``tmp_path``: (config, cache root)."""
    from qwengpu.machine import circuit

    # the checkpoint module imports these when it compiles (it stays light for `machine cache`)
    monkeypatch.setattr(circuit, "build_machine", lambda shape: _tiny_circuit())
    monkeypatch.setattr(circuit, "mlp_reserve", lambda shape: 0)
    monkeypatch.setattr(C, "compiler_version", lambda config=None, shape=None: "v-tiny")
    monkeypatch.setenv("QWENGPU_CACHE", str(tmp_path))
    monkeypatch.setattr(cached, "_FAST_CACHE", {})
    return small_config(256, 1024, linear_num_key_heads=16, linear_num_value_heads=16,
                        linear_key_head_dim=64, linear_value_head_dim=64), tmp_path / "machine"


def _load_fast(entry: Path):
    from qwengpu.runtime.lean import fast_from_lean

    return fast_from_lean(entry, S.read_record(entry, "v-tiny"))


def _stock_greedy(path: Path, start: int, n: int) -> list[int]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path).eval()  # stock: no qwengpu code
    ids = torch.tensor([[start]])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False)
    return out[0, 1:].tolist()


def test_lean_entry_equals_the_stock_checkpoint_token_for_token(tiny) -> None:
    cfg, root = tiny
    compiled = S.build_entry(cfg, SHAPE)  # no dense entry: compiled, layer by layer
    rec_a = S.read_record(compiled, "v-tiny")
    assert rec_a["origin"] == "compiled" and rec_a["storage"] == "sparse"
    parts_a = (compiled / S.MACHINE_DIR / S.MACHINE_FILE).read_bytes()
    shutil.rmtree(compiled)
    dense = C.stream_checkpoint(root / "v-tiny", cfg, SHAPE)  # the stock checkpoint (dense entry)
    converted = S.build_entry(cfg, SHAPE)  # now made from the dense entry, checked first
    rec_b = S.read_record(converted, "v-tiny")
    assert rec_b["origin"] == "dense entry"
    assert (converted / S.MACHINE_DIR / S.MACHINE_FILE).read_bytes() == parts_a
    assert rec_a["machine"] == rec_b["machine"] and rec_a["machine_stored"] == rec_b["machine_stored"]
    assert S.records_match_dense(converted, dense) == []  # decodes to the stock checkpoint's bytes
    assert rec_b["machine_bytes"] < rec_b["machine_dense_bytes"] / 4
    fast = _load_fast(converted)
    for start in (0x1234, 0xFFFE):
        want = _reference(start, 40)
        assert _stock_greedy(dense, start, 40) == want
        fast.reset()
        assert fast.generate([start], 40) == want


def test_a_damaged_entry_is_refused_by_tensor_then_rebuilt(tiny, capsys) -> None:
    from qwengpu.model.lean import LeanError

    cfg, root = tiny
    entry = S.build_entry(cfg, SHAPE)
    parts = entry / S.MACHINE_DIR / S.MACHINE_FILE
    data = bytearray(parts.read_bytes())
    data[-3] ^= 0x04  # one bit of the last stored part
    parts.write_bytes(bytes(data))
    with pytest.raises(LeanError, match="is damaged: its SHA-256 differs"):
        _load_fast(entry)  # the negative control: the damaged bytes are never gathered
    fast = cached.machine_fast(cfg, SHAPE)
    err = capsys.readouterr().err
    assert "warning: machine cache entry unusable, rebuilding" in err and "is damaged" in err
    assert fast.generate([7], 20) == _reference(7, 20)
    assert parts.read_bytes() != bytes(data)  # rebuilt whole
    (entry / C.MACHINE_SIDECAR).write_text("{not json")  # a broken record: rebuilt too
    cached._FAST_CACHE.clear()
    assert cached.machine_fast(cfg, SHAPE).generate([7], 5) == _reference(7, 5)
    assert "unreadable" in capsys.readouterr().err


def test_an_interrupted_build_leaves_nothing(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    import qwengpu.model.lean as L

    cfg, root = tiny

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(L, "_write_sparse_machine", interrupted)
    with pytest.raises(KeyboardInterrupt):
        S.build_entry(cfg, SHAPE)
    assert list(root.iterdir()) == []  # no entry, no temporary folder


def test_not_enough_disk_is_refused_before_the_build(tiny, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from qwengpu.cli import main

    cfg, root = tiny
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(S.shutil, "disk_usage", lambda p: usage(10**12, 10**12 - 10**6, 10**6))
    monkeypatch.setattr(C, "MachineTensors", lambda *a, **kw: pytest.fail("compiled on a full disk"))
    with pytest.raises(S.DiskSpaceError, match="not enough free disk .*QWENGPU_CACHE moves"):
        S.build_entry(cfg, SHAPE)
    monkeypatch.setenv("QWENGPU_MACHINE_SHAPE", "test")
    assert main(["run", str(ROOT / "kernels" / "dot.cu"), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: not enough free disk in ") and "Traceback" not in err
    assert not any(p.name.endswith(S.SUFFIX) for p in root.iterdir())


def test_machine_build_checks_the_disk_before_compiling(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                         capsys) -> None:
    from qwengpu.cli import main

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(C.shutil, "disk_usage", lambda p: usage(10**12, 10**12 - 10**6, 10**6))
    monkeypatch.setattr(C, "MachineTensors", lambda *a, **kw: pytest.fail("compiled on a full disk"))
    assert main(["machine", "build", "--out", str(tmp_path / "m"), "-q", "--shape", "test"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: not enough free disk in ") and "the machine checkpoint" in err
    assert list(tmp_path.iterdir()) == []


def test_cache_lists_the_lean_entry_and_prunes_by_version(tiny) -> None:
    cfg, root = tiny
    S.build_entry(cfg, SHAPE)
    rows = C.cache_entries()
    assert [(r["version"], r["storage"]) for r in rows] == [("v-tiny.sparse", "sparse")]
    for i, name in enumerate(["a", "a.sparse", "b", "c.sparse", "d"]):  # with v-tiny: five versions
        (root / name).mkdir()
        (root / name / C.MACHINE_SIDECAR).write_text(json.dumps({"format": C.MACHINE_FORMAT}))
        os.utime(root / name / C.MACHINE_SIDECAR, (1000 + i, 1000 + i))
    removed = C.prune(keep=4, protect="v-tiny")
    assert sorted(p.name for p in removed) == ["a", "a.sparse"]  # the least recently used version, whole
    assert sorted(p.name for p in root.iterdir()) == ["b", "c.sparse", "d", "v-tiny.sparse"]


@pytest.mark.slow
def test_test_shape_machine_from_the_lean_entry_equals_the_stock_forward() -> None:
    """The test-shape machine: the lean entry converted from the dense stock checkpoint (the
    session's cache) writes run_trace_fast's trace on the stock model (proven equal to the stock
    forward by test_fast_runtime.py), and its first tokens are the stock forward's own."""
    from qwengpu.machine import protocol as P
    from qwengpu.runtime import run_trace_fast
    from qwengpu.runtime.engine import generate, machine_config, machine_model, prepare
    from qwengpu.runtime.lean import fast_from_lean

    cfg = machine_config("test")
    _, stock = machine_model(cfg)
    entry, rec = S.entry_or_build(cfg)
    dense = C.cache_root() / C.compiler_version(cfg)
    assert S.records_match_dense(entry, dense) == []
    fast = fast_from_lean(entry, rec)
    for name in ("vadd", "intops"):
        prompt = prepare(ROOT / "tests" / "machine_weights" / "kernels" / f"{name}.cu")[2]
        want = run_trace_fast(stock, prompt, 20000, fresh=True)
        assert want[-1] == P.ctl(P.HALT)
        assert fast.generate(prompt, 20000, stop=P.ctl(P.HALT)) == want
        assert generate(stock, prompt, 12) == want[:12]
