"""Helpers for the front-end tests: compile CUDA with the options users pass, run it on the
interpreter, and return the outputs (expected values always come from the kernel's meaning)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from qwengpu.cuda import compile_cuda
from qwengpu.ptx.parser import parse_ptx
from qwengpu.simt.interp import Interpreter, _find_kernel
from qwengpu.spec import bind, parse_spec, read_outputs


def run_ptx(ptx: str, spec: dict, *, source_name: str = "k.cu") -> dict[str, np.ndarray]:
    """Parse PTX and launch it on the reference interpreter with a launch-spec dict."""
    s = parse_spec(spec)
    module = parse_ptx(ptx, source_name=source_name)
    it = Interpreter(module, _find_kernel(module, s.kernel).name)
    b = bind(s, it.fn)
    it.launch(s.grid, s.block, b.param_bytes, b.gmem, dynamic_shared=s.shared_bytes)
    return read_outputs(s, b.gmem)


@pytest.fixture
def compile_run() -> Callable[..., dict[str, np.ndarray]]:
    """``compile_run(src, spec, options=(...), arch=...)``: NVRTC with those options, then the interpreter."""

    def _run(
        src: str,
        spec: dict,
        *,
        options: tuple[str, ...] = ("--generate-line-info",),
        arch: str = "compute_75",
        filename: str = "k.cu",
    ) -> dict[str, np.ndarray]:
        ptx = compile_cuda(src, filename=filename, arch=arch, options=options)
        return run_ptx(ptx, spec, source_name=filename)

    return _run
