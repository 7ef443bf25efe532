"""A whole-suite sweep log from an earlier one and the re-run of the launches a step changed.

    python bench/compose_log.py BASE.jsonl RERUN.jsonl [RERUN2.jsonl ...] --out COMPOSITE.jsonl

Why: a code-generator step changes a few launches (``bench/prompt_hashes.py --compare`` names
them); re-running only those and taking every other row from the last whole sweep gives the whole
suite's figure without a 40-minute sweep. Each kernel's row is the last one found (BASE, then the
re-runs in order); kernels a re-run holds that BASE does not are refused, so a typo in ``-k`` (or a
substring that matched an extra kernel) shows. Prints which rows came from where.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def compose(base: Path, reruns: list[Path]) -> tuple[list[dict], dict[str, str]]:
    rows = {}
    for line in base.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            rows[r["kernel"]] = r
    origin = dict.fromkeys(rows, base.name)
    for path in reruns:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            if r["kernel"] not in rows:
                raise SystemExit(f"compose_log: {path}: kernel {r['kernel']!r} is not in {base}")
            rows[r["kernel"]] = r
            origin[r["kernel"]] = path.name
    return list(rows.values()), origin


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", type=Path, help="the last whole sweep's log")
    ap.add_argument("reruns", type=Path, nargs="+", help="logs of re-run launches, later ones win")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows, origin = compose(args.base, args.reruns)
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(args.out)
    moved = {k: v for k, v in origin.items() if v != args.base.name}
    print(f"{len(rows)} rows -> {args.out} ({len(moved)} from the re-runs: {', '.join(sorted(moved))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
