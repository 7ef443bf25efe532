"""The Python API: one launch from NumPy arrays, without writing a spec file by hand.

Light at import time (NumPy and the spec module only); the engines load inside the calls, so
``import qwengpu`` works without torch. A launch goes through :func:`qwengpu.runner.run_kernel`
exactly as ``qwengpu run`` does: the API writes the source and an exact spec (floats as raw bits)
to a temporary folder and reads the outputs back, so the CLI and the API cannot disagree.

Example (the interpreter; ``engine="machine"`` is the default, as on the CLI)::

    >>> import numpy as np, qwengpu
    >>> src = '''__global__ void axpy(float a, const float* x, float* y) {
    ...     int i = threadIdx.x; y[i] = a * x[i] + y[i]; }'''
    >>> r = qwengpu.run(src, block=4, engine="interp",
    ...                 args={"a": 2.0, "x": np.arange(4, dtype=np.float32), "y": np.ones(4, np.float32)})
    >>> r.outputs["y"].tolist()
    [1.0, 3.0, 5.0, 7.0]
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qwengpu.errors import LaunchSpecError, QwenGPUError
from qwengpu.spec import c_signature

DEFAULT_MAX_STEPS = 50_000_000  # replaced below by the interpreter's own default when it imports cleanly
try:  # the interpreter is torch-free; keep the CLI's default in one place
    from qwengpu.simt.interp import DEFAULT_MAX_STEPS
except ImportError:  # pragma: no cover
    pass

# NumPy dtype -> spec element type
DTYPE_ELEM: dict[np.dtype, str] = {
    np.dtype(np.int8): "i8", np.dtype(np.uint8): "u8", np.dtype(np.int16): "i16", np.dtype(np.uint16): "u16",
    np.dtype(np.int32): "i32", np.dtype(np.uint32): "u32", np.dtype(np.int64): "i64",
    np.dtype(np.uint64): "u64", np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
}  # fmt: skip
Dim = int | tuple[int, ...]


@dataclass
class Result:
    """A launch's outputs (name -> NumPy array of the argument's dtype), its stats and engine."""

    kernel: str
    engine: str
    outputs: dict[str, np.ndarray]
    stats: dict[str, Any]
    mismatches: list[str]

    @property
    def passed(self) -> bool:
        """No mismatch against the spec's ``expected`` values (True when there were none to check)."""
        return not self.mismatches


def _source_text(source: str | Path) -> str:
    """CUDA text, or the text of a ``.cu`` file when ``source`` names one."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and "{" not in source
                                    and source.strip().endswith(".cu")):
        p = Path(source)
        if not p.is_file():
            raise QwenGPUError(f"no such CUDA file: {p}")
        return p.read_text()
    if not isinstance(source, str) or "__global__" not in source:
        raise QwenGPUError("source must be CUDA text with a __global__ kernel, or the path of a .cu file")
    return source


def _kernels(text: str) -> list[str]:
    return re.findall(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)\s*\(", text)


def _bits_list(arr: np.ndarray, elem: str) -> list:
    """Exact JSON values: floats as raw bits (``"0x..."``), integers as ints."""
    if elem == "f32":
        return [f"0x{int(b):08x}" for b in arr.astype(np.float32).view(np.uint32).ravel()]
    if elem == "f64":
        return [f"0x{int(b):016x}" for b in arr.astype(np.float64).view(np.uint64).ravel()]
    return [int(v) for v in arr.ravel()]


def build_spec(
    text: str,
    *,
    kernel: str | None,
    grid: Dim,
    block: Dim,
    args: Mapping[str, Any],
    outputs: list[str] | None,
    shared_bytes: int = 0,
) -> dict[str, Any]:
    """A spec object (as ``NAME.json`` holds it) from NumPy arguments, checked against the C signature.

    Pointer arguments are arrays (their dtype is the element type); scalars take the parameter's C type
    when the signature names it, else the NumPy scalar's dtype."""
    names = _kernels(text)
    if kernel is None:
        if len(names) != 1:
            raise QwenGPUError(f"the source has {len(names)} kernels ({', '.join(names) or 'none'}): "
                               "pass kernel=NAME")
        kernel = names[0]
    elif kernel not in names:
        raise QwenGPUError(f"no kernel {kernel!r} in the source (kernels: {', '.join(names) or 'none'})")
    sig = c_signature(text, kernel)
    if sig is None:
        raise QwenGPUError(f"cannot read the parameters of {kernel!r} from the source")
    if not isinstance(args, Mapping):
        raise LaunchSpecError("args must be a dict of parameter name -> NumPy array or scalar")
    params = [p[0] for p in sig]
    unknown = [k for k in args if k not in params]
    if unknown:
        raise LaunchSpecError(f"unknown argument(s) {unknown} for {kernel}({', '.join(params)})")
    missing = [p for p in params if p not in args]
    if missing:
        raise LaunchSpecError(f"missing argument(s) {missing} for {kernel}({', '.join(params)})")
    spec_args: list[dict[str, Any]] = []
    for name, celem, is_ptr in sig:
        v = args[name]
        if is_ptr:
            if not isinstance(v, np.ndarray):
                raise LaunchSpecError(f"argument {name!r} is a pointer: pass a NumPy array "
                                      f"(got {type(v).__name__})")
            elem = DTYPE_ELEM.get(v.dtype)
            if elem is None:
                raise LaunchSpecError(f"argument {name!r}: unsupported dtype {v.dtype} "
                                      f"(use one of {', '.join(str(d) for d in DTYPE_ELEM)})")
            if celem is not None and celem != elem:
                raise LaunchSpecError(f"argument {name!r}: the kernel takes {celem}* but the array is "
                                      f"{v.dtype}")
            spec_args.append({"name": name, "type": elem + "*", "data": _bits_list(v, elem)})
            continue
        if isinstance(v, np.ndarray) and v.ndim > 0:
            raise LaunchSpecError(f"argument {name!r} is passed by value: pass a scalar, not an array")
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.generic, np.ndarray)):
            raise LaunchSpecError(f"argument {name!r}: expected a number (got {type(v).__name__})")
        if isinstance(v, (np.generic, np.ndarray)):
            elem = DTYPE_ELEM.get(np.asarray(v).dtype)
            if elem is None:
                raise LaunchSpecError(f"argument {name!r}: unsupported dtype {np.asarray(v).dtype}")
            if celem is not None and celem != elem:
                raise LaunchSpecError(f"argument {name!r}: the kernel takes {celem} but the value is "
                                      f"{np.asarray(v).dtype}")
        else:
            elem = celem or ("f32" if isinstance(v, float) else "i32")
            if elem[0] in "iu" and isinstance(v, float):
                raise LaunchSpecError(f"argument {name!r}: the kernel takes {elem} but got a float ({v!r})")
        dt = {k: d for d, k in DTYPE_ELEM.items()}[elem]
        if elem[0] in "iu":
            info = np.iinfo(dt)
            if not info.min <= int(v) <= info.max:
                raise LaunchSpecError(f"argument {name!r}: {int(v)} does not fit {elem}")
        value = _bits_list(np.array([v], dtype=dt), elem)[0]
        spec_args.append({"name": name, "type": elem, "value": value})
    spec: dict[str, Any] = {"kernel": kernel, "grid": _dim(grid), "block": _dim(block), "args": spec_args}
    if outputs is not None:
        spec["outputs"] = list(outputs)
    if shared_bytes:
        spec["shared_bytes"] = int(shared_bytes)
    return spec


def _dim(d: Dim) -> int | list[int]:
    return int(d) if isinstance(d, (int, np.integer)) else [int(x) for x in d]


def _launch(text: str, spec: dict[str, Any], run_kwargs: dict[str, Any], mount=None) -> Result:
    """Write source + spec to a temporary folder and launch through the runner (or a loaded mount)."""
    from qwengpu.runner import run_kernel
    from qwengpu.spec import compare, load_spec

    with tempfile.TemporaryDirectory(prefix="qwengpu-api-") as tmp:
        cu = Path(tmp) / f"{spec['kernel']}.cu"
        sp = cu.with_suffix(".json")
        cu.write_text(text)
        sp.write_text(json.dumps(spec))
        if mount is None:
            r = run_kernel(cu, sp, **run_kwargs)
            return Result(r.kernel, r.engine, dict(r.outputs), dict(r.stats), list(r.mismatches))
        run_kernel(cu, sp, engine="interp")  # validates the spec against the kernel, as the runner does
        ls = load_spec(sp)
        out = mount.launch(cu, sp, max_tokens=run_kwargs.get("max_tokens", 2_000_000),
                           interpret=lambda: run_kernel(cu, sp))
        return Result(ls.kernel, "model", dict(out.outputs), dict(out.stats), compare(ls, out.outputs))


def run(
    source: str | Path,
    *,
    kernel: str | None = None,
    grid: Dim = 1,
    block: Dim = 1,
    args: Mapping[str, Any] | None = None,
    outputs: list[str] | None = None,
    engine: str = "machine",
    shape: str | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    shared_bytes: int = 0,
    model: str | Path | None = None,
    runtime: str = "fast",
) -> Result:
    """Launch ``kernel`` of ``source`` (CUDA text or a ``.cu`` path) on ``engine`` with NumPy ``args``.

    ``engine``: ``"machine"`` (the default, as ``qwengpu run``), ``"interp"`` or ``"model"`` (needs
    ``model``, a mount folder). ``shape``: the machine's layer shape, ``"2b"`` (Qwen3.5-2B's, as every
    mount) or ``"test"`` (small, for fast tests); None: ``$QWENGPU_MACHINE_SHAPE``, else ``"2b"``.
    ``outputs`` defaults to every pointer argument. Bad input raises a
    :class:`qwengpu.errors.QwenGPUError` subclass.

    >>> import numpy as np, qwengpu
    >>> r = qwengpu.run("__global__ void k(int* o, int v) { o[threadIdx.x] = v + threadIdx.x; }",
    ...                 block=4, engine="interp", args={"o": np.zeros(4, np.int32), "v": 10})
    >>> r.outputs["o"].tolist()
    [10, 11, 12, 13]
    """
    if not isinstance(max_steps, int) or max_steps <= 0:
        raise QwenGPUError(f"max_steps must be a positive int (got {max_steps!r})")
    text = _source_text(source)
    spec = build_spec(text, kernel=kernel, grid=grid, block=block, args=args or {}, outputs=outputs,
                      shared_bytes=shared_bytes)
    kw: dict[str, Any] = {"engine": engine, "max_steps": max_steps, "runtime": runtime, "shape": shape}
    if model is not None:
        kw["model_dir"] = str(model)
    return _launch(text, spec, kw)


def run_spec(
    cu_path: str | Path,
    spec: str | Path | Mapping[str, Any] | None = None,
    *,
    engine: str = "machine",
    shape: str | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    model: str | Path | None = None,
    runtime: str = "fast",
) -> Result:
    """Launch a ``.cu`` file with a launch spec (a path, a spec dict, or ``None``: ``NAME.json`` beside
    it), as ``qwengpu run FILE.cu --launch SPEC`` does; ``Result.passed`` checks ``expected``;
    ``shape`` as in :func:`run`."""
    from qwengpu.runner import run_kernel

    kw: dict[str, Any] = {"engine": engine, "max_steps": max_steps, "runtime": runtime, "shape": shape}
    if model is not None:
        kw["model_dir"] = str(model)
    if isinstance(spec, Mapping):
        text = _source_text(Path(cu_path))
        return _launch(text, dict(spec), kw)
    r = run_kernel(Path(cu_path), None if spec is None else Path(spec), **kw)
    return Result(r.kernel, r.engine, dict(r.outputs), dict(r.stats), list(r.mismatches))


class Mount:
    """A mounted checkpoint (``qwengpu build``) loaded once: launches, advanced-mode questions, text."""

    def __init__(self, path: Path, device: str, dtype: str, runtime: str) -> None:
        from qwengpu.runtime.mounted import mounted_model

        self.path, self.device, self.dtype = path, device, dtype
        self.model = mounted_model(path, runtime=runtime, device=device, dtype=dtype)

    def run(
        self,
        source: str | Path,
        *,
        kernel: str | None = None,
        grid: Dim = 1,
        block: Dim = 1,
        args: Mapping[str, Any] | None = None,
        outputs: list[str] | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        shared_bytes: int = 0,
    ) -> Result:
        """A launch through the mount (every result from its argmax tokens); see :func:`run`."""
        if not isinstance(max_steps, int) or max_steps <= 0:
            raise QwenGPUError(f"max_steps must be a positive int (got {max_steps!r})")
        text = _source_text(source)
        spec = build_spec(text, kernel=kernel, grid=grid, block=block, args=args or {}, outputs=outputs,
                          shared_bytes=shared_bytes)
        return _launch(text, spec, {"max_tokens": min(40 * max_steps, 2_000_000)}, mount=self.model)

    def generate(self, prompt_text: str, max_new_tokens: int = 64) -> str:
        """Greedy text from the mount's base layers (the stock ``generate``); the continuation only."""
        from transformers import AutoTokenizer

        from qwengpu.runtime.mounted_text import load_mount_text

        tok = AutoTokenizer.from_pretrained(str(self.path))
        mt = load_mount_text(self.path)
        ids = tok(prompt_text, return_tensors="pt").input_ids
        out = mt.generate(ids, max_new_tokens=max_new_tokens, do_sample=False)
        return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


def load_mount(path: str | Path, device: str = "cpu", dtype: str = "float32", runtime: str = "fast") -> Mount:
    """Load a mount folder that ``qwengpu build`` wrote; a :class:`QwenGPUError` for anything else."""
    p = Path(path)
    if not (p / "qwengpu_mount.json").is_file():
        raise QwenGPUError(f"{path}: not a mounted checkpoint (no qwengpu_mount.json)")
    return Mount(p, device, dtype, runtime)


def _ask(self: Mount, question: str, *, engine: str = "model", retries: int = 2, max_new_tokens: int = 1024,
         replies: str | Path | None = None):
    """Advanced mode: the mount answers ``question``, writing CUDA that runs inside itself (as
    ``qwengpu ask QUESTION --model DIR --json``, same defaults); ``replies``: a replies file that is
    teacher-forced instead of generated (tests, demos). Returns the session's ``Turn``
    (``.as_json()``: the reply, each launch and its outputs)."""
    from qwengpu.cli import build_parser
    from qwengpu.host.commands import _ask_replies, _check_args, _launcher, _load_model, _replier
    from qwengpu.host.session import Events, Session

    if not question.strip():
        raise QwenGPUError("the question is empty")
    argv = ["ask", question, "--model", str(self.path), "--engine", engine, "--json",
            "--retries", str(retries),
            "--max-new-tokens", str(max_new_tokens)]
    if replies is not None:
        argv += ["--replies", str(replies)]
    a = build_parser().parse_args(argv)
    _check_args(a)
    model, tok = _load_model(a)
    sess = Session(_replier(a, model, tok, _ask_replies(a.replies, "gpu")), _launcher(a), retries=retries,
                   events=Events())
    return sess.ask(question)


Mount.ask = _ask  # type: ignore[attr-defined]
