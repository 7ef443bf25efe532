"""Snapshot of what the compiler front end, the code generator and both simulators produce for every
kernel of the corpus and the external suite: a hash of each machine program (listing, bank slots,
layout), the machine simulator's and the interpreter's counts and output bits.

Why: a restructuring that claims "behaviour unchanged" compares two snapshots (before and after)
with ``--compare``; any kernel whose program, counts or outputs moved is named.

    python tools/house_snapshot.py --out /tmp/before.json
    python tools/house_snapshot.py --compare /tmp/before.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _outputs_hash(outputs: dict) -> str:
    h = hashlib.sha256()
    for name in sorted(outputs):
        a = outputs[name]
        h.update(name.encode())
        h.update(str(a.dtype).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def snapshot_one(cu: Path, spec_path: Path) -> dict:
    """One kernel's row: program hash, machine counts, interpreter counts, output hashes."""
    from qwengpu.codegen.pipeline import run_machine_sim
    from qwengpu.runner import run_kernel

    row: dict = {"kernel": f"{cu.parent.name}/{cu.stem}"}
    try:
        m = run_machine_sim(cu, spec_path)
        prog = m.program
        text = prog.listing() + "\n" + repr(prog.bank_slots) + "\n" + repr(prog.layout)
        row["program"] = hashlib.sha256(text.encode()).hexdigest()[:16]
        row["machine_instructions"] = len(prog.code)
        row["machine"] = {k: v for k, v in m.stats.items() if k != "seconds"}
        row["machine_outputs"] = _outputs_hash(m.outputs)
        row["machine_mismatches"] = len(m.mismatches)
    except Exception as e:  # noqa: BLE001 - a refusal is part of the snapshot
        row["machine_error"] = f"{type(e).__name__}: {e}"[:300]
    try:
        from qwengpu.runtime.engine import prepare

        _spec, wprog, prompt, _gmem, dump = prepare(cu, spec_path)
        row["weights_program_rows"] = len(wprog.code)
        row["prompt_tokens"] = len(prompt)
        row["prompt"] = hashlib.sha256(repr((prompt, dump)).encode()).hexdigest()[:16]
    except Exception as e:  # noqa: BLE001
        row["weights_error"] = f"{type(e).__name__}: {e}"[:300]
    try:
        r = run_kernel(cu, spec_path)
        row["interp"] = {k: v for k, v in r.stats.items() if "second" not in k and k != "time_s"}
        row["interp_outputs"] = _outputs_hash(r.outputs)
    except Exception as e:  # noqa: BLE001
        row["interp_error"] = f"{type(e).__name__}: {e}"[:300]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the snapshot here (JSON)")
    ap.add_argument("--compare", help="compare with this earlier snapshot; non-zero exit on a difference")
    ap.add_argument("--only", help="only kernels whose name contains this")
    args = ap.parse_args(argv)
    from qwengpu.runner import corpus

    pairs = corpus(ROOT / "kernels") + corpus(ROOT / "kernels" / "external")
    if args.only:
        pairs = [p for p in pairs if args.only in p[0].stem]
    rows = {}
    for i, (cu, js) in enumerate(pairs):
        row = snapshot_one(cu, js)
        rows[row["kernel"]] = row
        print(f"[{i + 1}/{len(pairs)}] {row['kernel']}", file=sys.stderr, flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, sort_keys=True))
    if args.compare:
        old = json.loads(Path(args.compare).read_text())
        bad = [k for k in rows if old.get(k) != rows[k]]
        missing = [k for k in old if k not in rows and not args.only]
        for k in bad:
            print(f"DIFFERENT {k}\n  before: {json.dumps(old.get(k), sort_keys=True)}\n  after:  "
                  f"{json.dumps(rows[k], sort_keys=True)}")
        for k in missing:
            print(f"MISSING {k}")
        print(f"{len(rows) - len(bad)} of {len(rows)} kernels identical; {len(missing)} missing")
        return 1 if bad or missing else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
