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

# The default run takes two workers (pytest-xdist, ``-n 2`` in pyproject.toml: CI's two cores). Each
# worker and every process it starts computes on ONE thread: two torch processes of two threads
# each on two cores slow each other ~10x. Set before torch is imported anywhere in the worker.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if XDIST_WORKER:
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

# tests that share the session's small mount (a ~100 s build, 5.5 GB on disk) run in one worker, so it
# is built once; every other test file runs whole in one worker (its module fixtures load once)
MOUNT_FIXTURES = frozenset({"small_base", "small_mount", "mounted_fast", "mount_text", "standalone_vadd"})


def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        shares_mount = MOUNT_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        group = "mount" if shares_mount else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))


def _shared_cache(tmp_path_factory) -> Path | None:
    """The machine cache every worker of this run shares (beside the workers' own temporary
    folders; the first worker that needs the machine builds it, ``entry_lock``): None without
    workers."""
    if not XDIST_WORKER:
        return None
    return tmp_path_factory.getbasetemp().parent / "qwengpu-cache"


def pytest_sessionfinish(session, exitstatus):
    """The controller of a run with workers removes their shared machine cache (several GB)."""
    import shutil

    factory = getattr(session.config, "_tmp_path_factory", None)
    if XDIST_WORKER or factory is None or not getattr(session.config.option, "numprocesses", None):
        return
    shutil.rmtree(factory.getbasetemp() / "qwengpu-cache", ignore_errors=True)


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
    shared = _shared_cache(tmp_path_factory)
    path = tmp_path_factory.mktemp("qwengpu-cache") if shared is None else shared
    path.mkdir(parents=True, exist_ok=True)
    os.environ["QWENGPU_CACHE"] = str(path)
    try:
        yield
    finally:
        os.environ.pop("QWENGPU_CACHE", None)
        if shared is None:  # the workers' shared cache: the controller removes it at the end
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
