"""The machine of this tree beside the machine of an earlier commit, on the same launches, in one run.

Why: issue 26 asks for every figure of machine v2 "measured side by side with today's machine in one
run" — tokens the model writes, tokens per warp instruction of the user's PTX program, prompt
tokens, and the fast runtime's tokens per second (v2 must stay within 0.8x of it). This checks the
baseline commit out into a temporary worktree, runs ``bench/machine_weights.py --log`` there and
here on the same kernels (each tree builds or reuses its own cached machine: the cache key is the
compiler version), and prints one table. Every launch is checked bit for bit against the
interpreter by machine_weights.py; a kernel that is not exact in either tree is marked.

    python bench/side_by_side.py --base 695abf7 --shape 2b            # dot, dot_int, the 10-kernel sample
    python bench/side_by_side.py --base 695abf7 --shape test -k vec_add,gcd
    python bench/side_by_side.py --base 3da9e5b --shape 2b -k dot,dot_int  # the two demos only
    python bench/side_by_side.py --from-logs BEFORE.jsonl AFTER.jsonl   # print the table of two logs
    python bench/side_by_side.py --base 695abf7 --shape 2b --runtime-of-this-tree

``--runtime-of-this-tree`` copies this tree's fast runtime (``qwengpu/runtime/fast.py``, which only
reads the stock modules' weights) into the baseline's worktree before it runs, so the two machines
are compared on one runtime: the ratio then says what the machine costs, not what the runtime gained.

Tokens per PTX warp instruction divide the trace's tokens by the reference interpreter's warp
instruction count of the same launch (what the user's kernel costs), as bench/ptx_density.py does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SAMPLE = ("vec_add", "saxpy", "matmul", "smem_reduce", "shfl_reduce", "histogram", "scan_hillis_steele",
          "gcd", "int64_arith", "loop_break")
DEMOS = (("kernels", "dot"), ("bench/kernels", "dot_int"))


def _sweep(tree: Path, shape: str, directory: str, names: list[str], log: Path) -> None:
    """``bench/machine_weights.py`` of ``tree`` on ``names`` of ``directory`` (one thread)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH=str(tree))
    cmd = [sys.executable, "bench/machine_weights.py", "--shape", shape, "--dir", str(tree / directory),
           "-k", ",".join(names), "--log", str(log), "--no-layout", "--threads", "1",
           "--max-passes", "10000000"]
    print(f"[{tree}] {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)


def _rows(log: Path) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                rows[r["kernel"]] = r
    return rows


def ptx_counts(items: list[tuple[str, str]]) -> dict[str, int]:
    """The interpreter's warp-instruction count of each launch (the user's PTX program)."""
    from qwengpu.runner import run_kernel

    out = {}
    for directory, name in items:
        d = ROOT / directory
        res = run_kernel(d / f"{name}.cu", d / f"{name}.json", engine="interp")
        out[name] = int(res.stats["warp_instructions"])
    return out


def table(before: dict[str, dict], after: dict[str, dict], ptx: dict[str, int], names: list[str]) -> str:
    """The markdown table: per kernel and the sample's totals."""
    head = ("| kernel | PTX warp instr. | tokens before | tokens after | per PTX instr. before | after "
            "| prompt before | prompt after | tok/s before | tok/s after | tok/s ratio |")
    lines = [head, "|" + "---|" * 11]
    tot = {"b": 0, "a": 0, "p": 0, "sb": 0.0, "sa": 0.0}
    for k in names:
        b, a, n = before.get(k, {}), after.get(k, {}), ptx.get(k, 0)

        def cell(r: dict, key: str) -> str:
            if r.get("status") not in ("exact",):
                return f"({r.get('status', 'missing')})"
            return f"{r[key]:,}"

        def dens(r: dict, n: int = n) -> str:
            return f"{r['tokens'] / n:.1f}" if r.get("status") == "exact" and n else "-"

        def tps(r: dict) -> float:
            return float(r.get("tokens_per_second") or 0.0)

        ratio = f"{tps(a) / tps(b):.2f}" if tps(a) and tps(b) else "-"
        lines.append(f"| {k} | {n:,} | {cell(b, 'tokens')} | {cell(a, 'tokens')} | {dens(b)} | {dens(a)} | "
                     f"{cell(b, 'prompt_tokens')} | {cell(a, 'prompt_tokens')} | {tps(b):,.0f} | "
                     f"{tps(a):,.0f} | {ratio} |")
        if k in SAMPLE and b.get("status") == "exact" and a.get("status") == "exact":
            tot["b"] += b["tokens"]
            tot["a"] += a["tokens"]
            tot["p"] += n
            tot["sb"] += b["tokens"] / tps(b) if tps(b) else 0.0
            tot["sa"] += a["tokens"] / tps(a) if tps(a) else 0.0
    if tot["p"]:
        rb, ra = tot["b"] / tot["sb"] if tot["sb"] else 0.0, tot["a"] / tot["sa"] if tot["sa"] else 0.0
        inside = [k for k in names if k in SAMPLE]
        label = "10-kernel sample" if len(inside) == len(SAMPLE) else f"{len(inside)} of the sample"
        lines.append(f"| **{label}** | {tot['p']:,} | {tot['b']:,} | {tot['a']:,} | "
                     f"**{tot['b'] / tot['p']:.1f}** | **{tot['a'] / tot['p']:.1f}** | | | {rb:,.0f} | "
                     f"{ra:,.0f} | {ra / rb if rb else 0:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="695abf7", help="the baseline commit (default: the last v1 machine)")
    ap.add_argument("--shape", default="2b", choices=["test", "2b"])
    ap.add_argument("-k", default="", help="kernels of kernels/ (comma-separated; default: the sample)")
    ap.add_argument("--out", type=Path, help="keep the two logs here (BEFORE.jsonl, AFTER.jsonl)")
    ap.add_argument("--from-logs", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--runtime-of-this-tree", action="store_true",
                    help="run the baseline's machine on this tree's fast runtime (qwengpu/runtime/fast.py)")
    args = ap.parse_args(argv)
    names = args.k.split(",") if args.k else list(SAMPLE)
    demos = {n for _, n in DEMOS}  # -k dot,dot_int: the demos from their own folders
    items = [d for d in DEMOS if not args.k or d[1] in names]
    items += [("kernels", n) for n in names if n not in demos]
    if args.from_logs:
        before, after = (_rows(p) for p in args.from_logs)
    else:
        out = args.out or Path(tempfile.mkdtemp(prefix="side_by_side_"))
        out.mkdir(parents=True, exist_ok=True)
        logs = {"before": out / "BEFORE.jsonl", "after": out / "AFTER.jsonl"}
        with tempfile.TemporaryDirectory(prefix="qwengpu_base_") as tmp:
            base = Path(tmp) / "tree"
            subprocess.run(["git", "worktree", "add", "-q", "--detach", str(base), args.base], cwd=ROOT,
                           check=True)
            if args.runtime_of_this_tree:
                fast = "qwengpu/runtime/fast.py"
                (base / fast).write_bytes((ROOT / fast).read_bytes())
            try:
                for which, tree in (("before", base), ("after", ROOT)):
                    by_dir: dict[str, list[str]] = {}
                    for d, n in items:
                        by_dir.setdefault(d, []).append(n)
                    for d, ns in by_dir.items():
                        _sweep(tree, args.shape, d, ns, logs[which])
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False)
        before, after = _rows(logs["before"]), _rows(logs["after"])
        print(f"logs: {logs['before']} {logs['after']}", file=sys.stderr)
    ptx = ptx_counts(items)
    same = " (its machine on this tree's fast runtime)" if args.runtime_of_this_tree else ""
    print(f"shape {args.shape}; before = {args.base}{same}, after = this tree\n")
    print(table(before, after, ptx, [n for _, n in items]))
    print(f"\ncommand: python bench/side_by_side.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
