"""Shared test helpers: compile a CUDA snippet and run it on the interpreter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The suite runs the small test-shape machine (qwengpu.shapes): the default, Qwen3.5-2B-shaped one is
# a ~9 GB build that CI must not make. Set for the whole process and inherited by every subprocess
# (CLI and README tests); tests of the default itself clear it (tests/test_default_machine.py).
os.environ["QWENGPU_MACHINE_SHAPE"] = "test"


@pytest.fixture
def run_cuda(tmp_path):
    """Write NAME.cu + NAME.json into a temp dir and run it through the runner; returns RunResult."""
    from qwengpu.runner import run_kernel

    def _run(source: str, spec: dict, **kw):
        cu = tmp_path / f"{spec['kernel']}.cu"
        cu.write_text(source)
        js = tmp_path / f"{spec['kernel']}.json"
        js.write_text(json.dumps(spec))
        return run_kernel(cu, js, **kw)

    return _run


def _home_cache_has_current_machine() -> bool:
    """True when ``~/.cache/qwengpu`` already holds the machine of the current compiler version
    (a developer machine): the tests then only load it, instead of building a private copy (a
    minute of CPU and several GB per session). CI starts without one and builds in a temp dir."""
    try:
        from qwengpu.model.machine_checkpoint import cache_root, compiler_version

        return (cache_root() / compiler_version() / "config.json").is_file()
    except Exception:  # noqa: BLE001 - no torch/transformers: no cache to reuse
        return False


@pytest.fixture(scope="session", autouse=True)
def _machine_cache(tmp_path_factory):
    """Keep the compiled machine's on-disk cache (several GB) inside this test session, never in
    the user's home, unless QWENGPU_CACHE is set explicitly; removed at the end of the session."""
    import os
    import shutil

    if os.environ.get("QWENGPU_CACHE"):
        yield
        return
    if _home_cache_has_current_machine():  # a developer's cache already holds this version: read it
        yield
        return
    path = tmp_path_factory.mktemp("qwengpu-cache")
    os.environ["QWENGPU_CACHE"] = str(path)
    try:
        yield
    finally:
        os.environ.pop("QWENGPU_CACHE", None)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def flipped_weight():
    """A context manager: flip the sign of the first used MLP gate weight of ``layer`` of a stock
    model, restore it on exit (the negative control of the machine tests)."""
    from contextlib import contextmanager

    import torch

    @contextmanager
    def flip(model, layer: int = 12):
        w = model.model.layers[layer].mlp.gate_proj.weight
        r, col = (w != 0).nonzero()[0].tolist()
        old = float(w[r, col])
        try:
            with torch.no_grad():
                w[r, col] = -old
            yield
        finally:
            with torch.no_grad():
                w[r, col] = old

    return flip


# ---------------------------------------------------------------------------------------------
# a small synthetic Qwen3.5 base and its mount: built once per session, shared by tests/model and
# tests/host (the mount holds the whole machine: ~5.5 GB on disk, about two minutes to write)
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def small_base(tmp_path_factory) -> Path:
    """A text-only Qwen3.5 base (bf16 on disk, tied, sharded) on the machine's test layer shape,
    hidden 128: the default mounted width is then 2048 = 16 H (c = 4, a power of two)."""
    from qwengpu.model.synthetic import make_synthetic_base

    out = tmp_path_factory.mktemp("bases") / "base128"
    return make_synthetic_base(out, hidden=128, vocab=1024, layers=2, dtype="bfloat16", tied=True)


@pytest.fixture(scope="session")
def small_mount(small_base, tmp_path_factory) -> Path:
    """``qwengpu build`` of :func:`small_base` (default width); removed at the end of the session."""
    import shutil

    import torch

    from qwengpu.model.mount import build_mount

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    out = tmp_path_factory.mktemp("mounts") / "m128"
    build_mount(small_base, out)
    yield out
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="session")
def mounted_fast(small_mount):
    """The mount loaded once with our runtime (load-time checks included)."""
    from qwengpu.runtime.mounted import MountedModel

    return MountedModel.load(small_mount)


@pytest.fixture(scope="session")
def mount_text(small_mount):
    """The mount's text runtime (its base layers, after the load-time checks)."""
    from qwengpu.runtime.mounted_text import load_mount_text

    return load_mount_text(small_mount)
