"""The CLI's rough edges a first-hour user hit (issue 25, part 5): each test failed on 048f9f0.

Interpreter engine and tiny inputs: seconds. Every cache test points ``QWENGPU_CACHE`` (or
``XDG_CACHE_HOME``) at a temporary folder: nothing here touches the user's real cache.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
from pathlib import Path

import pytest
from test_cli import DOT_SPEC, DOT_SRC, cli

BIG_SRC = 'extern "C" __global__ void big(int* p) { p[threadIdx.x] = threadIdx.x; }\n'
BAR_SRC = 'extern "C" __global__ void big(int* p) { p[threadIdx.x] = 1; __syncthreads(); p[0] = 2; }\n'


@pytest.fixture
def dot(tmp_path: Path) -> Path:
    (tmp_path / "dot.cu").write_text(DOT_SRC)
    (tmp_path / "dot.json").write_text(json.dumps(DOT_SPEC))
    return tmp_path / "dot.cu"


def _big(tmp_path: Path, words: int = 5000, block: int = 4, src: str = BIG_SRC) -> Path:
    (tmp_path / "big.cu").write_text(src)
    spec = {"kernel": "big", "grid": 1, "block": block,
            "args": [{"name": "p", "type": "i32*", "size": words}], "outputs": []}
    (tmp_path / "big.json").write_text(json.dumps(spec))
    return tmp_path / "big.cu"


def _clean_error(p) -> None:
    assert "Traceback" not in p.stderr, p.stderr


# ------------------------------------------------------------------------------------- exit codes
def test_exit_codes_are_one_distinct_table():
    from qwengpu.errors import (
        CheckpointError,
        CompileError,
        ExecutionError,
        ExitCode,
        LaunchSpecError,
        MachineLimitError,
        MissingDependencyError,
        PTXError,
        UsageError,
    )
    from qwengpu.hw.hwcheck import NoGPU
    from qwengpu.model.memory import MemoryLimitError

    values = [int(c) for c in ExitCode]
    assert len(values) == len(set(values))
    assert ExitCode.USAGE == 2  # argparse's, by Python convention
    errors = [CompileError, PTXError, LaunchSpecError, ExecutionError, MachineLimitError, CheckpointError,
              MissingDependencyError, NoGPU, MemoryLimitError, UsageError]
    codes = [int(e.exit_code) for e in errors]
    assert len(codes) == len(set(codes)), codes  # one code per kind of fault
    assert all(c in values for c in codes)
    assert CompileError.exit_code != ExitCode.USAGE


def test_compile_error_and_usage_error_differ(tmp_path: Path):
    (tmp_path / "bad.cu").write_text('extern "C" __global__ void bad(int* p) {\n  p[0] = nope;\n}\n')
    (tmp_path / "bad.json").write_text(json.dumps(
        {"kernel": "bad", "grid": 1, "block": 1, "args": [{"name": "p", "type": "i32*", "size": 1}]}))
    compile_rc = cli("run", str(tmp_path / "bad.cu"), "--engine", "interp")
    usage_rc = cli("run", str(tmp_path / "bad.cu"), "--engine", "nope")
    assert usage_rc.returncode == 2 and "invalid choice" in usage_rc.stderr
    assert compile_rc.returncode not in (0, 2) and "bad.cu(2): error" in compile_rc.stderr
    _clean_error(compile_rc)


def test_exit_codes_listed():
    from qwengpu.errors import ExitCode

    p = cli("exit-codes")
    assert p.returncode == 0
    for c in ExitCode:
        assert re.search(rf"^\s*{int(c)}\s+{c.name}\s", p.stdout, re.M), c
    h = cli("--help")
    assert "exit codes" in h.stdout and "MISMATCH" in h.stdout


def test_a_check_mismatch_has_the_same_code_in_run_and_check(dot: Path, tmp_path: Path):
    from qwengpu.errors import ExitCode

    (tmp_path / "dot.json").write_text(json.dumps(dict(DOT_SPEC, expected={"out": [31]})))
    r = cli("run", str(dot), "--engine", "interp")
    c = cli("check", str(tmp_path), "--engine", "interp")
    assert r.returncode == c.returncode == ExitCode.MISMATCH


def test_not_a_mount_is_a_checkpoint_fault_in_run_and_ask(dot: Path, tmp_path: Path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    r = cli("run", str(dot), "--engine", "model", "--model", str(tmp_path / "m"))
    a = cli("ask", "what is 6 * 7?", "--model", str(tmp_path / "m"))
    assert r.returncode == a.returncode == 7, (r.stderr, a.stderr)
    n = cli("ask", "what is 6 * 7?", "--model", str(tmp_path / "nowhere"))
    assert n.returncode == 7 and "not a model folder (no such folder)" in n.stderr
    _clean_error(a)


# ------------------------------------------------------------------------------------ arguments
@pytest.mark.parametrize("n", ["0", "-5"])
def test_max_steps_must_be_positive(dot: Path, n: str):
    p = cli("run", str(dot), "--engine", "interp", f"--max-steps={n}")
    assert p.returncode == 2 and "positive integer" in p.stderr and "step limit" not in p.stderr
    c = cli("check", str(dot), "--engine", "interp", f"--max-steps={n}")
    assert c.returncode == 2 and "positive integer" in c.stderr


def test_run_names_the_missing_kernel_source(tmp_path: Path):
    p = cli("run", "nope.cu", "--engine", "interp", cwd=tmp_path)
    assert p.returncode != 0 and "no kernel source: nope.cu does not exist" in p.stderr
    assert "launch spec" not in p.stderr
    _clean_error(p)


@pytest.mark.parametrize("flag", [["--device", "cuda"], ["--dtype", "bfloat16"], ["--device", "cpu"]])
def test_interp_refuses_device_and_dtype(dot: Path, flag: list[str]):
    p = cli("run", str(dot), "--engine", "interp", *flag)
    assert p.returncode == 2 and flag[0] in p.stderr and "interpreter" in p.stderr
    _clean_error(p)


# --------------------------------------------------------------------------- machine limits
def test_launch_over_memory_says_what_it_needs_and_what_the_machine_has(tmp_path: Path):
    big = _big(tmp_path)
    p = cli("run", str(big))  # the machine engine refuses it before loading the model
    assert p.returncode == 6, p.stderr
    assert "need 5004 words of global memory; the machine in the weights has 2048" in p.stderr
    assert "keeps words" not in p.stderr and "(none)" not in p.stderr


def test_interp_notes_a_launch_the_machine_would_refuse(tmp_path: Path):
    # 100 threads per block waiting at a barrier: the machine's threads take whole warps in turns
    big = _big(tmp_path, words=128, block=100, src=BAR_SRC)
    p = cli("run", str(big), "--engine", "interp", "--json")
    assert p.returncode == 0, p.stderr
    assert "note: the machine in the weights would refuse this launch" in p.stderr
    assert "100 threads per block and its kernel waits at block barriers" in p.stderr
    stats = json.loads(p.stdout)["stats"]
    assert "a multiple of 32 threads" in stats["machine_limit"]
    (tmp_path / "fits").mkdir()
    ok = cli("run", str(_big(tmp_path / "fits", words=8, block=4)), "--engine", "interp", "--json")
    assert json.loads(ok.stdout)["stats"]["machine_limit"] is None and "note:" not in ok.stderr
    q = cli("run", str(big), "--engine", "interp", "-q")
    assert "note:" not in q.stderr


# --------------------------------------------------------------------------- -q / -v, progress
def test_quiet_and_verbose(dot: Path):
    q = cli("run", str(dot), "--engine", "interp", "-q")
    assert q.returncode == 0 and q.stdout.splitlines() == ["out = [32.0]", "check: PASS (bit-exact)"]
    v = cli("-v", "run", str(dot), "--engine", "interp")
    assert v.returncode == 0 and "stage launch:" in v.stdout and '"warp_instructions"' in v.stdout
    both = cli("run", str(dot), "-q", "-v")
    assert both.returncode == 2


def test_flash_linear_attention_caveat_and_silenced_warnings(monkeypatch):
    h = cli("run", "--help")
    flat = " ".join(h.stdout.split())
    assert "flash-linear-attention" in flat and "causal-conv1d" in flat and "exactness" in flat
    from qwengpu import cli as cli_mod

    monkeypatch.delenv("TRANSFORMERS_VERBOSITY", raising=False)
    cli_mod._quiet_transformers(1)
    assert "TRANSFORMERS_VERBOSITY" not in os.environ  # -v: transformers speaks
    cli_mod._quiet_transformers(0)
    assert os.environ["TRANSFORMERS_VERBOSITY"] == "error"


def test_progress_shows_stages_and_the_launch_rate(dot: Path):
    p = cli("run", str(dot), "--engine", "interp", "--progress")
    assert p.returncode == 0, p.stderr
    assert "compile" in p.stderr and "launch" in p.stderr
    assert re.search(r"17 warp instructions, [\d,.]+ warp instructions/s", p.stderr), p.stderr
    assert "warp instructions" not in cli("run", str(dot), "--engine", "interp").stderr  # not a TTY


def test_progress_of_a_model_launch_names_the_block(capsys):
    """A model engine's progress (tokens written, the block running) on the launch line: a long
    launch of many blocks shows how far it is; one block shows no block count."""
    from qwengpu.cli import StageProgress
    from qwengpu.runner import LaunchProgress

    bar = StageProgress(keep=True)
    bar.stage("launch")
    bar.update(LaunchProgress(tokens=51_200, seconds=64.0, block=1234, blocks=65535))
    bar.done()
    err = capsys.readouterr().err
    assert "51,200 tokens, 800.0 tokens/s, block 1,235 of 65,535" in err, err
    bar = StageProgress(keep=True)
    bar.stage("launch")
    bar.done({"tokens": 36_434, "seconds": 29.0, "blocks": 1030})  # the run's own figures at the end
    assert "36,434 tokens, 1,256.3 tokens/s, 1,030 blocks" in capsys.readouterr().err
    bar = StageProgress(keep=True)
    bar.stage("launch")
    bar.update(LaunchProgress(tokens=512, seconds=1.0, block=0, blocks=1))
    bar.done()
    err = capsys.readouterr().err
    assert "512 tokens, 512.0 tokens/s" in err and "block" not in err, err


@pytest.mark.slow
def test_progress_rate_excludes_the_model_load(dot: Path, monkeypatch):
    """The tokens/s shown while the machine engine runs is measured from the launch, not from
    before the model load (an extra 5 s of load here must not count)."""
    import time

    from qwengpu.runner import run_kernel
    from qwengpu.runtime import engine

    real = engine.machine_model

    def slow_load(*a, **k):
        time.sleep(5)
        return real(*a, **k)

    monkeypatch.setattr(engine, "machine_model", slow_load)
    seen: list[float] = []
    stages: list[str] = []
    res = run_kernel(dot, engine="machine", progress=lambda st: seen.append(st.seconds), stage=stages.append)
    assert stages == ["compile", "load the machine model (test shape)", "launch"]
    assert seen and seen[-1] < res.stats["seconds"] + 3  # the 5 s (and the real load) are not in it
    p = cli("run", str(dot), "--progress")
    line = [x for x in p.stderr.splitlines() if "tokens/s" in x][-1]
    rate = float(line.split(", ")[-1].split()[0].replace(",", ""))
    launch = json.loads(cli("run", str(dot), "--json").stdout)["stats"]
    assert rate > 0.5 * launch["tokens"] / launch["seconds"]


# ------------------------------------------------------------------------------- ask and eval
def test_ask_without_a_model_says_what_works(tmp_path: Path):
    p = cli("ask", "what is 6 * 7?")
    assert p.returncode != 0 and "--model DIR" in p.stderr and "--replies FILE" in p.stderr
    _clean_error(p)
    for engine in ("interp", "machine"):  # the old message suggested these, which then failed
        q = cli("ask", "what is 6 * 7?", "--engine", engine)
        assert "--replies FILE" in q.stderr, q.stderr


def test_ask_help_replies_example_runs(tmp_path: Path):
    """The `--replies` example of `ask --help`, run as printed, with replies.json as described."""
    h = cli("ask", "--help").stdout
    line = next(x.strip() for x in h.splitlines() if "--replies replies.json" in x and "qwengpu ask" in x)
    argv = shlex.split(line.split("#")[0])
    assert argv[:2] == ["qwengpu", "ask"]
    source = ('extern "C" __global__ void k(unsigned a, unsigned b, unsigned *out) { out[0] = a * b; }')
    launch = {"kernel": "k", "grid": 1, "block": 1, "args": [
        {"name": "a", "type": "u32", "value": 6}, {"name": "b", "type": "u32", "value": 7},
        {"name": "out", "type": "u32*", "data": [0]}], "outputs": ["out"]}
    call = ("I will compute it on the GPU.\n<tool_call>\n<function=run_cuda>\n<parameter=source>\n"
            f"{source}\n</parameter>\n<parameter=launch>\n{json.dumps(launch)}\n</parameter>\n"
            "</function>\n</tool_call>")
    (tmp_path / "replies.json").write_text(json.dumps([call, "The GPU computed it.\nAnswer: {values}"]))
    p = cli(*argv[1:], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Answer: 42" in p.stdout


def test_eval_out_is_checked_before_the_evaluation(tmp_path: Path):
    root = Path(__file__).resolve().parent.parent
    bench = root / "bench" / "advanced"
    args = ["eval", str(bench), "--replies", str(bench / "reference_replies.json"),
            "--engine", "interp", "--modes", "gpu", "-k", "mul_big"]
    p = cli(*args, "--out", str(tmp_path / "no/such/dir/x.json"))
    assert p.returncode == 1 and "does not exist" in p.stderr and "mul_big" not in p.stdout
    _clean_error(p)
    d = cli(*args, "--out", str(tmp_path))
    assert d.returncode == 1 and "is a folder" in d.stderr
    ok = cli(*args, "--out", str(tmp_path / "r.json"))
    assert ok.returncode == 0, ok.stderr
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["gpu"]["correct"] == 1
    assert [f.name for f in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


# ------------------------------------------------------------------------------- machine cache
def _fake_entry(cache: Path, name: str, shape: str) -> Path:
    """A cache entry whose record names the ``shape`` layer config (no weights: listing only)."""
    from qwengpu.model.machine_checkpoint import MACHINE_FORMAT, _config_dict
    from qwengpu.runtime.engine import machine_config

    e = cache / "machine" / name
    e.mkdir(parents=True)
    meta = {"format": MACHINE_FORMAT, "compiler_version": name, "config": _config_dict(machine_config(shape)),
            "shape": {}, "vocab_size": 65536}
    (e / "qwengpu_machine.json").write_text(json.dumps(meta))
    (e / "model.safetensors").write_bytes(b"\0" * 1000)
    return e


def test_cache_refuses_a_file_as_its_location(tmp_path: Path):
    f = tmp_path / "afile"
    f.write_text("x")
    p = cli("machine", "cache", env={"QWENGPU_CACHE": str(f)})
    assert p.returncode != 0 and "is not a folder" in p.stderr and "0 entries" not in p.stdout
    _clean_error(p)


def test_cache_lists_each_shape_and_honours_xdg(tmp_path: Path):
    xdg = tmp_path / "xdg"
    _fake_entry(xdg / "qwengpu", "aaaa", "test")
    _fake_entry(xdg / "qwengpu", "bbbb", "2b")
    env = {"XDG_CACHE_HOME": str(xdg), "QWENGPU_CACHE": ""}
    p = cli("machine", "cache", env=env)
    assert p.returncode == 0, p.stderr
    assert str(xdg / "qwengpu" / "machine") in p.stdout
    rows = {ln.split()[0]: ln for ln in p.stdout.splitlines() if ln.startswith("  ")}
    assert "shape test" in rows["aaaa"] and "intermediate 2048" in rows["aaaa"]
    assert "shape 2b" in rows["bbbb"] and "intermediate 6144" in rows["bbbb"]
    j = json.loads(cli("machine", "cache", "--json", env=env).stdout)
    assert {e["version"]: e["shape_name"] for e in j["entries"]} == {"aaaa": "test", "bbbb": "2b"}
    # QWENGPU_CACHE wins over XDG_CACHE_HOME
    other = tmp_path / "other"
    q = cli("machine", "cache", env={"XDG_CACHE_HOME": str(xdg), "QWENGPU_CACHE": str(other)})
    assert str(other / "machine") in q.stdout and "0 entries" in q.stdout


def test_cache_clear_needs_yes_and_clears_ptx_too(tmp_path: Path, dot: Path):
    cache = tmp_path / "cache"
    entry = _fake_entry(cache, "aaaa", "test")
    env = {"QWENGPU_CACHE": str(cache)}  # never the real cache, whatever the code under test does
    assert cli("ptx", str(dot), env=env).returncode == 0
    ptx = list((cache / "ptx").glob("*.ptx"))
    assert ptx, "the PTX cache lives under QWENGPU_CACHE"
    p = cli("machine", "cache", "--clear", env=env, stdin="")
    assert p.returncode != 0 and "--yes" in p.stderr
    assert entry.is_dir() and all(f.exists() for f in ptx)  # nothing removed
    p = cli("machine", "cache", "--clear", "--yes", env=env)
    assert p.returncode == 0, p.stderr
    assert not entry.exists() and not any(f.exists() for f in ptx)
    assert "removed 1 entry" in p.stdout and "PTX" in p.stdout


def test_cache_files_get_the_umask_mode(tmp_path: Path):
    from qwengpu.model.machine_checkpoint import _publish

    def fill(tmp: Path) -> dict:
        tmp.mkdir()
        fd = os.open(tmp / "model.safetensors", os.O_CREAT | os.O_WRONLY, 0o600)  # as mkstemp does
        os.close(fd)
        return {"format": "x"}

    old = os.umask(0o022)
    try:
        out = _publish(tmp_path / "entry", False, fill)
    finally:
        os.umask(old)
    assert stat.S_IMODE((out / "model.safetensors").stat().st_mode) == 0o644
    assert stat.S_IMODE((out / "qwengpu_machine.json").stat().st_mode) == 0o644
