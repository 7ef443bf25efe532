"""Token census: where the tokens the model writes go, per kernel and in total.

    python bench/token_census.py --from-log bench/results/corpus_sweep.jsonl   # rows of a sweep
    python bench/token_census.py -k dot                                        # run launches now
    python bench/token_census.py --from-log AFTER.jsonl --before BEFORE.jsonl   # the two, side by side

Every token through the model is a forward pass, so tokens are the cost users pay. Per kernel:
tokens by kind (``qwengpu.runtime.engine.token_census``: PASS, MASK, BANK, result chunks, SHORT /
USHORT, STORE, the dump, control), warp instructions and lane-group passes, tokens per warp
instruction. The kinds are read from the model's own trace (run inside the standalone machine model,
or the ``token_kinds`` of a ``bench/machine_weights.py --log`` row); the host computes nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KINDS = ("pass", "mask", "bank", "result", "short", "store", "dump", "control")


def _run(kdir: Path, sub: str, max_passes: int) -> list[dict]:
    import torch

    from qwengpu.codegen.soft import run_for_weights
    from qwengpu.runner import corpus
    from qwengpu.runtime.engine import machine_model, run_machine, token_census

    torch.set_num_threads(1)
    _, model = machine_model()
    rows = []
    for cu, spec in corpus(kdir):
        if sub not in cu.stem:
            continue
        passes = run_for_weights(cu, spec).stats["passes"]
        if passes > max_passes:
            print(f"  {cu.stem}: {passes:,} passes > --max-passes, skipped", file=sys.stderr)
            continue
        run = run_machine(cu, spec, model=model, max_tokens=60 * passes + 1000)
        rows.append({"kernel": cu.stem, "status": "exact" if run.passed else "WRONG",
                     "tokens": run.stats["tokens"], "prompt_tokens": len(run.prompt),
                     "warp_instructions": run.stats["warp_instructions"], "passes": run.stats["passes"],
                     "token_kinds": token_census(run.trace)})
        print(f"  {cu.stem}: {run.stats['tokens']:,} tokens", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    """The census as a Markdown table, one row per kernel and a total row."""
    head = ["kernel", "tokens", *KINDS, "warp instr", "passes", "tok/warp instr", "prompt"]
    out = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    tot = dict.fromkeys(["tokens", "warp_instructions", "passes", "prompt_tokens", *KINDS], 0)
    for r in rows:
        k = r["token_kinds"]
        out.append("| " + " | ".join([r["kernel"], f"{r['tokens']:,}", *(f"{k[x]:,}" for x in KINDS),
                                      f"{r['warp_instructions']:,}", f"{r['passes']:,}",
                                      f"{r['tokens'] / max(r['warp_instructions'], 1):.2f}",
                                      f"{r.get('prompt_tokens', 0):,}"]) + " |")
        for x in KINDS:
            tot[x] += k[x]
        for x in ("tokens", "warp_instructions", "passes", "prompt_tokens"):
            tot[x] += r.get(x, 0)
    share = [f"{tot[x]:,} ({100 * tot[x] / max(tot['tokens'], 1):.1f} %)" for x in KINDS]
    out.append("| **total** (" + f"{len(rows)} kernels) | {tot['tokens']:,} | " + " | ".join(share)
               + f" | {tot['warp_instructions']:,} | {tot['passes']:,} | "
               f"{tot['tokens'] / max(tot['warp_instructions'], 1):.2f} | {tot['prompt_tokens']:,} |")
    return "\n".join(out)


def _read(paths: list[str], sub: str) -> list[dict]:
    rows = []
    for path in paths:
        rows += [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
    return sorted((r for r in rows if "token_kinds" in r and sub in r["kernel"]), key=lambda r: r["kernel"])


def compare(before: list[dict], after: list[dict]) -> str:
    """Totals by kind before and after, over the kernels both logs ran exactly (a kernel only one
    of them ran is left out and named), and the kernels whose tokens changed most."""
    b, a = {r["kernel"]: r for r in before}, {r["kernel"]: r for r in after}
    both = sorted(k for k in b.keys() & a.keys()
                  if str(b[k].get("status", "exact")).startswith(("exact", "approx"))
                  and str(a[k].get("status", "exact")).startswith(("exact", "approx")))
    keys = ["tokens", *KINDS, "warp_instructions", "passes", "prompt_tokens"]

    def tot(rows: dict, key: str) -> int:
        return sum((rows[k]["token_kinds"][key] if key in KINDS else rows[k].get(key, 0)) for k in both)

    out = [f"{len(both)} kernels in both logs" + (f"; only one: {', '.join(sorted(b.keys() ^ a.keys()))}"
                                                   if b.keys() ^ a.keys() else ""), "",
           "| | before | after | after / before |", "|---|---:|---:|---:|"]
    for key in keys:
        x, y = tot(b, key), tot(a, key)
        out.append(f"| {key.replace('_', ' ')} | {x:,} | {y:,} | {y / max(x, 1):.3f} |")
    tb, ta = tot(b, "tokens"), tot(a, "tokens")
    wb, wa = tot(b, "warp_instructions"), tot(a, "warp_instructions")
    out.append(f"| tokens per machine warp instruction | {tb / max(wb, 1):.2f} | {ta / max(wa, 1):.2f} | |")
    out += ["", "| kernel | tokens before | tokens after | after / before | prompt before | prompt after |",
            "|---|---:|---:|---:|---:|---:|"]
    moved = sorted(both, key=lambda k: a[k]["tokens"] / max(b[k]["tokens"], 1))
    for k in moved[:8] + [k for k in moved[-3:] if k not in moved[:8]]:
        ratio = a[k]["tokens"] / max(b[k]["tokens"], 1)
        out.append(f"| {k} | {b[k]['tokens']:,} | {a[k]['tokens']:,} | {ratio:.3f}"
                   f" | {b[k].get('prompt_tokens', 0):,} | {a[k].get('prompt_tokens', 0):,} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from-log", nargs="+", metavar="FILE", help="rows of bench/machine_weights.py --log")
    ap.add_argument("--dir", default=str(ROOT / "kernels"))
    ap.add_argument("-k", default="", help="only kernels whose name contains this")
    ap.add_argument("--max-passes", type=int, default=20000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--before", nargs="+", metavar="FILE",
                    help="with --from-log: an earlier sweep's rows; prints the two side by side")
    args = ap.parse_args()
    if args.before and not args.from_log:
        ap.error("--before compares with --from-log rows")
    t0 = time.perf_counter()
    if args.from_log:
        rows = []
        for path in args.from_log:
            rows += [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
        missing = [r["kernel"] for r in rows if "tokens" in r and "token_kinds" not in r]
        if missing:
            print(f"token_census: rows without token_kinds (an older log): {', '.join(missing[:5])}",
                  file=sys.stderr)
            return 2
        rows = sorted((r for r in rows if "token_kinds" in r and args.k in r["kernel"]),
                      key=lambda r: r["kernel"])
    else:
        rows = _run(Path(args.dir), args.k, args.max_passes)
    if args.json:
        print(json.dumps(rows))
        return 0
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"command: python bench/token_census.py {' '.join(sys.argv[1:])}   (commit {commit}, "
          f"{time.perf_counter() - t0:.0f} s)\n")
    if args.before:
        before = _read(args.before, args.k)
        if not before:
            print("token_census: --before rows have no token_kinds (an older log)", file=sys.stderr)
            return 2
        print(compare(before, rows))
        return 0
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
