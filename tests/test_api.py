"""The Python API (:mod:`qwengpu.api`): launches from NumPy arrays, dtype mapping, clear errors for bad
input, spec files, one machine launch bit for bit equal to the interpreter's, and a loaded mount."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import qwengpu
from qwengpu.errors import LaunchSpecError, QwenGPUError

ROOT = Path(__file__).resolve().parent.parent
AXPY = """__global__ void axpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}"""
ADDK = "__global__ void addk(int* o, int k) { o[threadIdx.x] += k * (int)threadIdx.x; }"


def test_import_is_light() -> None:
    """``import qwengpu`` (and reaching the API names) loads neither torch nor the engines."""
    code = "import sys, qwengpu; qwengpu.run; qwengpu.load_mount; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_run_arrays_and_scalars() -> None:
    x = np.arange(8, dtype=np.float32) / 4
    y = np.full(8, 0.5, np.float32)
    r = qwengpu.run(AXPY, grid=2, block=4, engine="interp", args={"n": 6, "a": 3.0, "x": x, "y": y})
    want = y.copy()
    want[:6] = np.float32(3.0) * x[:6] + y[:6]
    assert r.engine == "interp" and r.kernel == "axpy"
    assert r.outputs["y"].dtype == np.float32
    assert r.outputs["y"].view(np.uint32).tolist() == want.view(np.uint32).tolist()
    assert r.stats["warp_instructions"] > 0
    assert y.tolist() == [0.5] * 8  # the caller's array is not written


def test_run_from_file_and_outputs(tmp_path: Path) -> None:
    cu = tmp_path / "addk.cu"
    cu.write_text(ADDK)
    r = qwengpu.run(str(cu), block=4, engine="interp", args={"o": np.array([1, 2, 3, 4], np.int32), "k": -5},
                    outputs=["o"])
    assert r.outputs["o"].tolist() == [1, -3, -7, -11] and list(r.outputs) == ["o"]


@pytest.mark.parametrize(
    "ctype,dtype,vals,k,want",
    [
        ("unsigned int", np.uint32, [0xFFFFFFFF, 1], 1, [0, 2]),
        ("long long", np.int64, [-(2**40), 5], 3, [-(2**40) + 3, 8]),
        ("unsigned long long", np.uint64, [2**63, 0], 1, [2**63 + 1, 1]),
        ("signed char", np.int8, [127, -128], 1, [-128, -127]),
        ("double", np.float64, [0.1, -2.0], 0.25, [0.1 + 0.25, -1.75]),
    ],
)
def test_dtype_mapping(ctype: str, dtype, vals: list, k, want: list) -> None:
    """Each NumPy dtype binds as its element type; the bare Python scalar takes the C parameter's type."""
    src = f"__global__ void inc({ctype}* o, {ctype} k) {{ o[threadIdx.x] = o[threadIdx.x] + k; }}"
    r = qwengpu.run(src, block=2, engine="interp", args={"o": np.array(vals, dtype), "k": k})
    assert r.outputs["o"].dtype == dtype
    assert r.outputs["o"].tolist() == np.array(want, dtype).tolist()


def test_numpy_scalar_and_float_bits() -> None:
    """Floats travel by their bits: a NaN payload and -0.0 come back unchanged."""
    src = "__global__ void cp(const float* a, float* b) { b[threadIdx.x] = a[threadIdx.x]; }"
    a = np.array([0x7FC00001, 0x80000000], np.uint32).view(np.float32)
    r = qwengpu.run(src, block=2, engine="interp", args={"a": a, "b": np.zeros(2, np.float32)})
    assert r.outputs["b"].view(np.uint32).tolist() == [0x7FC00001, 0x80000000]
    r = qwengpu.run(AXPY, block=2, engine="interp",
                    args={"n": np.int32(2), "a": np.float32(2), "x": np.ones(2, np.float32),
                          "y": np.zeros(2, np.float32)})
    assert r.outputs["y"].tolist() == [2.0, 2.0]


@pytest.mark.parametrize(
    "args,message",
    [
        ({"o": np.zeros(4, np.int32)}, "missing argument"),
        ({"o": np.zeros(4, np.int32), "k": 1, "z": 2}, "unknown argument"),
        ({"o": np.zeros(4, np.float32), "k": 1}, r"takes i32\* but the array is float32"),
        ({"o": np.zeros(4, np.int32), "k": 1.5}, "got a float"),
        ({"o": np.zeros(4, np.int32), "k": 2**40}, "does not fit i32"),
        ({"o": [0, 0, 0, 0], "k": 1}, "pass a NumPy array"),
        ({"o": np.zeros(4, np.int32), "k": np.zeros(3, np.int32)}, "pass a scalar"),
        ({"o": np.zeros(4, np.complex64), "k": 1}, "unsupported dtype"),
    ],
)
def test_bad_input_is_a_qwengpu_error(args: dict, message: str) -> None:
    with pytest.raises(LaunchSpecError, match=message):
        qwengpu.run(ADDK, block=4, engine="interp", args=args)


def test_bad_source_kernel_engine_steps(tmp_path: Path) -> None:
    with pytest.raises(QwenGPUError, match="no such CUDA file"):
        qwengpu.run(str(tmp_path / "nope.cu"), engine="interp")
    with pytest.raises(QwenGPUError, match="no kernel 'other'"):
        qwengpu.run(ADDK, kernel="other", engine="interp", args={})
    with pytest.raises(QwenGPUError, match="unknown engine"):
        qwengpu.run(ADDK, block=4, engine="gpu", args={"o": np.zeros(4, np.int32), "k": 1})
    with pytest.raises(QwenGPUError, match="max_steps"):
        qwengpu.run(ADDK, block=4, engine="interp", max_steps=0, args={"o": np.zeros(4, np.int32), "k": 1})
    with pytest.raises(QwenGPUError, match="not a mounted checkpoint"):
        qwengpu.load_mount(tmp_path)


def test_run_spec_path_and_dict() -> None:
    cu = ROOT / "examples" / "block_sum.cu"
    r = qwengpu.run_spec(cu, engine="interp")
    assert r.passed and r.outputs["out"].dtype == np.int32
    spec = json.loads(cu.with_suffix(".json").read_text())
    spec["expected"]["out"][0] += 1  # a wrong expectation must be reported
    r2 = qwengpu.run_spec(cu, spec, engine="interp")
    assert not r2.passed and r2.mismatches
    assert r2.outputs["out"].tolist() == r.outputs["out"].tolist()


def test_default_engine_is_the_clis() -> None:
    """``qwengpu.run`` defaults to the machine engine, as ``qwengpu run`` does."""
    import inspect

    from qwengpu.cli import build_parser

    assert inspect.signature(qwengpu.run).parameters["engine"].default == "machine"
    args = build_parser().parse_args(["run", "x.cu"])
    assert args.engine == "machine"


def test_machine_equals_interp_bit_for_bit() -> None:
    """One small launch on the machine (the model's argmax tokens) equals the interpreter's bits."""
    args = {"o": np.array([7, -1, 2**31 - 1, 0], np.int32), "k": 3}
    ref = qwengpu.run(ADDK, block=4, engine="interp", args=args)
    r = qwengpu.run(ADDK, block=4, args=args)
    assert r.engine == "machine"
    assert r.outputs["o"].view(np.uint32).tolist() == ref.outputs["o"].view(np.uint32).tolist()
    assert r.stats["tokens"] > 0


@pytest.mark.slow
def test_load_mount_run_and_generate(small_mount: Path) -> None:
    """A launch through the mount equals the interpreter's; text generation returns text (~3 min: the
    session's synthetic mount is built once)."""
    m = qwengpu.load_mount(small_mount)
    args = {"o": np.array([1, 2, 3, 4], np.int32), "k": 9}
    r = m.run(ADDK, block=4, args=args)
    ref = qwengpu.run(ADDK, block=4, engine="interp", args=args)
    assert r.engine == "model" and r.stats["tokens"] > 0
    assert r.outputs["o"].tolist() == ref.outputs["o"].tolist()
    with pytest.raises(LaunchSpecError, match="missing argument"):
        m.run(ADDK, block=4, args={"k": 1})
    text = m.generate("hello", max_new_tokens=4)
    assert isinstance(text, str)
    turn = m.ask("What is the sum of the integers from 1 to 100?",
                 replies=ROOT / "docs" / "advanced-mode-replies.json")
    assert turn.computed is not None and turn.computed.engine == "model"
    assert [int(v) for v in turn.computed.outputs["out"]] == [5050]  # computed inside the mount
