"""The plan of a mount on the Qwen3.5-2B layer shape, without writing it: the machine's layers, its
used dims, the mounted width and scale, from the cached 2B-shape machine (built first if absent,
~1.5 min, 9.1 GiB). A quick check that the machine of the current compiler (with the multiplier on
this shape, issue 14) still fits the width the mount gives it.

    python bench/mount_plan.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from qwengpu.model.configs import machine_2b_config
    from qwengpu.model.mount import inspect_machine, machine_entry, make_plan

    t0 = time.perf_counter()
    cfg = machine_2b_config()
    machine = inspect_machine(machine_entry(cfg))
    base = json.loads((ROOT / "qwengpu/compiler/configs/qwen3_5_2b_text.json").read_text())
    plan = make_plan(None, base, machine)
    row = {"compiler_version": machine.compiler_version, "machine_shape": machine.shape,
           "machine_layers": plan.Lm, "machine_dims_used": len(machine.used), "base_hidden": plan.H,
           "mounted_hidden": plan.Hp, "c": plan.c, "seconds": round(time.perf_counter() - t0, 1)}
    if args.json:
        print(json.dumps(row))
    else:
        print("command: python bench/mount_plan.py")
        for k, v in row.items():
            print(f"{k:18s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
