"""Issue 26's natural-size launches against the machine in the weights: what each needs, what the
machine has, and the machine's own refusal; with ``--run``, the three kernels at the largest sizes
the machine allows (``fitting_specs``: all three at their natural sizes since the read-only words:
the 8,192-element vector add in 32 blocks of 256 threads, the 256-thread block summing 4,000 ints,
the 64 x 48 transpose in 16 x 16 blocks), inside the 2B model.

    python bench/natural_sizes.py                 # the table (seconds; no model)
    python bench/natural_sizes.py --run --json    # and the fitting launches in the model (minutes)
    python bench/natural_sizes.py --run --only sum   # one of them

The three launches (``bench/natural/``; expected values from NumPy in their specs, checked on the
interpreter here): a float vector add over 8,192 elements in 32 blocks of 256 threads; one
256-thread block summing 4,000 ints through shared memory (a tree with ``__syncthreads``); a 64 x 48
float transpose in 16 x 16 blocks through a padded 16 x 17 shared tile. Columns: threads per block
and whether the kernel waits at block barriers (the machine holds 64 threads at once: a larger block
runs in parts one after another, or with barriers as one machine block whose threads take its warps
in turns, their live values kept in global memory), the global-memory words the launch's
buffers take (guards included) and the shared words per block, each against the machine's, and the
refusal ``qwengpu run`` prints (the first limit the lowering meets).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NATURAL = ROOT / "bench" / "natural"
LAUNCHES = ["vadd_8192", "block_sum_4000", "transpose_64x48"]


def needs(name: str, shape) -> dict:
    """What the launch needs, the interpreter's check, and the 2B machine's refusal (None: fits)."""
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.codegen.softmem import buffers_end, shared_size
    from qwengpu.cuda import COMPILE_OPTIONS, compile_file
    from qwengpu.ptx.inline import inline_calls
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.runner import machine_limit_reason, run_kernel
    from qwengpu.simt.interp import _find_kernel
    from qwengpu.simt.memory import place_module_globals
    from qwengpu.spec import bind, load_spec

    cu, js = NATURAL / f"{name}.cu", NATURAL / f"{name}.json"
    spec = load_spec(js)
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS), source_name=f"{cu.name} (PTX)")
    fn = _find_kernel(module, spec.kernel)
    prog = lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])
    bound = bind(spec, inline_calls(module, fn))
    place_module_globals(bound.gmem, prog.layout.global_vars)
    ref = run_kernel(cu, js)
    return {
        "launch": name,
        "grid": list(spec.grid),
        "block": list(spec.block),
        "threads_per_block": int(np.prod(spec.block)),
        "barriers": any(x.op == "bar" for x in prog.code),
        "global_words": buffers_end(bound.gmem),
        "shared_words": (shared_size(prog, spec.shared_bytes) + 3) // 4,
        "interpreter": "pass" if not ref.mismatches else "FAIL",
        "machine": machine_limit_reason(module, fn, spec, shape) or "fits",
    }


#: the sizes of the three launches the 2B machine runs: all three natural (the vector add's 8,192
#: elements in 32 blocks of 256 threads need 24,588 words: its two inputs go to the read-only words,
#: its output stays in the 16,384 writable ones; 5,120 in 20 blocks was the most before them)
FIT_ELEMENTS, FIT_BLOCKS = 8192, 32
FIT_SUM = 4000
FIT_W, FIT_H = 64, 48


def fitting_specs() -> dict[str, tuple[str, dict, dict[str, list[int]]]]:
    """{name: (kernel file stem, spec, expected output bits)} of the launches at the fitting sizes;
    expected values from NumPy."""
    out = {}
    spec = json.loads((NATURAL / "vadd_8192.json").read_text())
    n = FIT_ELEMENTS
    a, b = (np.array(x["data"][:n], dtype=np.float32) for x in spec["args"][:2])
    spec.update(grid=FIT_BLOCKS, block=256)
    spec["args"][0]["data"], spec["args"][1]["data"] = a.tolist(), b.tolist()
    spec["args"][2]["size"], spec["args"][3]["value"] = n, n
    spec["expected"] = {"c": (a + b).tolist()}
    out[f"vadd {n:,} elements, {FIT_BLOCKS} blocks of 256 threads"] = (
        "vadd_8192", spec, {"c": (a + b).view(np.uint32).tolist()})
    spec = json.loads((NATURAL / "block_sum_4000.json").read_text())
    x = np.array(spec["args"][0]["data"][:FIT_SUM], dtype=np.int64)
    spec["args"][0]["data"], spec["args"][1]["value"] = x.tolist(), FIT_SUM
    spec["expected"] = {"out": [int(x.sum())]}
    out[f"block sum of {FIT_SUM:,} ints, one block of 256 threads"] = (
        "block_sum_4000", spec, {"out": [int(x.sum()) & 0xFFFFFFFF]})
    spec = json.loads((NATURAL / "transpose_64x48.json").read_text())
    m = np.array(spec["args"][0]["data"], dtype=np.float32)[: FIT_W * FIT_H].reshape(FIT_H, FIT_W)
    spec.update(grid=[FIT_W // 16, FIT_H // 16, 1])
    spec["args"][0]["data"], spec["args"][1]["size"] = m.reshape(-1).tolist(), FIT_W * FIT_H
    spec["args"][2]["value"], spec["args"][3]["value"] = FIT_W, FIT_H
    spec["expected"] = {"out": m.T.reshape(-1).tolist()}
    out[f"{FIT_W} x {FIT_H} transpose, {FIT_W // 16} x {FIT_H // 16} blocks of 16 x 16 threads"] = (
        "transpose_64x48", spec, {"out": m.T.reshape(-1).view(np.uint32).tolist()})
    return out


def run_fitting(model, cfg, only: str = "") -> list[dict]:
    """The three launches at the sizes memory allows (``fitting_specs``), inside the model; outputs
    against NumPy's, bit for bit."""
    import tempfile

    from qwengpu.model.configs import shape_for
    from qwengpu.runtime.engine import launch_shape, prepare, run_machine
    from qwengpu.spec import load_spec

    rows = []
    for name, (stem, spec, want) in fitting_specs().items():
        if only and only not in name:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            js = Path(tmp) / f"{stem}.json"
            js.write_text(json.dumps(spec))
            cu = NATURAL / f"{stem}.cu"
            prompt = prepare(cu, js, shape=shape_for(cfg))[2]
            threads, parts = launch_shape(prompt, load_spec(js))
            t0 = time.perf_counter()
            run = run_machine(cu, js, model=model, config=cfg, max_tokens=2_000_000)
            secs = time.perf_counter() - t0
        got = {k: np.asarray(run.outputs[k]).view(np.uint32).tolist() for k in want}
        rows.append({
            "launch": name,
            "machine_blocks": f"{parts} machine block(s) of {threads} threads per block",
            "exact": bool(run.passed and got == want),
            "tokens": run.stats["tokens"],
            "prompt_tokens": run.stats["prompt_tokens"],
            "warp_instructions": run.stats["warp_instructions"],
            "seconds": round(secs, 1),
            "tokens_per_second": round(run.stats["tokens"] / secs, 1),
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="store_true",
                    help="also run the three launches at the sizes memory allows in the 2B model")
    ap.add_argument("--only", default="", help="with --run: only the fitting launch whose name holds this")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    args = ap.parse_args(argv)
    from qwengpu.model.configs import machine_2b_config, shape_for

    cfg = machine_2b_config()
    shape = shape_for(cfg)
    rows = [needs(n, shape) for n in LAUNCHES]
    from qwengpu.isa.limits import shared_words_for

    shared = shared_words_for(shape.gmem_words)
    total = shape.gmem_words + shape.ro_words
    out: dict = {"machine": {"threads_at_once": shape.threads, "global_words": total,
                             "writable_words": shape.gmem_words, "shared_words": shared}, "natural": rows}
    if args.run:
        import torch

        from qwengpu.runtime.engine import machine_model

        torch.set_num_threads(2)
        out["fitting"] = run_fitting(machine_model(cfg)[1], cfg, args.only)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"command: python bench/natural_sizes.py{' --run' if args.run else ''}\n")
    print(f"| launch | grid x block | barriers | global words (machine: {total:,}, "
          f"{shape.gmem_words:,} writable) | "
          f"shared words ({shared:,}) | interpreter | the machine in the weights |")
    print("|---|---|---|---:|---:|---|---|")
    for r in rows:
        print(f"| {r['launch']} | {r['grid']} x {r['block']} | {'yes' if r['barriers'] else 'no'} | "
              f"{r['global_words']:,} | {r['shared_words']:,} | {r['interpreter']} | {r['machine']} |")
    for f in out.get("fitting", []):
        print(f"\n{f['launch']} ({f['machine_blocks']}) in the 2B model: exact {f['exact']}, "
              f"{f['tokens']:,} tokens written, prompt {f['prompt_tokens']:,}, "
              f"{f['warp_instructions']} warp instructions, {f['seconds']} s with the prompt's prefill "
              f"({f['tokens_per_second']} tokens written per second of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
