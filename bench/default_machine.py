"""The first command's cost: ``qwengpu run kernels/dot.cu`` cold (empty cache: the machine is built)
and warm (cached), on the default machine (the Qwen3.5-2B shape, no flags) and on ``--shape test``.

Each run is its own process (``python -m qwengpu run K --json``, ``OMP_NUM_THREADS`` as given,
``QWENGPU_MACHINE_SHAPE`` unset), with ``$QWENGPU_CACHE`` pointed at a fresh folder per shape for the
cold run and kept for the warm ones. Reported: the tokens the model wrote, the launch's tokens/s and
seconds (the engine's own count, after the model load), the whole command's wall seconds, its peak
RSS (the child's own ``ru_maxrss``) and the cache folder's size after it.

    python bench/default_machine.py                  # both shapes, 1 cold + 2 warm runs each
    python bench/default_machine.py --shape test --warm 1
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the child: the CLI's own main, then its peak RSS on stderr (ru_maxrss is KiB on Linux)
CHILD = """import resource, sys
from qwengpu.cli import main
rc = main(sys.argv[1:])
print("PEAK_RSS_KIB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(rc)
"""


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_once(kernel: str, shape: str | None, cache: Path, threads: int) -> dict:
    """One ``qwengpu run`` process; its figures."""
    args = ["run", kernel, "--json"] + (["--shape", shape] if shape else [])
    env = {k: v for k, v in os.environ.items() if k != "QWENGPU_MACHINE_SHAPE"}
    env.update(QWENGPU_CACHE=str(cache), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, *args], cwd=ROOT, env=env, capture_output=True,
                       text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"qwengpu {' '.join(args)} failed (exit {p.returncode}):\n{p.stderr[-2000:]}")
    out = json.loads(p.stdout)
    st = out["stats"]
    rss = next(int(ln.split()[1]) for ln in p.stderr.splitlines() if ln.startswith("PEAK_RSS_KIB"))
    return {"tokens": st["tokens"], "launch_s": st["seconds"], "tokens_per_s": st["tokens"] / st["seconds"],
            "wall_s": wall, "peak_rss_gib": rss / 2**20, "cache_gb": _size(cache) / 1e9,
            "passed": out.get("check", {}).get("passed"), "outputs": out["outputs"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default="kernels/dot.cu")
    ap.add_argument("--shape", action="append", choices=["2b", "test"],
                    help="repeatable (default: 2b, as `qwengpu run` with no flag, then test)")
    ap.add_argument("--warm", type=int, default=2, help="warm runs per shape after the cold one")
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of each run")
    ap.add_argument("--cache", help="folder for the caches (default: a temporary one, removed after)")
    args = ap.parse_args()
    shapes = args.shape or ["2b", "test"]
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv), flush=True)
    base = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="qwengpu-bench-"))
    rows = []
    try:
        for shape in shapes:
            cache = base / f"cache-{shape}"
            if cache.exists():
                shutil.rmtree(cache)
            cache.mkdir(parents=True)
            cmd = f"qwengpu run {args.kernel}" + ("" if shape == "2b" else f" --shape {shape}")
            for i in range(1 + args.warm):
                r = run_once(args.kernel, None if shape == "2b" else shape, cache, args.threads)
                run = "cold (builds)" if i == 0 else f"warm {i}"
                rows.append({"command": cmd, "shape": shape, "run": run, **r})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        if not args.cache:
            shutil.rmtree(base, ignore_errors=True)
    print(f"\nOMP_NUM_THREADS={args.threads}, one process per run, {os.cpu_count()} CPUs\n")
    print("| command | run | tokens | launch tokens/s | launch s | total s | peak RSS GiB | cache GB "
          "| check |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| `{r['command']}` | {r['run']} | {r['tokens']:,} | {r['tokens_per_s']:,.1f} | "
              f"{r['launch_s']:.2f} | {r['wall_s']:.1f} | {r['peak_rss_gib']:.2f} | {r['cache_gb']:.2f} | "
              f"{'PASS' if r['passed'] else r['passed']} |")


if __name__ == "__main__":
    main()
