"""``verify`` and ``build`` trust nothing: negative controls (issue 24, part 4).

* a damaged machine cache entry (one byte flipped in a private copy) is refused by ``build`` and by
  ``verify``, by tensor name, with the remedy, before anything is built or recomputed from it;
* damage the build's record cannot see (the tensor's recorded sha256 rewritten to match) is found
  by the recompute path: a compiled (machine) tensor, a base row of the embedding and of the head
  beyond the flag dim (with ``--base``: every row and dim compared; without: every dim above the
  base's);
* non-finite values in a base-side tensor are reported, placed in the machine or the base dims.

The shared hidden-128 mount (``tests/conftest.py``) is copied by symlinks; only the shards that are
damaged are copied. The shared machine cache is never written to: the damaged entry is a private
copy under its own ``QWENGPU_CACHE``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _header(path: Path) -> tuple[int, dict]:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return 8 + n, json.loads(f.read(n))


def _write_f32(path: Path, tensor: str, flat_index: int, value: float) -> None:
    start, header = _header(path)
    lo = header[tensor]["data_offsets"][0]
    with open(path, "r+b") as f:
        f.seek(start + lo + 4 * flat_index)
        f.write(struct.pack("<f", value))


def _tensor_sha(path: Path, tensor: str) -> str:
    start, header = _header(path)
    lo, hi = header[tensor]["data_offsets"]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(start + lo)
        left = hi - lo
        while left:
            b = f.read(min(left, 1 << 26))
            h.update(b)
            left -= len(b)
    return h.hexdigest()


def _copy_mount(src: Path, dst: Path, damaged: list[str]) -> Path:
    """Symlinks to ``src``'s files, except real copies of the sidecar and of the shards holding the
    ``damaged`` tensors (written to afterwards)."""
    dst.mkdir(parents=True)
    wmap = json.loads((src / "model.safetensors.index.json").read_text())["weight_map"]
    real = {wmap[t] for t in damaged} | {"qwengpu_mount.json"}
    for p in src.iterdir():
        if p.name in real:
            shutil.copyfile(p, dst / p.name)
        else:
            os.symlink(p, dst / p.name)
    return dst


# ---------------------------------------------------------------------------------------------
# a mount damaged where its build record cannot see it (the record rewritten to match)
# ---------------------------------------------------------------------------------------------
MACHINE_T = "model.layers.3.mlp.down_proj.weight"  # compiled (machine side)
EMB = "model.embed_tokens.weight"
HEAD = "lm_head.weight"


@pytest.fixture(scope="module")
def fooled(small_mount, tmp_path_factory):
    """The mount with: a compiled tensor's value changed, an embedding base row and a head base row
    changed in a dim beyond the flag dim, and the record's sha256s rewritten to the damaged bytes
    (so only a recompute can tell); plus where the damage is."""
    rec = json.loads((small_mount / "qwengpu_mount.json").read_text())
    H, Hp, flag = rec["hidden"], rec["mounted_hidden"], rec["dims"]["flag"]
    assert flag + 1 < Hp, "the small mount has zero dims beyond the flag dim"
    dst = _copy_mount(small_mount, tmp_path_factory.mktemp("fooled") / "m", [MACHINE_T, EMB, HEAD])
    wmap = json.loads((dst / "model.safetensors.index.json").read_text())["weight_map"]
    row = 7  # a base token's row (below the token offset)
    where = {EMB: row * Hp + flag + 1, HEAD: row * Hp + Hp - 1}
    for name, at in where.items():
        _write_f32(dst / wmap[name], name, at, 0.5)
    shard = dst / wmap[MACHINE_T]
    start, header = _header(shard)
    lo, hi = header[MACHINE_T]["data_offsets"]
    with open(shard, "rb") as f:
        f.seek(start + lo)
        vals = torch.frombuffer(bytearray(f.read(hi - lo)), dtype=torch.float32)
    at = int(torch.nonzero(vals).flatten()[0])
    _write_f32(shard, MACHINE_T, at, float(vals[at]) * 2.0)
    for name in (MACHINE_T, EMB, HEAD):
        rec["tensors"][name] = _tensor_sha(dst / wmap[name], name)
    (dst / "qwengpu_mount.json").write_text(json.dumps(rec))
    yield dst, row, H, flag
    shutil.rmtree(dst.parent, ignore_errors=True)


def test_the_record_alone_is_fooled(fooled):
    """The control's premise: ``--quick`` (stored bytes against the record) sees nothing."""
    from qwengpu.model.verify import verify_mount

    rep = verify_mount(fooled[0], recompute=False, only={MACHINE_T, EMB, HEAD})
    assert rep["ok"] and rep["tensors_hashed"] == 3, rep["problems"]


def test_recompute_finds_what_the_record_hides(fooled):
    """Without the base: the compiled tensor recomputed from the machine, and the base rows of the
    embedding and head checked in every dim above the base's (the flag dim and beyond)."""
    from qwengpu.model.verify import verify_mount

    bad, row, _, _ = fooled
    rep = verify_mount(bad, only={MACHINE_T, EMB, HEAD})
    assert not rep["ok"]
    probs = rep["problems"]
    assert any(MACHINE_T in p and "differs from the recomputed transform" in p for p in probs), probs
    assert any(p.startswith(f"tensor {EMB}: base row {row} ") for p in probs), probs
    assert any(p.startswith(f"tensor {HEAD}: base row {row} ") for p in probs), probs
    assert len(probs) == 3, probs


@pytest.mark.slow  # 10 s; the recomputation that finds what the record hides stays in the default run
def test_with_base_every_row_and_dim_is_compared(fooled, small_base):
    """With ``--base``: the embedding and head recomputed whole from the base (base rows included,
    every dim), so a value beyond the flag dim in a base row is named."""
    from qwengpu.model.verify import verify_mount

    rep = verify_mount(fooled[0], small_base, only={EMB, HEAD})
    assert not rep["ok"]
    assert sorted(p.split(" ")[1] for p in rep["problems"]) == sorted([EMB, HEAD]), rep["problems"]
    assert all("differs from the recomputed transform" in p for p in rep["problems"]), rep["problems"]


@pytest.mark.slow  # ~60 s: every compiled tensor recomputed
def test_cli_verify_fails_on_the_recompute_path(fooled, capsys):
    """The whole recompute (no ``only``), through the command: exit 9, the tensors named."""
    from qwengpu.cli import main

    code = main(["verify", "--model", str(fooled[0])])
    out = capsys.readouterr().out
    assert code == 9 and "FAILED (3 problems)" in out and MACHINE_T in out and EMB in out and HEAD in out


# ---------------------------------------------------------------------------------------------
# non-finite values in base-side tensors
# ---------------------------------------------------------------------------------------------
def test_nonfinite_in_base_side_tensors_is_reported(small_mount, tmp_path):
    """inf in a machine dim of a base layer's reading projection (text breaks: 0 * inf), NaN in a
    base dim of another (launches break): both named, placed, even when the record matches."""
    from qwengpu.model.verify import verify_mount

    rec = json.loads((small_mount / "qwengpu_mount.json").read_text())
    H, Hp, lb = rec["hidden"], rec["mounted_hidden"], rec["layers"]["base"][0]
    up, gate = f"model.layers.{lb}.mlp.up_proj.weight", f"model.layers.{lb}.mlp.gate_proj.weight"
    dst = _copy_mount(small_mount, tmp_path / "m", [up, gate])
    wmap = json.loads((dst / "model.safetensors.index.json").read_text())["weight_map"]
    _write_f32(dst / wmap[up], up, 3 * Hp + H + 5, float("inf"))  # row 3, a machine dim
    _write_f32(dst / wmap[gate], gate, 2 * Hp + 1, float("nan"))  # row 2, base dim 1
    for name in (up, gate):
        rec["tensors"][name] = _tensor_sha(dst / wmap[name], name)
    (dst / "qwengpu_mount.json").write_text(json.dumps(rec))
    rep = verify_mount(dst, recompute=False, only={up, gate, "model.nope.weight"})
    assert not rep["ok"]
    assert rep["problems"] == [
        "tensor model.nope.weight is not in the checkpoint (--tensor)",
        f"tensor {gate} (base): 1 non-finite values in the base dims 0..{H - 1} (a launch passes zeros "
        "through them: 0 * inf is NaN)",
        f"tensor {up} (base): 1 non-finite values in the machine dims {H}..{Hp - 1} (the stock forward "
        "multiplies them by zeros: 0 * inf is NaN)",
    ]


def test_nonfinite_in_dims():
    from qwengpu.model.finite import hidden_axis, nonfinite_in_dims

    t = torch.zeros(4, 10)
    t[1, 7] = float("inf")
    t[2, 8] = float("nan")
    t[3, 2] = float("-inf")
    assert nonfinite_in_dims(t, slice(6, None), 1) == 2
    assert nonfinite_in_dims(t, slice(0, 6), 1) == 1
    assert nonfinite_in_dims(t, [7], 1) == 1 and nonfinite_in_dims(t, torch.tensor([8, 9]), 1) == 1
    assert nonfinite_in_dims(t, [], 1) == 0
    assert nonfinite_in_dims(t, slice(6, None), 1, rows=slice(0, 2)) == 1
    assert nonfinite_in_dims(t, slice(0, 2), 0) == 1  # rows 0..1 (a writing projection's hidden rows)
    assert nonfinite_in_dims(t.to(torch.bfloat16), slice(6, None), 1) == 2
    assert nonfinite_in_dims(torch.zeros(3, dtype=torch.int32), slice(None), 0) == 0
    assert hidden_axis("model.layers.40.mlp.gate_proj.weight", 2) == 1
    assert hidden_axis("model.layers.40.linear_attn.out_proj.weight", 2) == 0
    assert hidden_axis("model.language_model.layers.3.self_attn.q_proj.weight", 2) == 1
    assert hidden_axis("model.layers.3.input_layernorm.weight", 1) == 0
    assert hidden_axis("model.norm.weight", 1) == 0 and hidden_axis("lm_head.weight", 2) == 1
    assert hidden_axis("model.layers.3.self_attn.q_norm.weight", 1) is None
    assert hidden_axis("model.layers.3.linear_attn.conv1d.weight", 3) is None


# ---------------------------------------------------------------------------------------------
# a damaged machine cache entry: refused by build and verify, never used
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def damaged_cache(tmp_path, monkeypatch):
    """A private copy of the machine cache entry (the weights file copied, one byte of its first
    tensor flipped) under its own ``QWENGPU_CACHE``; the shared cache is only read."""
    from qwengpu.model.machine_checkpoint import cache_root, check_entry, compiler_version

    src = cache_root() / compiler_version()
    check_entry(src)  # checks it (and fills in an older entry's per-tensor record)
    root = tmp_path / "cache"
    dst = root / "machine" / src.name
    dst.mkdir(parents=True)
    for p in src.iterdir():
        if p.is_file():
            shutil.copyfile(p, dst / p.name)
    weights = dst / "model.safetensors"
    start, header = _header(weights)
    first = min((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
    lo, hi = header[first]["data_offsets"]
    with open(weights, "r+b") as f:
        f.seek(start + (lo + hi) // 2)
        b = f.read(1)
        f.seek(start + (lo + hi) // 2)
        f.write(bytes([b[0] ^ 0x01]))
    monkeypatch.setenv("QWENGPU_CACHE", str(root))
    try:
        yield dst, first
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_damaged_machine_cache_is_refused_by_build_and_verify(damaged_cache, small_base, small_mount,
                                                            tmp_path, capsys):
    from qwengpu.cli import main

    entry, tensor = damaged_cache
    size = (entry / "model.safetensors").stat().st_size
    out = tmp_path / "out"
    code = main(["build", "--base", str(small_base), "--out", str(out)])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert f"tensor {tensor} differs from its recorded SHA-256" in err, err
    assert "qwengpu machine cache --clear" in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if ".build-" in p.name]
    assert (entry / "model.safetensors").stat().st_size == size  # refused, not silently rebuilt

    code = main(["verify", "--model", str(small_mount), "--tensor", "model.norm.weight"])
    cap = capsys.readouterr()
    assert code == 9 and "Traceback" not in cap.err
    assert f"tensor {tensor} differs from its recorded SHA-256" in cap.out, cap.out
    assert "qwengpu machine cache --clear" in cap.out
