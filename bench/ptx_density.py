"""Tokens the model wrote per warp instruction of the user's PTX program.

The machine's own instruction count hides the sequences a PTX instruction lowers to (the dot demo:
17 PTX warp instructions, 96 machine ones on the 2B shape), so a kernel's cost to its user is the
tokens per *PTX* warp instruction, counted by the reference interpreter. This reads the tokens from
a sweep log of ``bench/machine_weights.py`` (no model runs here) and runs each kernel once on the
interpreter for the PTX count.

    python bench/ptx_density.py --log bench/results/corpus_sweep_fold_test.jsonl
    python bench/ptx_density.py --log bench/results/external_sweep_odd2b.jsonl --dir kernels/external

The sample line is the machine-v2 issue's 10-kernel sample (vec_add saxpy matmul smem_reduce
shfl_reduce histogram scan_hillis_steele gcd int64_arith loop_break).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qwengpu.runner import run_kernel  # noqa: E402

SAMPLE = ("vec_add", "saxpy", "matmul", "smem_reduce", "shfl_reduce", "histogram", "scan_hillis_steele",
          "gcd", "int64_arith", "loop_break")


def read_log(path: Path) -> dict[str, dict]:
    """The last row per kernel of a sweep log (a resumed log may repeat a kernel)."""
    rows: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["kernel"]] = row
    return rows


def ptx_count(directory: Path, kernel: str) -> int:
    """The interpreter's warp-instruction count for ``kernel``'s spec (the user's program)."""
    res = run_kernel(directory / f"{kernel}.cu", directory / f"{kernel}.json", engine="interp")
    return int(res.stats["warp_instructions"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", required=True, type=Path,
                    help="a bench/machine_weights.py sweep log (JSON lines)")
    ap.add_argument("--dir", type=Path, default=ROOT / "kernels",
                    help="the kernels the log ran (default kernels/)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = ap.parse_args(argv)
    rows = read_log(args.log)
    table = []
    for kernel, row in sorted(rows.items()):
        if row.get("status") not in ("exact", "approx"):
            continue
        ptx = ptx_count(args.dir, kernel)
        table.append({"kernel": kernel, "tokens": row["tokens"], "ptx_warp_instructions": ptx,
                      "machine_warp_instructions": row["warp_instructions"],
                      "tokens_per_ptx": round(row["tokens"] / ptx, 2)})

    def total(sel: list[dict]) -> dict:
        t = sum(r["tokens"] for r in sel)
        p = sum(r["ptx_warp_instructions"] for r in sel)
        return {"kernels": len(sel), "tokens": t, "ptx_warp_instructions": p,
                "tokens_per_ptx": round(t / p, 1) if p else None}

    sample = [r for r in table if r["kernel"] in SAMPLE]
    summary = {"log": str(args.log), "all": total(table), "sample": total(sample)}
    if args.json:
        print(json.dumps({"summary": summary, "kernels": table}))
        return 0
    print(f"{'kernel':28} {'tokens':>10} {'PTX warp ins':>12} {'machine':>9} {'tokens/PTX':>10}")
    for r in table:
        print(f"{r['kernel']:28} {r['tokens']:>10,} {r['ptx_warp_instructions']:>12,} "
              f"{r['machine_warp_instructions']:>9,} {r['tokens_per_ptx']:>10}")
    for name in ("sample", "all"):
        s = summary[name]
        print(f"{name:>6}: {s['kernels']} kernels, {s['tokens']:,} tokens / "
              f"{s['ptx_warp_instructions']:,} PTX warp instructions = {s['tokens_per_ptx']} tokens per "
              "PTX warp instruction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
