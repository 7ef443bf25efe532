"""Did a code-generator change alter any program? A hash of every kernel's prompt on the 2B shape.

The prompt holds the whole program the weights run (ROM rows) and its memory image, so two trees
that give every kernel the same prompt hash run the same tokens in the model: a change that only
lifts a refusal (or touches what no launch reaches) is shown to leave every earlier launch alone
without a model sweep. Refusals are recorded as their message.

    python bench/prompt_hashes.py --out A.json                 # this tree, corpus + external suite
    python bench/prompt_hashes.py --out B.json --compare A.json  # and which kernels differ from A
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def prompt_hashes(dirs: list[Path]) -> dict[str, str]:
    """{spec path: sha256 of its prompt tokens (16 hex digits) or the refusal message}."""
    from qwengpu.errors import QwenGPUError
    from qwengpu.model.configs import shape_named
    from qwengpu.runtime.engine import prepare

    shape = shape_named("2b")  # the 2B shape (every mount), with every unit this tree's machine has
    out: dict[str, str] = {}
    for d in dirs:
        for js in sorted(d.glob("*.json")):
            cu = js.with_suffix(".cu")
            if not cu.exists():
                continue
            key = str(js.relative_to(ROOT)) if js.is_relative_to(ROOT) else str(js)
            try:
                prompt = prepare(cu, js, shape=shape)[2]
                out[key] = hashlib.sha256(json.dumps([int(t) for t in prompt]).encode()).hexdigest()[:16]
            except QwenGPUError as e:
                out[key] = f"refused: {type(e).__name__}: {e}"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", action="append", type=Path,
                    help="spec folders (default: kernels, kernels/external)")
    ap.add_argument("--out", type=Path, required=True, help="write {spec: hash} here (JSON)")
    ap.add_argument("--compare", type=Path, help="an earlier --out file: list the kernels that differ")
    a = ap.parse_args(argv)
    dirs = a.dir or [ROOT / "kernels", ROOT / "kernels" / "external"]
    t0 = time.perf_counter()
    got = prompt_hashes(dirs)
    a.out.write_text(json.dumps(got, indent=0, sort_keys=True) + "\n")
    refused = sum(v.startswith("refused") for v in got.values())
    print(f"{len(got)} launches, {refused} refused, {time.perf_counter() - t0:.0f} s -> {a.out}")
    if a.compare:
        old = json.loads(a.compare.read_text())
        same = [k for k in got if old.get(k) == got[k]]
        print(f"identical prompts to {a.compare}: {len(same)} of {len(got)}")
        for k in sorted(set(got) | set(old)):
            if old.get(k) != got.get(k):
                print(f"  differs: {k}: {old.get(k)} -> {got.get(k)}")
        return 0 if len(same) == len(got) == len(old) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
