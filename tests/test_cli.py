"""The `qwengpu` command: output formats, exit codes, and bad input without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOT_SPEC = {
    "kernel": "dot",
    "grid": 1,
    "block": [4, 1, 1],
    "args": [
        {"name": "a", "type": "f32*", "data": [1, 2, 3]},
        {"name": "n", "type": "i32", "value": 3},
        {"name": "out", "type": "f32*", "data": [0]},
    ],
    "outputs": ["out"],
    "expected": {"out": [32]},
}
DOT_SRC = (
    'extern "C" __global__ void dot(const float* a, int n, float* out) {\n'
    "  int i = threadIdx.x;\n  if (i < n) atomicAdd(out, a[i] * (float)(n + 1 + i));\n}\n"
)


def cli(*args: str, cwd: Path = ROOT, env: dict | None = None, stdin: str | None = None
        ) -> subprocess.CompletedProcess:
    """``python -m qwengpu.cli ARGS`` on this checkout's package, whatever ``cwd`` is."""
    full = {**os.environ, **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [full.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, "-m", "qwengpu.cli", *args], capture_output=True, text=True, cwd=cwd, env=full,
        input=stdin,
    )


@pytest.fixture
def dot(tmp_path: Path) -> Path:
    (tmp_path / "dot.cu").write_text(DOT_SRC)
    (tmp_path / "dot.json").write_text(json.dumps(DOT_SPEC))
    return tmp_path / "dot.cu"


def test_run_json_format(dot: Path):
    p = cli("run", str(dot), "--json", "--engine", "interp")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["kernel"] == "dot" and out["engine"] == "interp"
    assert out["outputs"] == {"out": [32.0]}
    assert isinstance(out["stats"]["warp_instructions"], int) and out["stats"]["warp_instructions"] > 0
    assert out["check"]["passed"] is True


def test_run_human_and_trace(dot: Path):
    p = cli("run", str(dot), "--trace", "--engine", "interp")
    assert p.returncode == 0 and "out = [32.0]" in p.stdout and "check: PASS" in p.stdout
    assert "atom.global.add.f32" in p.stderr and "mask=0000000f" in p.stderr


def test_check_dir_pass_and_fail(dot: Path, tmp_path: Path):
    p = cli("check", str(tmp_path), "--engine", "interp")
    assert p.returncode == 0 and "1 passed, 0 failed" in p.stdout
    bad = dict(DOT_SPEC, expected={"out": [31]})
    (tmp_path / "dot.json").write_text(json.dumps(bad))
    p = cli("check", str(tmp_path), "--engine", "interp")
    assert p.returncode == 9 and "FAIL" in p.stdout and "out[0]: got 32.0" in p.stdout
    p = cli("check", str(tmp_path), "--json", "--engine", "interp")
    assert json.loads(p.stdout)["failed"] == 1


def test_check_one_kernel_file(dot: Path, tmp_path: Path):
    p = cli("check", str(dot), "--engine", "interp")
    assert p.returncode == 0 and "1 passed, 0 failed" in p.stdout
    (tmp_path / "lone.cu").write_text(DOT_SRC)
    p = cli("check", str(tmp_path / "lone.cu"))
    assert p.returncode != 0 and "lone.json" in p.stderr and "Traceback" not in p.stderr


def _no_traceback(p: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in p.stderr and p.stderr.startswith("error: ")


def test_bad_inputs_give_messages(tmp_path: Path, dot: Path):
    (tmp_path / "bad.cu").write_text('extern "C" __global__ void bad(int* p) {\n  p[0] = nope;\n}\n')
    (tmp_path / "bad.json").write_text(
        json.dumps(
            {"kernel": "bad", "grid": 1, "block": 1, "args": [{"name": "p", "type": "i32*", "size": 1}]}
        )
    )
    p = cli("run", str(tmp_path / "bad.cu"))
    assert p.returncode == 11 and "bad.cu(2): error" in p.stderr
    _no_traceback(p)
    (tmp_path / "broken.json").write_text("{not json")
    p = cli("run", str(dot), "--launch", str(tmp_path / "broken.json"))
    assert p.returncode == 4 and "invalid JSON at line 1" in p.stderr
    _no_traceback(p)
    p = cli("run", str(tmp_path / "missing.cu"))
    assert p.returncode != 0
    _no_traceback(p)
    # sin.approx: no exact machine sequence yet, refused by name before any model is loaded
    (tmp_path / "fsin.cu").write_text(
        'extern "C" __global__ void fsin(float* y) { y[threadIdx.x] = __sinf(y[threadIdx.x]); }\n'
    )
    (tmp_path / "fsin.json").write_text(
        '{"kernel": "fsin", "grid": 1, "block": 4, '
        '"args": [{"name": "y", "type": "f32*", "data": [0.5, 1, 2, 3]}], "outputs": ["y"]}'
    )
    p = cli("run", str(tmp_path / "fsin.cu"), "--engine", "machine")
    assert p.returncode == 6 and "sin.approx" in p.stderr and "beyond the machine" in p.stderr
    _no_traceback(p)
    # the model engine runs on a mounted checkpoint: without --model, or with a folder that is not
    # a mount, it says what it needs
    p = cli("run", str(dot), "--engine", "model")
    assert p.returncode != 0 and "--engine model needs --model DIR" in p.stderr
    _no_traceback(p)
    p = cli("run", str(dot), "--engine", "model", "--model", str(tmp_path))
    assert p.returncode != 0 and "not a qwengpu mount" in p.stderr
    _no_traceback(p)
    (tmp_path / "spin.cu").write_text(
        'extern "C" __global__ void spin(volatile int* p) { while (!p[0]) {} }\n'
    )
    (tmp_path / "spin.json").write_text(
        json.dumps(
            {"kernel": "spin", "grid": 1, "block": 1, "args": [{"name": "p", "type": "i32*", "size": 1}]}
        )
    )
    p = cli("run", str(tmp_path / "spin.cu"), "--max-steps", "500", "--engine", "interp")
    assert p.returncode == 5 and "step limit" in p.stderr
    _no_traceback(p)


def test_default_engine_is_the_machine_in_the_weights(dot: Path):
    """The default engine runs the kernel inside the compiled model (the corpus passes there)."""
    p = cli("run", str(dot), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["engine"] == "machine" and out["outputs"] == {"out": [32.0]} and out["check"]["passed"]
    assert out["stats"]["tokens"] > 0


def test_ptx_and_help(dot: Path):
    p = cli("ptx", str(dot))
    assert p.returncode == 0 and ".entry dot" in p.stdout
    p = cli("--help")
    assert p.returncode == 0 and "check" in p.stdout and "hwcheck" in p.stdout


def test_hwcheck_without_gpu_says_so():
    p = cli("hwcheck", "kernels")
    assert p.returncode == 12
    assert "GPU" in p.stderr or "driver" in p.stderr
    _no_traceback(p)


OOB_SRC = """__device__ int load(const int* p, int i) { return p[i + 4]; }
extern "C" __global__ void oob(const int* a, int* out) {
  int i = threadIdx.x;
  out[i] = load(a, i) + warpSize;
}
"""


def test_ptx_lines_in_errors_point_into_the_ptx_listing(tmp_path: Path):
    """`qwengpu ptx` prints exactly the PTX `run` parses: the PTX line of a fault is that line of the
    listing, and the message names the CUDA line of the inlined device function and its call site."""
    (tmp_path / "oob.cu").write_text(OOB_SRC)
    spec = {
        "kernel": "oob",
        "grid": 1,
        "block": 2,
        "args": [{"name": "a", "type": "i32*", "data": [1, 2]}, {"name": "out", "type": "i32*", "size": 2}],
    }
    (tmp_path / "oob.json").write_text(json.dumps(spec))
    r = cli("run", "oob.cu", "--engine", "interp", cwd=tmp_path)
    assert r.returncode == 5 and "Traceback" not in r.stderr
    assert "out-of-bounds global load" in r.stderr
    assert "oob.cu:1 (in load, inlined at oob.cu:4)" in r.stderr
    line = int(r.stderr.split("PTX line ")[1].split(",")[0])
    listing = cli("ptx", "oob.cu", cwd=tmp_path)
    assert listing.returncode == 0
    instruction = r.stderr.split("instruction `")[1].split("`")[0]  # as the error quotes it
    assert instruction.startswith("ld.global")
    assert " ".join(listing.stdout.splitlines()[line - 1].split()).rstrip(";") == instruction


def test_ptx_flags(tmp_path: Path):
    (tmp_path / "oob.cu").write_text(OOB_SRC)
    plain = cli("ptx", "oob.cu", "--no-lineinfo", cwd=tmp_path).stdout
    default = cli("ptx", "oob.cu", cwd=tmp_path).stdout
    debug = cli("ptx", "oob.cu", "-G", cwd=tmp_path).stdout
    assert ".loc" in default and ".loc" not in plain and ", debug" in debug and ".debug_info" in debug
    fast = cli("ptx", "oob.cu", "--fast-math", "-X=-std=c++17", "-o", "out.ptx", cwd=tmp_path)
    assert fast.returncode == 0 and (tmp_path / "out.ptx").read_text().startswith("//")
    bad = cli("ptx", "oob.cu", "-X=--no-such-option", cwd=tmp_path)
    assert bad.returncode == 11 and "unrecognized option --no-such-option" in bad.stderr
    assert "Traceback" not in bad.stderr
