"""The machine in the weights over the corpus: coverage, tokens per warp instruction, the dot demo.

    python bench/machine_weights.py [--dir kernels] [-k NAME] [--max-passes 20000] [--json]

Runs every corpus kernel the machine accepts (``engine.prepare``) inside the compiled model (the
fast runtime, token-identical to the stock model: tests/runtime) and checks its outputs bit for bit
against the reference interpreter. Prints one row per kernel (accepted or the refusal reason,
program size, prompt tokens the host fed, trace tokens the model wrote, warp instructions,
lane-group passes, tokens per warp instruction, tokens/s) and the totals; then the layout (layers,
residual, key heads, parameters) of the test shape and of the Qwen3.5-2B layer shape (compiled
only), the dot-product demo and the process's peak memory. Kernels whose ISA-simulator pass count
(``soft.run_for_weights``) exceeds ``--max-passes`` are listed but not run (minutes each).

``--replay`` also feeds each finished trace back in one teacher-forced prefill on the stock chunked
path (:mod:`qwengpu.runtime.chunked`, which tests/runtime prove equal to the stock prefill) and
checks that every position's argmax is the next trace token (issue 4's replay, for the corpus).
``--log FILE`` appends each kernel's row as one JSON line as soon as it is done (long sweeps); a
run with an existing log skips the kernels it already holds (a sweep can be resumed, also by
several ``--shard I/N`` processes with one log each), and ``--from-log FILE ...`` prints the table
and totals of logs without running anything.

``--model MOUNT`` runs every launch through a mounted checkpoint (``qwengpu build``: the machine's
layers in front of a Qwen3.5, our mounted runtime) instead of the standalone machine, with the same
checks. ``--compare LOG ...`` then sets each kernel's prompt tokens, trace tokens, warp instructions
and lane-group passes beside the rows of earlier logs (``bench/results/corpus_replay.jsonl``) and
exits 1 when any differs or a kernel of the earlier logs is missing (a restructuring or a mount that
claims "the same machine" shows it on the whole corpus).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _layout(config) -> dict:
    from qwengpu.compiler import compile_circuit
    from qwengpu.compiler.report import LayoutReport
    from qwengpu.machine.circuit import build_machine, mlp_reserve
    from qwengpu.model.configs import shape_for

    t0 = time.perf_counter()
    shape = shape_for(config)
    comp = compile_circuit(build_machine(shape), config, mlp_reserve=mlp_reserve(shape))
    r = LayoutReport.of(comp)
    return {
        "layers": r.n_layers,
        "residual_peak": r.peak_live,
        "residual_available": r.available_dims,
        "key_heads": sum(x.heads or 0 for x in r.layers),
        "mlp_neurons": r.total_neurons,
        "compile_seconds": round(time.perf_counter() - t0, 1),
    }


def _provenance(config=None) -> dict:
    """What every log row records: the commit (and whether the tree had uncommitted changes) and
    the machine's compiler version, so a figure can be traced to the code that produced it."""
    import subprocess

    from qwengpu.model.machine_checkpoint import compiler_version

    def git(*a: str) -> str:
        try:
            out = subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=True)
            return out.stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {"commit": git("rev-parse", "--short=12", "HEAD") + ("+dirty" if dirty else ""),
            "compiler_version": compiler_version(config)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=str(ROOT / "kernels"))
    ap.add_argument("-k", default="", help="only kernels whose name contains this (several: comma-separated)")
    ap.add_argument("--max-passes", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shape", default=None, choices=["2b", "test"],
                    help="the standalone machine's layer shape: Qwen3.5-2B's (the default, as `qwengpu run`; "
                    "$QWENGPU_MACHINE_SHAPE overrides it) or test")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--replay", action="store_true", help="also replay each trace on the chunked path")
    ap.add_argument("--log", help="append each kernel's row to this file as a JSON line")
    ap.add_argument("--no-layout", action="store_true", help="skip compiling the two layouts")
    ap.add_argument("--shard", default="0/1", metavar="I/N",
                    help="run only the kernels whose corpus index is I mod N (several 1-thread processes)")
    ap.add_argument("--from-log", nargs="+", metavar="FILE",
                    help="run nothing: print the table and totals of the rows in these --log files")
    ap.add_argument("--model", metavar="MOUNT",
                    help="run the launches through this mounted checkpoint (qwengpu build) instead")
    ap.add_argument("--compare", nargs="+", metavar="LOG",
                    help="compare each kernel's token counts with these earlier logs; exit 1 on a difference")
    args = ap.parse_args()
    shard, nshards = (int(x) for x in args.shard.split("/"))
    torch.set_num_threads(args.threads)

    from qwengpu.codegen.soft import Options, run_for_weights
    from qwengpu.codegen.softcore import unit_options
    from qwengpu.errors import QwenGPUError
    from qwengpu.model.configs import machine_2b_config
    from qwengpu.runner import corpus, run_kernel
    from qwengpu.runtime.engine import (
        machine_config,
        machine_model,
        prepare,
        run_machine,
        shape_for,
        test_config,
        token_census,
    )
    from qwengpu.shapes import resolve_shape_name
    from qwengpu.spec import load_spec

    args.shape = resolve_shape_name(args.shape)
    mconfig = machine_config(args.shape)
    mshape = shape_for(mconfig)

    cmd = "python bench/machine_weights.py " + " ".join(sys.argv[1:])
    t0 = time.perf_counter()
    model, chunked, params, mount = None, None, 0, None
    if args.model and args.replay:
        ap.error("--replay replays the standalone machine's prefill; it does not combine with --model")
    if args.model and not args.from_log:
        from qwengpu.runtime.mounted import mounted_model

        mount = mounted_model(args.model)
        params = sum(int(np.prod(s)) for s in _mount_shapes(args.model))
    elif not args.from_log:
        _, model = machine_model(mconfig)
        params = sum(p.numel() for p in model.parameters())
        if args.replay:
            from qwengpu.runtime.chunked import ChunkedModel, replay

            chunked = ChunkedModel(model)
    load_s = time.perf_counter() - t0
    rows = []
    items = [] if args.from_log else corpus(args.dir)
    if args.from_log:
        for path in args.from_log:
            rows += [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        rows.sort(key=lambda r: r["kernel"])
        chunked = True if any("replay" in r for r in rows) else None
    items = [(cu, spec) for cu, spec in items if any(k in cu.stem for k in args.k.split(","))]
    if nshards > 1:  # balance by the ISA simulator's pass counts: biggest first, to the lightest shard
        def passes(item) -> int:
            try:
                return run_for_weights(*item).stats["passes"]
            except QwenGPUError:
                return 0

        load = [0] * nshards
        mine = set()
        for cost, cu in sorted(((passes(it), it[0]) for it in items), key=lambda x: (-x[0], x[1].stem)):
            j = load.index(min(load))
            load[j] += cost + 200  # (+ the prompt and setup of a launch)
            if j == shard:
                mine.add(cu)
        items = [it for it in items if it[0] in mine]
    if args.log and Path(args.log).exists() and not args.from_log:  # resume: the log's kernels are done
        lines = Path(args.log).read_text().splitlines()
        done = {json.loads(line)["kernel"] for line in lines if line.strip()}
        items = [(cu, spec) for cu, spec in items if cu.stem not in done]
    provenance = _provenance(mconfig) | ({"shape": args.shape} if args.shape != "test" else {})
    provenance |= {"mount": str(args.model)} if args.model else {}
    for cu, spec in items:
        row: dict = {"kernel": cu.stem, **provenance}
        try:
            _, prog, prompt, _, _ = prepare(cu, spec, mshape)
        except QwenGPUError as exc:
            row.update(status="refused", detail=str(exc).splitlines()[0][:90])
            rows.append(row)
            continue
        row.update(instructions=len(prog.code), prompt_tokens=len(prompt))
        try:
            opts = Options(**unit_options(mshape))
            sim = run_for_weights(cu, spec, options=opts)
        except QwenGPUError:  # lowered without the multiplier (softmem.lower_for_weights): its count
            sim = run_for_weights(cu, spec)
        if sim.stats["passes"] > args.max_passes:
            row.update(status="not run", detail=f"{sim.stats['passes']:,} passes > --max-passes")
            rows.append(row)
            continue
        if mount is not None:
            run = mount.launch(cu, spec, max_tokens=60 * sim.stats["passes"] + 1000)
        else:
            run = run_machine(cu, spec, model=model, config=mconfig,
                              max_tokens=60 * sim.stats["passes"] + 1000)
        ref = run_kernel(cu, spec)
        same = all(  # bit for bit, any element width (a 1-byte bool buffer has no uint32 view)
            np.asarray(run.outputs[n]).dtype == np.asarray(ref.outputs[n]).dtype
            and np.asarray(run.outputs[n]).tobytes() == np.asarray(ref.outputs[n]).tobytes()
            for n in ref.outputs
        )
        st = run.stats
        tol = load_spec(spec).tolerance_ulp
        # "exact": bit-identical to the interpreter and to the independent expected values; a kernel
        # with approximate instructions (tolerance_ulp) is bit-identical to the interpreter's *model*
        # of them and only within tolerance of the true values: "approx", as `qwengpu check` says
        status = ("approx" if tol else "exact") if same and run.passed else "WRONG"
        row.update(
            status=status,
            expected=f"within {tol} ulp" if tol else "bit-exact",
            tokens=st["tokens"],
            warp_instructions=st["warp_instructions"],
            passes=st["passes"],
            tokens_per_warp_instruction=st["tokens_per_warp_instruction"],
            tokens_per_second=round(st["tokens"] / max(st["seconds"], 1e-9), 1),
            addresses_checked=st.get("addresses_checked"),
            token_kinds=token_census(run.trace),
        )
        if "bounds_false_alarm" in st:  # the bounds watch misread the trace (a defect: report it)
            row.update(status="WRONG", detail=f"bounds watch false alarm: {st['bounds_false_alarm']}")
        if chunked is not None:
            rep = replay(chunked, run.prompt, run.trace)
            row.update(replay="equal" if rep["equal"] else f"DIFFERS at trace token {rep['first_mismatch']}",
                       replay_tokens=rep["tokens"],
                       replay_tokens_per_second=round(rep["tokens"] / max(rep["seconds"], 1e-9), 1))
        rows.append(row)
        if args.log:
            with open(args.log, "a") as f:
                f.write(json.dumps(row) + "\n")
        if not args.json:
            print(
                f"  {cu.stem:24s} {row['status']:6s} {st['tokens']:>8,} tokens"
                + (f", chunked replay {row['replay']}" if chunked is not None else ""),
                file=sys.stderr, flush=True,
            )
    ran = [r for r in rows if "tokens" in r]
    tot_tok = sum(r["tokens"] for r in ran)
    tot_wi = sum(r["warp_instructions"] for r in ran)
    summary = {
        "kernels": len(rows),
        "exact": sum(r["status"] == "exact" for r in rows),
        "approx": sum(r["status"] == "approx" for r in rows),
        "wrong": sum(r["status"] == "WRONG" for r in rows),
        "refused": sum(r["status"] == "refused" for r in rows),
        "not_run": sum(r["status"] == "not run" for r in rows),
        "tokens": tot_tok,
        "warp_instructions": tot_wi,
        "tokens_per_warp_instruction": round(tot_tok / max(tot_wi, 1), 2),
        "replayed_equal": sum(r.get("replay") == "equal" for r in rows) if chunked is not None else None,
        "replay_tokens": sum(r.get("replay_tokens", 0) for r in rows) if chunked is not None else None,
        "model_load_or_build_seconds": round(load_s, 1),
        "model_parameters": params,
        "model_bytes_fp32": 4 * params,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    layouts = {}
    if not args.no_layout and not args.from_log:
        layouts["test shape"] = _layout(test_config())
        try:
            layouts["Qwen3.5-2B layer shape"] = _layout(machine_2b_config())
        except QwenGPUError as exc:  # pragma: no cover - report, do not hide
            layouts["Qwen3.5-2B layer shape"] = {"error": str(exc)}
    dot = next((r for r in rows if r["kernel"] == "dot"), None)
    out = {"command": cmd, "summary": summary, "layouts": layouts, "dot": dot, "rows": rows}
    if args.json:
        print(json.dumps(out))
        return
    print(f"$ {cmd}")
    print(
        f"{'kernel':24s} {'status':7s} {'instr':>6s} {'prompt':>7s} {'tokens':>8s} {'warp ins':>8s} "
        f"{'passes':>7s} {'tok/wi':>6s} {'tok/s':>7s}" + ("  chunked replay (tok/s)" if chunked else "")
        + "  detail"
    )
    for r in rows:
        if "tokens" in r:
            print(
                f"{r['kernel']:24s} {r['status']:7s} {r['instructions']:>6} {r['prompt_tokens']:>7,} "
                f"{r['tokens']:>8,} {r['warp_instructions']:>8,} {r['passes']:>7,} "
                f"{r['tokens_per_warp_instruction']:>6.2f} {r['tokens_per_second']:>7.1f}"
                + (f"  {r['replay']} ({r['replay_tokens_per_second']:.0f})" if "replay" in r else "")
            )
        else:
            print(
                f"{r['kernel']:24s} {r['status']:7s} {r.get('instructions', ''):>6} "
                f"{r.get('prompt_tokens', ''):>7} {'':>8s} {'':>8s} {'':>7s} {'':>6s} {'':>7s}  {r['detail']}"
            )
    s = summary
    print(
        f"\n{s['exact']} exact, {s['approx']} approx (bit-identical to the interpreter's model of the "
        f"approximate instructions, within tolerance of the true values), {s['wrong']} wrong, "
        f"{s['not_run']} accepted but not run, "
        f"{s['refused']} refused (of {s['kernels']}); {s['tokens']:,} tokens for "
        f"{s['warp_instructions']:,} warp instructions = {s['tokens_per_warp_instruction']} tokens per "
        "warp instruction"
    )
    if chunked is not None:
        print(f"chunked-path replay: {s['replayed_equal']} of {len(ran)} traces reproduced at every position "
              f"({s['replay_tokens']:,} prefill tokens)")
    if args.from_log:
        missing = sorted({cu.stem for cu, _ in corpus(args.dir)} - {r["kernel"] for r in rows})
        print(f"not in the logs ({len(missing)} corpus kernels): {', '.join(missing) or '-'}")
    for name, lay in layouts.items():
        print(f"layout, {name}: " + ", ".join(f"{k} {v}" for k, v in lay.items()))
    if dot and "tokens" in dot:
        print(f"dot demo: the model wrote {dot['tokens']} tokens (host fed {dot['prompt_tokens']} tokens)")
    else:
        why = f"{dot['status']}: {dot.get('detail', '')}" if dot else "not in the corpus"
        print(f"dot demo: {why}")
    if params:
        print(
            f"model: {params / 1e9:.2f} B parameters ({4 * params / 2**30:.1f} GiB fp32), loaded/built in "
            f"{load_s:.1f} s; peak RSS {s['peak_rss_bytes'] / 2**30:.1f} GiB"
        )

    if args.compare:
        sys.exit(_compare(rows, args.compare))


COMPARED = ("prompt_tokens", "tokens", "warp_instructions", "passes")


def _compare(rows: list[dict], logs: list[str]) -> int:
    """Set each kernel's counts beside the earlier logs' rows; 1 when any differs or is missing."""
    before: dict[str, dict] = {}
    for path in logs:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                before[r["kernel"]] = r
    now = {r["kernel"]: r for r in rows}
    same, bad = 0, []
    for name in sorted(before):
        b, r = before[name], now.get(name)
        if "tokens" not in b:
            continue
        if r is None or "tokens" not in r:
            bad.append(f"{name}: in the earlier log, not run now ({(r or {}).get('status', 'missing')})")
            continue
        diff = [f"{k} {b.get(k)} -> {r.get(k)}" for k in COMPARED if b.get(k) != r.get(k)]
        if r["status"] not in ("exact", "approx"):
            diff.append(f"status {r['status']}")
        if diff:
            bad.append(f"{name}: " + ", ".join(diff))
        else:
            same += 1
    print(f"compared with {', '.join(logs)}: {same} of {same + len(bad)} kernels have the same "
          f"{', '.join(COMPARED)} and ran exact")
    for line in bad:
        print("  DIFFERS " + line)
    return 1 if bad else 0


def _mount_shapes(path: str) -> list[tuple[int, ...]]:
    """Every tensor shape of a mounted checkpoint (read from the safetensors headers only)."""
    from safetensors import safe_open

    shapes = []
    for f in sorted(Path(path).glob("*.safetensors")):
        with safe_open(str(f), framework="np") as h:
            shapes += [tuple(h.get_slice(k).get_shape()) for k in h.keys()]
    return shapes

if __name__ == "__main__":
    main()
