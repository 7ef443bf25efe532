"""Which corpus kernels the machine in the weights accepts: ``engine.prepare()`` per kernel.

    python bench/weights_census.py            # one line per kernel (~3 min)
    python bench/weights_census.py --json     # the same as JSON
    python bench/weights_census.py matmul vote   # only these kernels

For every ``kernels/*.cu`` with its spec: ``ok`` and the ROM program size (machine instructions
after lowering, expansion for the weights, allocation) when ``engine.prepare`` accepts it, else
the exact reason it gives (the first line of the MachineLimitError or other error). Nothing is
run on the model; ``prepare`` only compiles, lowers, expands, allocates and encodes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qwengpu.runner import corpus  # noqa: E402


def census(names: list[str] | None = None) -> list[dict]:
    from qwengpu.runtime import engine

    rows = []
    for cu, spec in corpus(ROOT / "kernels"):
        if names and cu.stem not in names:
            continue
        t0 = time.perf_counter()
        row: dict = {"kernel": cu.stem}
        try:
            _, prog, prompt, _, _ = engine.prepare(cu, spec)
            row.update(ok=True, program=len(prog.code), registers=prog.nregs, prompt_tokens=len(prompt))
        except Exception as e:  # noqa: BLE001 - the census reports every refusal
            row.update(ok=False, reason=f"{type(e).__name__}: {str(e).splitlines()[0]}")
        row["seconds"] = round(time.perf_counter() - t0, 2)
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="*", help="kernel names (default: the whole corpus)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = census(args.kernels or None)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        if r["ok"]:
            print(f"{r['kernel']:24s} ok    program {r['program']:4d}  registers {r['registers']:2d}")
        else:
            print(f"{r['kernel']:24s} NO    {r['reason']}")
    n = sum(r["ok"] for r in rows)
    print(f"\naccepted {n} of {len(rows)}")
    why = Counter(_gist(r["reason"]) for r in rows if not r["ok"])
    for k, v in why.most_common():
        print(f"  {v:3d}  {k}")


def _gist(reason: str) -> str:
    """A short class of a refusal (for the summary)."""
    msg = reason.split(": ", 1)[1] if ": " in reason else reason
    if "cannot run `" in msg:
        return "cannot run " + msg.split("`")[1].split()[0] + " (" + msg.rsplit(": ", 1)[-1] + ")"
    if "the ROM has" in msg or "machine instructions of program" in msg:
        return "program larger than the ROM"
    if "approximate instruction" in msg:
        return "approximate instruction without an exact sequence"
    return msg[:90]


if __name__ == "__main__":
    main()
