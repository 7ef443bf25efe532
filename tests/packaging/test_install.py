"""A plain ``pip install qwengpu`` (no extras) must run the interpreter path: the CLI is started
with torch, transformers, safetensors, scipy and tokenizers made unimportable, as on an install
without the ``model`` extra. The declared dependencies must cover every third-party import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]

_BLOCK = """
import importlib.abc, sys
class _NoExtra(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {'torch', 'transformers', 'safetensors', 'scipy', 'tokenizers'}:
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        return None
sys.meta_path.insert(0, _NoExtra())
sys.argv = ['qwengpu', *sys.argv[1:]]
from qwengpu.cli import main
sys.exit(main())
"""


def _bare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _BLOCK, *args], capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("args", [
    ("--help",),
    ("run", "--help"),
    ("build", "--help"),
    ("ptx", "kernels/saxpy.cu"),
    ("run", "kernels/dot.cu", "--engine", "interp"),
    ("check", "kernels", "--engine", "interp", "-k", "vec_add"),
])
def test_interpreter_path_needs_no_model_extra(args):
    p = _bare(*args)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr


def test_model_engine_without_extra_says_what_to_install():
    p = _bare("run", "kernels/dot.cu", "--engine", "machine")
    assert p.returncode == 10, p.stderr
    assert "Traceback" not in p.stderr
    assert "qwengpu[model]" in p.stderr


def _third_party_imports() -> set[str]:
    stdlib = set(sys.stdlib_module_names)
    found: set[str] = set()
    for path in (ROOT / "qwengpu").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for n in names:
                top = n.split(".")[0]
                if top not in stdlib and top != "qwengpu":
                    found.add(top)
    return found


# import name -> distribution name, where they differ
_DIST = {"cuda": "cuda-bindings", "nvidia": "nvidia-cuda-nvrtc", "yaml": "pyyaml"}


def test_every_third_party_import_is_declared():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(meta["dependencies"])
    for extra in meta["optional-dependencies"].values():
        declared += extra
    names = {d.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower()
             for d in declared}
    missing = sorted(i for i in _third_party_imports() if _DIST.get(i, i).lower() not in names)
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_no_private_imports_of_other_packages():
    bad = []
    for path in (ROOT / "qwengpu").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                parts = node.module.split(".")
                if parts[0] != "qwengpu" and any(p.startswith("_") and not p.startswith("__") for p in parts):
                    bad.append(f"{path.relative_to(ROOT)}: from {node.module}")
    assert not bad, bad


def test_nvrtc_is_pinned_exactly_and_the_rest_are_ranges():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = meta["dependencies"] + meta["optional-dependencies"]["model"]
    exact = [d for d in deps if "==" in d]
    assert exact == ["nvidia-cuda-nvrtc==13.5.37"], exact
    assert (ROOT / "LICENSE").is_file() and (ROOT / "THIRD_PARTY_NOTICES.md").is_file()
    assert meta.get("license") and meta.get("readme")
