"""The house by concern: every package imports only packages below it (data flows one way), and no
module takes part in an import cycle — lazy imports inside functions count. Read from the source
with ``ast``, so a new upward import fails here with the importing module named."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "qwengpu"

# each package and what it may import (README, "Layout"); the order is the data flow
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "paths": {"errors"},  # where the caches live (QWENGPU_CACHE > XDG_CACHE_HOME > ~/.cache)
    "shapes": {"errors"},  # the machine shape names and the default (2b; QWENGPU_MACHINE_SHAPE)
    "cuda": {"errors"},
    "ptx": {"errors"},
    "simt": {"errors", "ptx"},
    "spec": {"errors", "ptx", "simt"},
    "isa": {"errors", "ptx", "simt"},
    "codegen": {"errors", "cuda", "ptx", "simt", "spec", "isa"},
    "compiler": {"errors"},
    "machine": {"errors", "compiler"},
    "model": {"errors", "compiler", "machine"},
    "runtime": {"errors", "cuda", "ptx", "simt", "spec", "isa", "codegen", "compiler", "machine", "model"},
    "runner": {"errors", "cuda", "ptx", "simt", "spec", "isa", "codegen", "machine", "model", "runtime"},
    "hw": {"errors", "cuda", "ptx", "simt", "spec", "runner"},
    # (isa: the limits advanced mode's prompt states, e.g. threads per block)
    "host": {"errors", "cuda", "ptx", "simt", "spec", "isa", "machine", "runtime", "runner"},
    # the Python API, beside the CLI at the top (it reuses the CLI's parser for ask's defaults)
    "api": {"errors", "cuda", "ptx", "simt", "spec", "runtime", "runner", "host", "cli"},
}
for _pkg, _deps in ALLOWED.items():
    if "errors" in _deps and _pkg != "paths":
        _deps.add("paths")
    if "errors" in _deps and _pkg not in ("paths", "shapes"):
        _deps.add("shapes")


def _module_name(p: Path) -> str:
    parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """module -> the qwengpu modules it imports anywhere in its body (resolved to existing modules)."""
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    out: dict[str, set[str]] = {}
    for mod, p in files.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(p.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("qwengpu"):
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            found |= {n for n in names if n in files and n != mod}
        out[mod] = found
    return out


def _package(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "qwengpu"


def test_packages_import_only_what_lies_below_them():
    bad = []
    for mod, deps in _imports().items():
        src = _package(mod)
        if src in ("cli", "qwengpu", "__main__"):
            continue  # the command and the package's front door may import anything
        assert src in ALLOWED, f"{mod}: package {src!r} is not in the layout table (tests/test_house.py)"
        for d in deps:
            dst = _package(d)
            if dst != src and dst not in ALLOWED[src]:
                bad.append(f"{mod} imports {d} ({src} -> {dst})")
    assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


def test_no_module_import_cycles():
    graph = _imports()
    # a parent package's __init__ is imported before any of its modules: not an edge of its own
    graph = {m: {d for d in ds if not m.startswith(d + ".")} for m, ds in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_checks_see_an_upward_import(tmp_path, monkeypatch):
    """Negative control: a lazy upward import (ptx importing the runtime) is reported."""
    import shutil

    copy = tmp_path / "qwengpu"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__"))
    f = copy / "ptx" / "ir.py"
    f.write_text(f.read_text() + "\n\ndef _late():\n    from qwengpu.runtime import engine  # noqa: F401\n")
    monkeypatch.setattr(__import__(__name__), "PKG", copy)
    try:
        test_packages_import_only_what_lies_below_them()
    except AssertionError as e:
        assert "qwengpu.ptx.ir imports qwengpu.runtime.engine (ptx -> runtime)" in str(e)
    else:
        raise AssertionError("the upward import was not seen")
