"""Shared test helpers: compile a CUDA snippet and run it on the interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
