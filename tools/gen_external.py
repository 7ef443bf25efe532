#!/usr/bin/env python3
"""Generate the external conformance suite's launch specs: ``kernels/external/NAME.json`` for every
``kernels/external/NAME.cu`` (kernels adapted from cuda-samples, HeCBench, Rodinia, PolyBench/GPU, SHOC).

Each kernel's inputs are fixed (seeded) and its ``expected`` outputs are computed from the kernel's
*meaning* with exact Python / NumPy arithmetic (``tools/corpus/f32.py`` rounds float32 exactly in every
IEEE mode, ``tools/external/common.py`` does float64); nothing here runs, or imports, the project's
interpreter. The spec format and JSON writer are the corpus's (``tools/corpus/spec.py``).

    python tools/gen_external.py            # (re)write every kernels/external/NAME.json
    python tools/gen_external.py --check    # exit 1 if any JSON differs from what would be written
    python tools/gen_external.py NAME ...   # only these kernels
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KERNELS_DIR = ROOT / "kernels" / "external"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from corpus.spec import Launch  # noqa: E402
from external import ALL_MODULES  # noqa: E402


def builders() -> dict:
    """Every kernel's builder, by the name of its .cu file."""
    out = {}
    for mod in ALL_MODULES:
        for name, fn in mod.kernel.builders.items():
            if name in out:
                raise SystemExit(f"kernel {name} defined twice")
            out[name] = fn
    return out


def build(name: str) -> Launch:
    launch = builders()[name]()
    launch.validate()
    return launch


def render_all(names: list[str] | None = None) -> dict[str, str]:
    table = builders()
    texts = {}
    for name in sorted(table) if not names else names:
        texts[name] = build(name).to_json()
    return texts


def _write(path: Path, text: str) -> None:
    """Write through a temporary file and a rename, so a spec is never half-written."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 on any difference")
    ap.add_argument(
        "--dir", type=Path, default=KERNELS_DIR, help="suite directory (default: kernels/external/)"
    )
    ap.add_argument("names", nargs="*", help="only these kernels")
    args = ap.parse_args(argv)

    table = builders()
    unknown = [n for n in args.names if n not in table]
    if unknown:
        print(f"unknown kernels: {', '.join(unknown)}", file=sys.stderr)
        return 2
    if not args.dir.is_dir():
        print(f"{args.dir}: not a directory", file=sys.stderr)
        return 2
    problems = []
    if not args.names:
        sources = {p.stem for p in args.dir.glob("*.cu")}
        specs = {p.stem for p in args.dir.glob("*.json")}
        for s in sorted(sources - set(table)):
            problems.append(f"{s}.cu has no generator entry")
        for s in sorted(set(table) - sources):
            problems.append(f"generator entry {s} has no {s}.cu")
        for s in sorted(specs - set(table)):
            problems.append(f"{s}.json has no generator entry")
    texts = render_all(args.names or None)
    changed = []
    for name, text in texts.items():
        path = args.dir / f"{name}.json"
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old != text:
            changed.append(name)
            if not args.check:
                _write(path, text)
    if args.check:
        for name in changed:
            problems.append(f"{name}.json is out of date (run python tools/gen_external.py)")
    elif changed:
        print(f"wrote {len(changed)} spec(s): {', '.join(changed)}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
