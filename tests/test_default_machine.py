"""One machine everywhere: ``qwengpu run``/``check``/``machine``, the API and the runner default to the
Qwen3.5-2B-shape machine (the one every mount uses); ``--shape test`` / ``QWENGPU_MACHINE_SHAPE=test``
pick the small test shape. Nothing here builds or loads a machine: the resolved shape and config are
checked where the engine would take them (the suite itself runs on the test shape, tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qwengpu.errors import QwenGPUError, UsageError
from qwengpu.shapes import SHAPE_ENV, default_shape_name, resolve_shape_name

ROOT = Path(__file__).resolve().parent.parent
DOT = ROOT / "kernels" / "dot.cu"
# Qwen3.5-2B's layer sizes, read from the packaged config file itself (not from qwengpu's code)
TWO_B = json.loads((ROOT / "qwengpu" / "compiler" / "configs" / "qwen3_5_2b_text.json").read_text())


class Stop(QwenGPUError):
    """Raised by the stand-ins below where the real code would start building or loading a machine."""


def test_the_suite_runs_the_test_shape() -> None:
    assert os.environ[SHAPE_ENV] == "test" and default_shape_name() == "test"


def test_default_is_2b_and_the_environment_overrides_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SHAPE_ENV, raising=False)
    assert default_shape_name() == "2b" and resolve_shape_name(None) == "2b"
    assert resolve_shape_name("test") == "test"
    monkeypatch.setenv(SHAPE_ENV, "TEST")
    assert default_shape_name() == "test"
    monkeypatch.setenv(SHAPE_ENV, "")
    assert default_shape_name() == "2b"
    monkeypatch.setenv(SHAPE_ENV, "7b")
    with pytest.raises(UsageError, match=f"{SHAPE_ENV}='7b' is not a machine shape"):
        default_shape_name()
    with pytest.raises(UsageError, match="unknown machine shape 'huge'"):
        resolve_shape_name("huge")


def test_default_config_and_cache_key_are_the_2b_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    from qwengpu.model.configs import MACHINE_WIDTH_2B, shape_for
    from qwengpu.model.machine_checkpoint import compiler_version
    from qwengpu.runtime.engine import machine_config

    monkeypatch.delenv(SHAPE_ENV, raising=False)
    cfg = machine_config()
    for k in ("intermediate_size", "num_hidden_layers", "linear_num_value_heads"):
        assert getattr(cfg, k) == TWO_B[k], k
    # Qwen3.5-2B's layer fields at the machine's own width (its residual holds the one-lane multiplier)
    assert cfg.hidden_size == MACHINE_WIDTH_2B > TWO_B["hidden_size"]
    assert shape_for(cfg).multiplier and shape_for(cfg).fmulf  # the 2B shape's MLPs hold the multiplier
    assert compiler_version() == compiler_version(machine_config("2b"))
    assert compiler_version() != compiler_version(machine_config("test"))
    monkeypatch.setenv(SHAPE_ENV, "test")
    assert machine_config().intermediate_size != TWO_B["intermediate_size"]
    assert not shape_for(machine_config()).multiplier


@pytest.fixture
def machine_seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The shape each machine launch asked for, stopped before any model is built or loaded."""
    import qwengpu.runner as R

    seen: list[str] = []

    def fake(cu, spec_path, spec, runtime, progress=None, trace=None, max_steps=None, replay=False,
             shape=None, stage=None, kernel=None):
        seen.append(shape)
        raise Stop("stopped before the model load")

    monkeypatch.setattr(R, "_run_on_machine", fake)
    monkeypatch.delenv(SHAPE_ENV, raising=False)
    return seen


def test_runner_and_api_default_to_2b(machine_seen: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import qwengpu
    from qwengpu.runner import run_kernel

    for launch in (lambda **kw: run_kernel(DOT, engine="machine", **kw),
                   lambda **kw: qwengpu.run_spec(DOT, **kw)):
        with pytest.raises(Stop):
            launch()
        with pytest.raises(Stop):
            launch(shape="test")
    monkeypatch.setenv(SHAPE_ENV, "test")
    with pytest.raises(Stop):
        qwengpu.run("__global__ void k(int* o) { o[threadIdx.x] = 1; }", block=4,
                    args={"o": __import__("numpy").zeros(4, "int32")})
    assert machine_seen == ["2b", "test", "2b", "test", "test"]


def test_cli_run_and_check_default_to_2b(machine_seen: list[str], capsys: pytest.CaptureFixture) -> None:
    from qwengpu.cli import main

    assert main(["run", str(DOT), "-q"]) == Stop.exit_code
    assert main(["run", str(DOT), "-q", "--shape", "test"]) == Stop.exit_code
    assert main(["check", str(DOT), "-q"]) != 0  # check reports the stop as that kernel's ERROR row
    assert machine_seen == ["2b", "test", "2b"]
    assert "stopped before the model load" in capsys.readouterr().out


def test_machine_build_defaults_to_2b(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import qwengpu.model.machine_checkpoint as C
    from qwengpu.cli import main

    seen = []

    def fake(out, config=None, shape=None, **kw):
        seen.append(int(config.intermediate_size))
        raise Stop("stopped before the build")

    monkeypatch.setattr(C, "build_checkpoint", fake)
    monkeypatch.delenv(SHAPE_ENV, raising=False)
    assert main(["machine", "build", "--out", str(tmp_path / "m"), "-q"]) == Stop.exit_code
    assert main(["machine", "build", "--out", str(tmp_path / "m"), "-q", "--shape", "test"]) == Stop.exit_code
    assert seen[0] == TWO_B["intermediate_size"] and seen[1] != TWO_B["intermediate_size"]


def _cli(*args: str, env_shape: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != SHAPE_ENV}
    if env_shape is not None:
        env[SHAPE_ENV] = env_shape
    return subprocess.run([sys.executable, "-m", "qwengpu", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)


def test_machine_info_prints_the_default_machine_and_its_units() -> None:
    from qwengpu.machine.circuit import MACHINE_UNITS
    from qwengpu.model.configs import shape_for
    from qwengpu.runtime.engine import machine_config

    for env_shape, want in ((None, "2b"), ("test", "test")):
        p = _cli("machine", "info", "--json", env_shape=env_shape)
        assert p.returncode == 0, p.stderr
        info = json.loads(p.stdout)
        shape = shape_for(machine_config(want))
        flags = {name: getattr(shape, name) for name in (*MACHINE_UNITS, "lane_rows")}
        assert info["shape"] == want and info["units"] == flags and "multiplier" in flags
        assert info["in_weights"]["program"] == shape.rom_rows
        assert info["in_weights"]["writable_words"] == shape.gmem_words == {"2b": 16384, "test": 2048}[want]
        assert info["in_weights"]["global_words"] == shape.gmem_words + shape.ro_words == {"2b": 65536,
                                                                                          "test": 2048}[want]
        assert info["in_weights"]["shared_words"] == shape.gmem_words * 3 // 4
    assert info["layer_shape"]["intermediate_size"] != TWO_B["intermediate_size"]  # the test shape, last
    text = _cli("machine", "info", env_shape=None)
    assert text.returncode == 0 and "shape 2b (the default" in text.stdout
    assert f"intermediate {TWO_B['intermediate_size']}" in text.stdout and "yes  multiplier" in text.stdout
    assert "yes  lane_rows: one-lane rows" in text.stdout
    bad = _cli("machine", "info", env_shape="big")
    assert bad.returncode == 2 and bad.stderr.startswith(f"error: {SHAPE_ENV}='big'"), bad.stderr


def test_help_names_the_default_and_the_environment_variable() -> None:
    from qwengpu.cli import build_parser

    ap = build_parser()
    assert SHAPE_ENV in ap.format_help()
    sub = next(a for a in ap._actions if a.dest == "cmd")  # noqa: SLF001
    for name in ("run", "check"):
        text = " ".join(sub.choices[name].format_help().split())
        assert SHAPE_ENV in text and "the default" in text, name
    assert ap.parse_args(["run", "k.cu"]).shape is None  # resolved at run time: the env var counts


@pytest.mark.parametrize("name", ["2b", "test"])
def test_shape_by_name_is_the_shape_of_its_config(name: str) -> None:
    """``shape_named`` (the interpreter's note: no transformers config built) gives the shape
    ``shape_for`` derives from the named layer config itself."""
    from qwengpu.model.configs import shape_for, shape_named
    from qwengpu.model.machine_checkpoint import config_named

    assert shape_named(name) == shape_for(config_named(name))
    if name == "2b":
        assert shape_named(name).fmulf and TWO_B["intermediate_size"] == 6144


def test_an_interpreter_run_imports_neither_torch_nor_transformers(tmp_path: Path) -> None:
    """``qwengpu run --engine interp`` (and its "the machine would refuse this" note) needs neither:
    importing them cost every interpreter run ~5 s on a 2-core machine."""
    code = ("import sys\nfrom qwengpu.cli import main\n"
            "rc = main(['run', sys.argv[1], '--engine', 'interp', '-q'])\n"
            "heavy = sorted(m for m in ('torch', 'transformers') if m in sys.modules)\n"
            "print('heavy:', heavy)\nsys.exit(rc)\n")
    p = subprocess.run([sys.executable, "-c", code, str(DOT)], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "check: PASS (bit-exact)" in p.stdout and "heavy: []" in p.stdout


@pytest.mark.parametrize("argv", [["machine", "info", "--json"], ["machine", "cache", "--json"]])
def test_machine_info_and_cache_import_neither_torch_nor_transformers(tmp_path: Path, argv) -> None:
    """``machine info`` reads the shape by name and ``machine cache`` the entries' records (one entry
    here, named by its sizes): neither imports torch or transformers (5 s and 3 s a call before on
    a 2-core machine)."""
    from qwengpu.model.machine_checkpoint import MACHINE_FORMAT, MACHINE_SIDECAR

    entry = tmp_path / "cache" / "machine" / "aaaa"
    entry.mkdir(parents=True)
    record = {"format": MACHINE_FORMAT, "compiler_version": "aaaa",
              "config": {"hidden_size": 2048, "intermediate_size": 2048}}
    (entry / MACHINE_SIDECAR).write_text(json.dumps(record))
    code = ("import sys\nfrom qwengpu.cli import main\n"
            f"rc = main({argv!r})\n"
            "heavy = sorted(m for m in ('torch', 'transformers') if m in sys.modules)\n"
            "print('heavy:', heavy, file=sys.stderr)\nsys.exit(rc)\n")
    env = dict(os.environ, QWENGPU_CACHE=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert "heavy: []" in p.stderr
    out = json.loads(p.stdout)
    if argv[1] == "cache":
        assert [(e["version"], e["shape_name"]) for e in out["entries"]] == [("aaaa", "test")]
    else:
        assert out["shape"] == "test" and out["units"]["fmulf"] is False  # the suite runs the test shape


def test_two_processes_needing_one_entry_build_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load_or_build`` in two threads at once on an empty cache (two launches started together,
    the test session's two workers): one builds and saves the entry, holding its lock; the other
    waits for the lock and loads what the first saved. Stand-ins replace the compile, the write and
    the load (nothing here builds a machine)."""
    import threading
    import time

    from qwengpu.model import machine_checkpoint as mc

    builds, loads = [], []

    def build(config, shape, progress=None):
        builds.append(threading.get_ident())
        time.sleep(0.5)  # the other thread reaches the lock meanwhile
        return type("C", (), {"io": "io"})(), "model"

    def write(model, compiled, out, meta, overwrite):
        out.mkdir(parents=True)
        (out / mc.MACHINE_SIDECAR).write_text("{}")
        return out

    def load(entry, version):
        loads.append(threading.get_ident())
        return "io", "loaded"

    monkeypatch.setattr(mc, "_build", build)
    monkeypatch.setattr(mc, "_write", write)
    monkeypatch.setattr(mc, "load_checkpoint", load)
    monkeypatch.setattr(mc, "compiler_version", lambda config=None, shape=None: "v-test")
    monkeypatch.setattr(mc, "prune", lambda *a, **k: None)
    monkeypatch.setattr(mc, "_meta", lambda *a: {})
    out: list = []
    def need() -> None:
        out.append(mc.load_or_build("cfg", "shape", cache_dir=tmp_path))

    threads = [threading.Thread(target=need) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and len(loads) == 1 and builds != loads
    assert sorted(out) == [("io", "loaded"), ("io", "model")]
