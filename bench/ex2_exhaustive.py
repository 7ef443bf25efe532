"""``fex2`` (ex2.approx.f32 in the weights) against ``fp32.ex2_approx`` on EVERY float32 input.

    python bench/ex2_exhaustive.py            # all 2^32 inputs, ftz off and on (~30-40 min, 1 core)
    python bench/ex2_exhaustive.py --quick    # 2^22 random inputs + the interesting ranges (~10 s)
    python bench/ex2_exhaustive.py --start 0x3f000000 --count 0x1000000
    python bench/ex2_exhaustive.py --no-multiplier   # the sequence of a machine without the multiplier
    python bench/ex2_exhaustive.py --no-table        # with the multiplier, without the read-only table

The machine's integer sequence (``softfloat.expand_fex2``) is far too slow to run 2^33 times in
the ISA simulator, so this runs ``qwengpu.codegen.ex2_model``, a NumPy model that computes the
same integers step by step (``tests/machine/test_softfloat.py`` checks model == expanded machine
code bit for bit on thousands of inputs, so the result here transfers to the sequence). The
oracle is the interpreter's model ``qwengpu.simt.fp32.ex2_approx`` (rn(2^x), float64 with an
mpmath fallback near rounding midpoints). Chunks of 2^24 inputs; the rounding-independent core
runs once per chunk, then both ftz variants are compared. Exit status 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qwengpu.codegen import ex2_model  # noqa: E402
from qwengpu.simt import fp32  # noqa: E402

CHUNK = 1 << 24


def check(a: np.ndarray, stats: dict, show: int = 5, multiplier: bool = True, table: bool = True) -> None:
    """Compare model and oracle on the inputs ``a`` for ftz off and on; accumulate in ``stats``.
    ``multiplier``: the sequence of a machine with the multiplier (the 2B shape: the step k = 16
    and ``ex2_model.poly_tail``), else the test shape's (the loop and the one-product tail);
    ``table`` (with the multiplier): and the 2B shape's read-only table of 2^(j/256) for the
    steps k = 1..8 (``ex2_model.TABLE``)."""
    core = ex2_model.core(a, multiplier, table and multiplier)
    for ftz in (False, True):
        got = ex2_model.finish(*core, ftz)
        want = fp32.ex2_approx(a, ftz)
        bad = np.flatnonzero(got != want)
        s = stats[ftz]
        s["checked"] += len(a)
        s["mismatches"] += len(bad)
        for i in bad[: max(0, show - len(s["first"]))]:
            s["first"].append((int(a[i]), int(got[i]), int(want[i])))


def quick_inputs(seed: int = 0) -> np.ndarray:
    """2^22 random bit patterns, biased to the range that is computed (|x| in [2^-32, 256))."""
    rng = np.random.default_rng(seed)
    n = 1 << 22
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    lo, hi = 95 << 23, 135 << 23
    k = n // 2
    sign = rng.integers(0, 2, k).astype(np.uint32) << 31
    a[:k] = rng.integers(lo, hi, k, dtype=np.uint64).astype(np.uint32) | sign
    # every input near the ends of the range: -150, -149, -126, 128, +-2^-25, 0, 1
    near = [0xC3160000, 0xC3150000, 0xC2FC0000, 0x43000000, 0x33000000, 0xB3000000, 0, 0x3F800000, 0xBF800000]
    extra = np.concatenate([np.arange(v - 4096, v + 4096, dtype=np.int64) for v in near]) & 0xFFFFFFFF
    return np.concatenate([a, extra.astype(np.uint32)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a random sample instead of every input")
    ap.add_argument("--start", type=lambda s: int(s, 0), default=0, help="first input (bits)")
    ap.add_argument("--count", type=lambda s: int(s, 0), default=1 << 32, help="number of inputs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-multiplier", action="store_true",
                    help="check the sequence of a machine without the multiplier (the test shape)")
    ap.add_argument("--no-table", action="store_true",
                    help="with the multiplier, without the read-only table (no read-only words)")
    args = ap.parse_args()
    mul = not args.no_multiplier
    tab = mul and not args.no_table
    print(f"sequence: multiplier {mul}, table {tab}", flush=True)
    stats = {f: {"checked": 0, "mismatches": 0, "first": []} for f in (False, True)}
    t0 = time.perf_counter()
    if args.quick:
        check(quick_inputs(args.seed), stats, multiplier=mul, table=tab)
    else:
        start, stop = args.start, min(args.start + args.count, 1 << 32)
        nchunks = -(-(stop - start) // CHUNK)
        for j, lo in enumerate(range(start, stop, CHUNK)):
            hi = min(lo + CHUNK, stop)
            check(np.arange(lo, hi, dtype=np.uint64).astype(np.uint32), stats, multiplier=mul, table=tab)
            el = time.perf_counter() - t0
            bad = stats[False]["mismatches"] + stats[True]["mismatches"]
            print(
                f"[{j + 1:3d}/{nchunks}] 0x{lo:08x}..0x{hi - 1:08x}  mismatches {bad}  "
                f"{el:7.0f} s (eta {el / (j + 1) * (nchunks - j - 1):5.0f} s)",
                flush=True,
            )
    secs = time.perf_counter() - t0
    print()
    print("| ftz | inputs checked | mismatches | seconds |")
    print("|---|---:|---:|---:|")
    for ftz in (False, True):
        s = stats[ftz]
        print(f"| {ftz} | {s['checked']} | {s['mismatches']} | {secs:.0f} |")
    for ftz in (False, True):
        for a, g, w in stats[ftz]["first"]:
            print(f"  ftz={ftz}: a=0x{a:08x}: model 0x{g:08x} fp32.ex2_approx 0x{w:08x}")
    return 1 if any(stats[f]["mismatches"] for f in stats) else 0


if __name__ == "__main__":
    sys.exit(main())
