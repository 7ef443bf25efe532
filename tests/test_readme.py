"""The README's code runs: fenced blocks of README.md (and examples/README.md) are extracted and executed.

Convention (the info string is the text after the opening fence):

- ```` ```python ```` blocks are executed with ``exec`` in a fresh temporary working directory (the repo
  root on ``sys.path``, so ``import qwengpu`` is this checkout; ``examples/`` and ``kernels/`` linked
  there, so ``"examples/saxpy.cu"`` resolves; anything the block writes stays in the temp folder).
- ```` ```bash ```` blocks: every command that starts with ``qwengpu `` (a line, its ``\\`` continuations
  joined, or a segment after ``&&``/``;``) runs as ``python -m qwengpu ...`` with cwd at the repo root and
  must exit 0; other lines (pip, python -c, exports) are not run. Every such command must also parse
  with the CLI's own parser (cheap, default run), whatever its markers.
- ``no-test`` in the info string skips the block (e.g. ```` ```bash no-test ````: needs a 2B checkpoint);
  ``slow`` runs it only under ``-m slow`` (``python -m pytest -m slow tests/test_readme.py``).
- Blocks written before this convention carry no marker: :data:`UNTAGGED` gives them one by the start of
  their first line (remove an entry once the README tags its block).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "examples" / "README.md"]
# first-line prefix -> marker, for README blocks that predate the convention
UNTAGGED: dict[str, str] = {
    "python -m pip install -e '.[dev]' && qwengpu run kernels/dot.cu": "slow",  # the dot demo on the machine
    "from qwengpu.compiler import Circuit": "slow",  # compiles into Qwen3.5-2B's config
    'python -c "from qwengpu.model.synthetic': "no-test",  # its qwengpu lines need the python line first
    "qwengpu build --base ~/models/Qwen3.5-2B": "no-test",  # needs a local Qwen3.5-2B
}
LINKED = ("examples", "kernels")  # linked into a python block's temp cwd, so relative paths work
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass
class Block:
    """One fenced block: where it is, its language, markers and text."""

    doc: Path
    line: int
    lang: str
    markers: set[str]
    text: str

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(text: str, doc: Path = ROOT / "README.md") -> list[Block]:
    """Every fenced block, with the markers of its info string (or of :data:`UNTAGGED`)."""
    out = []
    for m in FENCE.finditer(text):
        words = m.group(1).replace(",", " ").split()
        lang = words[0] if words else ""
        markers = set(words[1:])
        first = m.group(2).lstrip().splitlines()[0] if m.group(2).strip() else ""
        if not markers & {"slow", "no-test"}:
            markers |= {mk for prefix, mk in UNTAGGED.items() if first.startswith(prefix)}
        out.append(Block(doc, text[: m.start()].count("\n") + 1, lang, markers, m.group(2)))
    return out


def qwengpu_commands(script: str) -> list[list[str]]:
    """The ``qwengpu ...`` commands of a bash block, as argument lists (comments dropped)."""
    joined = re.sub(r"\\\n", " ", script)
    cmds = []
    for line in joined.splitlines():
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        words: list[str] = []
        for tok in [*lex, ";"]:
            if tok in ("&&", ";", "||", "|", "&"):
                if words[:1] == ["qwengpu"]:
                    cmds.append(words[1:])
                words = []
            else:
                words.append(tok)
    return cmds


def _marks(b: Block) -> list:
    return [pytest.mark.slow] if "slow" in b.markers else []


def _collect(lang: str) -> list:
    found = []
    for doc in DOCS:
        if doc.exists():
            found += [b for b in blocks(doc.read_text(), doc)
                      if b.lang == lang and "no-test" not in b.markers]
    return found


PY_BLOCKS = _collect("python")
BASH = [(b, c) for b in _collect("bash") for c in qwengpu_commands(b.text)]


def run_python(b: Block, cwd: Path) -> None:
    """``exec`` a python block in ``cwd`` (restored afterwards)."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        exec(compile(b.text, b.id, "exec"), {"__name__": "__readme__"})
    finally:
        os.chdir(old)


def run_qwengpu(args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    args = [os.path.expanduser(a) for a in args]
    return subprocess.run([sys.executable, "-m", "qwengpu", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=1800)


@pytest.mark.parametrize("b", [pytest.param(b, marks=_marks(b), id=b.id) for b in PY_BLOCKS])
def test_python_block(b: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    for d in LINKED:
        (tmp_path / d).symlink_to(ROOT / d, target_is_directory=True)
    run_python(b, tmp_path)


@pytest.mark.parametrize(
    "b,cmd", [pytest.param(b, c, marks=_marks(b), id=f"{b.id}:{' '.join(c[:2])}") for b, c in BASH]
)
def test_bash_command(b: Block, cmd: list[str]) -> None:
    done = run_qwengpu(cmd)
    assert done.returncode == 0, f"qwengpu {' '.join(cmd)} (exit {done.returncode}):\n{done.stderr[-3000:]}"


def test_every_command_parses() -> None:
    """Every ``qwengpu`` command in the docs (no-test and slow ones too) is a valid command line."""
    from qwengpu.cli import build_parser

    parser = build_parser()
    n = 0
    for doc in DOCS:
        for b in blocks(doc.read_text(), doc):
            if b.lang != "bash":
                continue
            for cmd in qwengpu_commands(b.text):
                try:
                    parser.parse_args(cmd)
                except SystemExit as e:
                    pytest.fail(f"{b.id}: `qwengpu {' '.join(cmd)}` does not parse (exit {e.code})")
                n += 1
    assert n > 0


SAMPLE = '''intro
```python
import numpy as np, qwengpu
r = qwengpu.run("__global__ void k(int* o) { o[threadIdx.x] = 2 * threadIdx.x; }", block=4,
                engine="interp", args={"o": np.zeros(4, np.int32)})
assert r.outputs["o"].tolist() == [0, 2, 4, 6]
open("made.txt", "w").write("x")
```
```bash
pip install qwengpu && qwengpu ptx examples/saxpy.cu   # a comment
qwengpu check examples \\
  --engine interp
```
```bash slow
qwengpu run kernels/dot.cu
```
```python no-test
raise SystemExit("never run")
```
'''


def test_harness_extracts_and_runs(tmp_path: Path) -> None:
    """The harness itself: markers, continuation lines, ``&&`` segments, a python block in a temp cwd."""
    bs = blocks(SAMPLE)
    assert [(b.lang, sorted(b.markers)) for b in bs] == [
        ("python", []), ("bash", []), ("bash", ["slow"]), ("python", ["no-test"])]
    assert qwengpu_commands(bs[1].text) == [["ptx", "examples/saxpy.cu"],
                                            ["check", "examples", "--engine", "interp"]]
    run_python(bs[0], tmp_path)
    assert (tmp_path / "made.txt").exists() and not (ROOT / "made.txt").exists()
    for cmd in qwengpu_commands(bs[1].text):
        assert run_qwengpu(cmd).returncode == 0
    assert run_qwengpu(["run", "examples/nope.cu", "--engine", "interp"]).returncode != 0
