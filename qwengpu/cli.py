"""The ``qwengpu`` command: compile, run, check and compare CUDA kernels.

Every failure a user can cause (bad CUDA, unsupported PTX, a wrong launch spec, a faulting
kernel) ends as one ``error:`` line block on stderr and a non-zero exit code — never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from pathlib import Path

from qwengpu import __version__
from qwengpu.cuda import DEFAULT_ARCH
from qwengpu.errors import ExitCode, QwenGPUError, exit_code_table, missing_extra
from qwengpu.shapes import SHAPE_ENV, SHAPE_HELP, SHAPES, resolve_shape_name
from qwengpu.simt.interp import DEFAULT_MAX_STEPS

#: where transformers' optional kernels would change the numbers (stated once, where it matters)
FLA_CAVEAT = (
    "exactness is proven on transformers' own PyTorch paths for Qwen3.5's linear attention and "
    "convolution. Installing flash-linear-attention or causal-conv1d (which transformers suggests) "
    "makes transformers switch to those kernels, whose float rounding differs, so qwengpu does not "
    "use them: keep them out of the environment qwengpu runs in (the warnings suggesting them are "
    "silenced; -v shows them)."
)

EPILOG = """examples:
  qwengpu run kernels/dot.cu                 # inside the model; uses kernels/dot.json beside the source
  qwengpu run k.cu --launch spec.json --json # machine-readable result
  qwengpu run k.cu --engine interp --trace   # the reference interpreter, every warp instruction
  qwengpu check kernels --engine interp      # every spec with "expected", pass/fail table
  qwengpu ptx kernels/saxpy.cu               # print the PTX `run` uses (PTX lines in errors point here)

environment:
  QWENGPU_MACHINE_SHAPE=test   run/check/eval/machine use the small test-shape machine instead of the
                               Qwen3.5-2B-shape one (the default, as every mount; fewer tokens)
  QWENGPU_CACHE=DIR            where the compiled machine and the PTX cache live
                               (default $XDG_CACHE_HOME/qwengpu, else ~/.cache/qwengpu)
"""

#: what each unit flag of ``MachineShape`` means (``machine info``; a flag without a note prints its name)
UNIT_NOTES = {
    "multiplier": "the 4-lane integer multiplier (mul.lo/hi/wide, mad; float multiplies build on it)",
    "fadd": "four float32 adders (add/sub.rn.f32, .ftz)",
    "fmul": "float32 multipliers (mul.rn.f32)",
    "fmulf": "one float32 multiplier for the fast range, a lane per row (mul.rn.f32; fma's range check)",
    "lane_rows": "one-lane rows of any op (an atomic's or sub-word store's lane turns without a loop)",
}

EXIT_EPILOG = "exit codes (the same for every command; `qwengpu exit-codes`):\n" + exit_code_table() + "\n"


def _positive_int(text: str) -> int:
    """argparse type: an integer of at least 1 (a usage error otherwise, exit 2)."""
    try:
        n = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {n}")
    return n


def _add_verbosity(p: argparse.ArgumentParser, top: bool = False) -> None:
    """``-q``/``-v`` on the top level and on every sub-command (before or after the command name)."""
    default = 0 if top else argparse.SUPPRESS
    g = p.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1, default=default,
                   help="results only: no progress, notes or timing lines (errors still go to stderr)")
    g.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1, default=default,
                   help="more detail: stage timings, every stat, and transformers' own warnings")


def _add_verbosity_everywhere(sub) -> None:
    for p in sub.choices.values():
        try:
            _add_verbosity(p)
        except argparse.ArgumentError:  # a parser that defines -q or -v itself
            pass
        for action in p._actions:  # noqa: SLF001 - argparse has no public walk of sub-parsers
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                _add_verbosity_everywhere(action)


def _add_compile_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--arch", default=DEFAULT_ARCH, help=f"virtual architecture (default {DEFAULT_ARCH}, the Tesla T4)"
    )
    p.add_argument("--nvcc", action="store_true", help="compile with nvcc from PATH instead of NVRTC")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="qwengpu",
        description="A SIMT GPU compiled into stock Qwen3.5 layers, with a bit-exact reference interpreter.",
        epilog=EPILOG + "\n" + EXIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--version", action="version", version=f"qwengpu {__version__}")
    _add_verbosity(ap, top=True)
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.add_parser("exit-codes", help="list the exit codes every command uses")

    p = sub.add_parser(
        "ptx",
        help="compile CUDA to PTX and print it (by default exactly the PTX `run` uses, so the PTX "
        "line numbers in errors point into this listing)",
    )
    p.add_argument("kernel", help="CUDA source file (.cu)")
    p.add_argument("-o", "--output", help="write the PTX to this file instead of stdout")
    p.add_argument(
        "--no-lineinfo", action="store_true", help="leave out the line info (.loc) that `run` compiles with"
    )
    p.add_argument("-G", "--debug", action="store_true", help="device debug build (-G: unoptimized, DWARF)")
    p.add_argument("--fast-math", action="store_true", help="compile with --use_fast_math")
    p.add_argument(
        "-X",
        dest="extra",
        action="append",
        default=[],
        metavar="OPTION",
        help="pass one more option to NVRTC/nvcc (repeatable), e.g. -X=-std=c++17",
    )
    _add_compile_flags(p)

    p = sub.add_parser(
        "run",
        help="run one kernel with a launch spec",
        epilog=EPILOG + "\n" + textwrap.fill("numerics: " + FLA_CAVEAT, width=100) + "\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("kernel", help="CUDA source file (.cu)")
    p.add_argument(
        "--launch", metavar="SPEC.json", help="launch spec (default: KERNEL.json beside the source)"
    )
    p.add_argument(
        "--engine",
        default="machine",
        choices=["interp", "machine", "model"],
        help="where to run: the GPU compiled into the model's weights (default), the reference "
        "interpreter (fast), or machine+base model",
    )
    p.add_argument("--model", metavar="DIR", help="--engine model: the mounted checkpoint (`qwengpu build`)")
    p.add_argument("--device", default=None, choices=["cpu", "cuda", "mps"],
                   help="--engine model: where the model runs (--runtime stock; the fast runtime is CPU "
                   "code), refused when the device is absent (default cpu; the interpreter refuses it)")
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                   help="--engine model: launches are exact in float32 only (others are refused; TF32 is "
                   "off on CUDA; default float32; the interpreter refuses it)")
    p.add_argument("--json", action="store_true", help="print one JSON object (outputs, stats, check)")
    p.add_argument("--trace", action="store_true", help="print every warp instruction as it issues (stderr)")
    p.add_argument(
        "--max-steps",
        type=_positive_int,
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help=f"stop a runaway kernel after N warp instructions (a positive integer; default "
        f"{DEFAULT_MAX_STEPS:,})",
    )
    p.add_argument("--progress", action="store_true",
                   help="show the stages (compile, model load, launch) with tokens and tokens/s on stderr "
                   "(the default when stderr is a terminal; -q turns it off)")
    p.add_argument("--shape", default=None, choices=SHAPES,
                   help="--engine machine (and the interpreter's machine-limit note): " + SHAPE_HELP)
    p.add_argument(
        "--runtime",
        default="fast",
        choices=["fast", "stock"],
        help="machine engine: our sparse runtime (proven token-identical) or the stock "
        "transformers forward (slow)",
    )
    p.add_argument(
        "--replay",
        action="store_true",
        help="machine engine: feed the finished trace back in one teacher-forced prefill (the chunked "
        "path) and check that every position's argmax is the next token; non-zero exit otherwise",
    )
    _add_compile_flags(p)

    p = sub.add_parser("check", help='run every spec with "expected" in a folder; non-zero exit on mismatch')
    p.add_argument("dir", help="folder of NAME.cu + NAME.json, or one NAME.cu with its NAME.json beside it")
    p.add_argument(
        "--engine", default="machine", choices=["interp", "machine", "model"],
        help="machine (default: every kernel inside the model; minutes for a corpus) or interp (seconds)",
    )
    p.add_argument("--model", metavar="DIR", help="--engine model: the mounted checkpoint (`qwengpu build`)")
    p.add_argument("-k", metavar="SUBSTR", help="only kernels whose file name contains SUBSTR")
    p.add_argument("--json", action="store_true", help="print one JSON object with every result")
    p.add_argument("--log", metavar="FILE",
                   help="append each kernel's row to FILE as a JSON line as soon as it is done (long sweeps)")
    p.add_argument("--max-steps", type=_positive_int, default=DEFAULT_MAX_STEPS, metavar="N",
                   help="stop a runaway kernel after N warp instructions (a positive integer)")
    p.add_argument("--shape", default=None, choices=SHAPES, help="--engine machine: " + SHAPE_HELP)
    _add_compile_flags(p)

    p = sub.add_parser("machine", help="the GPU compiled into the weights: limits, checkpoint, cache")
    msub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    q = msub.add_parser("info", help="print the machine's real limits and units")
    q.add_argument("--shape", default=None, choices=SHAPES, help=SHAPE_HELP)
    q.add_argument("--json", action="store_true")
    q = msub.add_parser("build", help="write the machine as a stock Qwen3_5ForCausalLM checkpoint folder")
    q.add_argument("--out", required=True, metavar="DIR",
                   help="checkpoint folder to create (must be new or empty)")
    q.add_argument("--shape", default=None, choices=SHAPES,
                   help=SHAPE_HELP + " (2b: compiler/configs/qwen3_5_2b_text.json)")
    q.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint folder")
    q.add_argument("--json", action="store_true")
    q = msub.add_parser("cache", help="list the on-disk caches (machine checkpoints and PTX) in "
                        "$QWENGPU_CACHE, else $XDG_CACHE_HOME/qwengpu, else ~/.cache/qwengpu")
    q.add_argument("--clear", action="store_true",
                   help="remove every machine entry and the PTX cache (asks first on a terminal)")
    q.add_argument("-y", "--yes", action="store_true",
                   help="--clear without asking (needed when not on a terminal)")
    q.add_argument("--json", action="store_true")

    p = sub.add_parser("hwcheck", help="compare every corpus kernel, bit for bit, with a real NVIDIA GPU")
    p.add_argument("dir", nargs="?", default="kernels", help="folder of kernels (default: kernels)")
    p.add_argument("-k", metavar="SUBSTR", help="only kernels whose file name contains SUBSTR")
    p.add_argument("--json", action="store_true")
    p.add_argument("--arch", default=None, help="PTX target (default: the GPU's own compute capability)")
    _add_host_parsers(sub)
    from qwengpu.model.kl import add_parser as _add_kl_parser  # qwengpu kl (qwengpu/model/kl.py)

    _add_kl_parser(sub)
    from qwengpu.model.parsers import add_build_parser, add_verify_parser  # torch-free: build, verify

    add_build_parser(sub)
    add_verify_parser(sub)
    _add_verbosity_everywhere(sub)
    return ap


def _cmd_ptx(args: argparse.Namespace) -> int:
    from qwengpu.cuda import COMPILE_OPTIONS, compile_file

    options = [] if args.no_lineinfo else list(COMPILE_OPTIONS)
    options += ["-G"] * args.debug + ["--use_fast_math"] * args.fast_math + list(args.extra)
    ptx = compile_file(args.kernel, arch=args.arch, use_nvcc=args.nvcc, options=tuple(options))
    if args.output:
        out = Path(args.output)
        tmp = out.with_name(f".{out.name}.tmp")
        try:
            tmp.write_text(ptx)
            tmp.replace(out)  # never a half-written file
        except OSError as exc:
            raise QwenGPUError(f"cannot write {out}: {exc.strerror}") from None
    else:
        sys.stdout.write(ptx)
    return 0


class StageProgress:
    """``rich`` progress on stderr: one line per stage (compile, model load, launch), each with its
    elapsed time; the launch line counts tokens (model engines) or warp instructions (interpreter)
    and its rate over the launch alone. Why: a model load of tens of seconds used to be silent and
    counted into the launch's tokens/s."""

    def __init__(self, keep: bool = True) -> None:
        """``keep=False``: the lines vanish when done (the terminal default; --progress keeps them)."""
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True, highlight=False)
        if not self.console.is_terminal:  # --progress into a pipe or a log: whole lines, no wrapping
            self.console = Console(stderr=True, highlight=False, width=160)
        self.bar = Progress(SpinnerColumn(finished_text="[green]done"), TextColumn("{task.description}"),
                            TimeElapsedColumn(), TextColumn("{task.fields[detail]}"), console=self.console,
                            transient=not keep)
        self.task = None
        self.launch = None
        self.name = ""
        self.bar.start()

    def stage(self, name: str) -> None:
        """Finish the current stage and start ``name``."""
        self._finish()
        self.name = name
        self.task = self.bar.add_task(name, total=None, detail="")
        if name == "launch":
            self.launch = self.task

    def detail(self, text: str) -> None:
        """Free text on the current stage's line (``layer 3/24 written``)."""
        if self.task is not None:
            self.bar.update(self.task, detail=text)

    def update(self, stats) -> None:
        """The launch's count so far: the interpreter's ``Stats`` (warp instructions) or a model
        engine's ``LaunchProgress`` (tokens, and which block of a multi-block launch runs)."""
        if self.task is None:
            return
        if hasattr(stats, "tokens"):
            n, unit = stats.tokens, "tokens"
            where = f", block {stats.block + 1:,} of {stats.blocks:,}" if stats.blocks > 1 else ""
        else:
            n, unit, where = stats.warp_instructions, "warp instructions", ""
        rate = n / max(stats.seconds, 1e-9)
        self.bar.update(self.task, detail=f"{n:,} {unit}, {rate:,.1f} {unit}/s{where}")

    def done(self, stats: dict | None = None) -> None:
        """Close the stages; the launch line gets the engine's own count over its launch time."""
        self._finish()
        if stats and self.launch is not None:
            if "tokens" in stats:
                n, unit, sec = stats["tokens"], "tokens", stats.get("seconds", 0)
            else:
                n, unit, sec = stats.get("warp_instructions", 0), "warp instructions", stats.get("seconds", 0)
            blocks = f", {stats['blocks']:,} blocks" if stats.get("blocks", 0) > 1 else ""
            self.bar.update(self.launch, detail=f"{n:,} {unit}, {n / max(sec, 1e-9):,.1f} {unit}/s{blocks}")
        self.bar.stop()

    def _finish(self) -> None:
        if self.task is not None:
            self.bar.update(self.task, total=1, completed=1)
            self.bar.stop_task(self.task)
        self.task = None


def _fast_kernels_installed() -> list[str]:
    """The optional kernel packages transformers would switch Qwen3.5 to, when installed."""
    import importlib.util

    return [name for mod, name in (("fla", "flash-linear-attention"), ("causal_conv1d", "causal-conv1d"))
            if importlib.util.find_spec(mod) is not None]


def _want_progress(args: argparse.Namespace) -> bool:
    """Progress on stderr when asked (--progress) or when stderr is a terminal, never with -q."""
    if getattr(args, "verbosity", 0) < 0:
        return False
    return bool(getattr(args, "progress", False)) or sys.stderr.isatty()


def _cmd_run(args: argparse.Namespace) -> int:
    from qwengpu.runner import run_kernel

    if args.engine == "interp" and (args.device is not None or args.dtype is not None):
        from qwengpu.runner import refuse_device_dtype

        refuse_device_dtype(args.device, args.dtype)
    trace = (lambda line: print(line, file=sys.stderr)) if args.trace else None
    quiet, verbose = args.verbosity < 0, args.verbosity > 0
    bar = StageProgress(keep=args.progress) if _want_progress(args) and not args.trace else None
    stages: list[tuple[str, float]] = []
    res = None

    def stage(name: str) -> None:
        stages.append((name, time.perf_counter()))
        if bar is not None:
            bar.stage(name)

    try:
        res = run_kernel(
            args.kernel,
            args.launch,
            engine=args.engine,
            arch=args.arch,
            use_nvcc=args.nvcc,
            max_steps=args.max_steps,
            trace=trace,
            progress=bar.update if bar is not None else None,
            model_dir=args.model,
            runtime=args.runtime,
            replay=args.replay,
            device=args.device,
            dtype=args.dtype,
            shape=args.shape,
            stage=stage,
            machine_fit=args.engine == "interp",
        )
    finally:
        if bar is not None:
            bar.done(res.stats if res is not None else None)
    if res.engine != "interp" and not quiet:
        found = _fast_kernels_installed()
        if found:
            print(f"warning: {' and '.join(found)} installed: {FLA_CAVEAT}", file=sys.stderr)
    limit = res.stats.get("machine_limit")
    if limit and not quiet:
        print(f"note: the machine in the weights would refuse this launch ({limit}); "
              "--engine machine/model will not run it", file=sys.stderr)
    if args.json:
        print(json.dumps(res.as_json()))
    else:
        out = res.as_json()
        for name, vals in out["outputs"].items():
            shown = vals if len(vals) <= 64 else [*vals[:64], f"... ({len(vals)} values)"]
            print(f"{name} = {json.dumps(shown)}")
        st = res.stats
        line = f"[{res.engine}] {st['warp_instructions']:,} warp instructions in {st['seconds']:.3f} s"
        if "warp_instructions_per_second" in st:
            line += f" ({st['warp_instructions_per_second']:,}/s)"
        if "tokens" in st:
            line += (
                f"; the model wrote {st['tokens']:,} tokens after a {st['prompt_tokens']:,}-token prompt "
                f"({st['runtime']} runtime, {st['tokens'] / max(st['seconds'], 1e-9):,.1f} tokens/s)"
            )
        if not quiet:
            print(line)
        if verbose:
            ends = [t for _, t in stages[1:]] + [time.perf_counter()]
            for (name, t0), t1 in zip(stages, ends, strict=True):
                print(f"  stage {name}: {t1 - t0:.3f} s")
            print("  stats: " + json.dumps(st))
            if res.engine != "interp":
                print("  numerics: " + FLA_CAVEAT)
        if "chunked_replay" in st and not quiet:
            print(f"chunked-path replay: {st['chunked_replay']} at every position "
                  f"({st['replay_tokens_per_second']:,} tokens/s)")
        if res.approximate and not quiet:
            print(
                f"note: uses approximate instructions ({', '.join(res.approximate)}); "
                "their bits follow our documented model, not NVIDIA's unpublished hardware tables"
            )
        if res.checked:
            if res.passed:
                tol = f" (within {res.spec.tolerance_ulp} ulp)" if res.spec.tolerance_ulp else " (bit-exact)"
                print(f"check: PASS{tol}")
            else:
                print("check: FAIL\n  " + "\n  ".join(res.mismatches))
    return ExitCode.OK if (not res.checked or res.passed) else ExitCode.MISMATCH


def _cmd_check(args: argparse.Namespace) -> int:
    from qwengpu.runner import corpus, run_kernel

    if args.engine == "interp" and (getattr(args, "device", None) or getattr(args, "dtype", None)):
        from qwengpu.errors import UsageError

        raise UsageError("the interpreter takes neither --device nor --dtype (they place the model "
                         "engines' forward pass)")
    one = Path(args.dir)
    if one.suffix == ".cu" and not one.is_dir():
        if not one.is_file() or not one.with_suffix(".json").is_file():
            spec = one.with_suffix(".json")
            raise QwenGPUError(f"{one}: check needs the kernel and its launch spec {spec}")
        items = [(one, one.with_suffix(".json"))]
    else:
        items = corpus(args.dir)
    if args.k:
        items = [(c, j) for c, j in items if args.k in c.name]
    if not items:
        raise QwenGPUError(f"no NAME.cu + NAME.json pairs found in {args.dir}")
    rows = []
    failed = 0
    for cu, spec in items:
        t0 = time.perf_counter()
        try:
            res = run_kernel(
                cu,
                spec,
                engine=args.engine,
                arch=args.arch,
                use_nvcc=args.nvcc,
                max_steps=args.max_steps,
                model_dir=args.model,
                shape=args.shape,
            )
            if not res.checked:
                status, detail = "skip", 'no "expected" in spec'
            elif res.passed:
                status = "approx" if res.spec.tolerance_ulp else "pass"
                detail = f"within {res.spec.tolerance_ulp} ulp" if res.spec.tolerance_ulp else "bit-exact"
            else:
                status, detail = (
                    "FAIL",
                    res.mismatches[0] + (f" (+{len(res.mismatches) - 1})" if len(res.mismatches) > 1 else ""),
                )
            steps = res.stats["warp_instructions"]
            tokens = res.stats.get("tokens")  # what the model wrote (machine and model engines)
        except QwenGPUError as exc:
            status, detail, steps, tokens = "ERROR", str(exc).splitlines()[0], 0, None
        dt = time.perf_counter() - t0
        failed += status in ("FAIL", "ERROR")
        row = {"kernel": cu.stem, "status": status, "warp_instructions": steps, "seconds": round(dt, 3),
               "detail": detail}
        if tokens is not None:
            row["tokens"] = tokens
        rows.append(row)
        if args.log:
            with open(args.log, "a") as f:
                f.write(json.dumps(row) + "\n")
        if not args.json:
            tok = f" {tokens:>9,} tokens" if tokens is not None else ""
            print(f"{status:6s} {cu.stem:28s} {steps:>9,}{tok} {dt:7.2f}s  {detail}", flush=True)
    npass = sum(r["status"] in ("pass", "approx") for r in rows)
    if args.json:
        print(json.dumps({"engine": args.engine, "passed": npass, "failed": failed, "results": rows}))
    else:
        print(
            f"\n{npass} passed, {failed} failed"
            + (f", {len(rows) - npass - failed} skipped" if len(rows) - npass - failed else "")
        )
    return ExitCode.MISMATCH if failed else ExitCode.OK


def _machine_config(shape: str | None):
    from qwengpu.runtime.engine import machine_config

    return machine_config(shape)


def _cmd_machine_build(args: argparse.Namespace) -> int:
    from qwengpu.errors import MachineLimitError
    from qwengpu.model.machine_checkpoint import (
        build_checkpoint,
        check_out_folder,
        compiler_version,
        read_machine_sidecar,
    )

    args.shape = resolve_shape_name(args.shape)
    check_out_folder(args.out, args.overwrite)  # a refusal before the compiler is imported
    from qwengpu.compiler import FitError

    config = _machine_config(args.shape)
    t0 = time.perf_counter()
    bar = StageProgress() if _want_progress(args) else None

    def note(msg: str) -> None:
        if bar is not None:  # one line per stage; the layers count on the writing stage's line
            if msg.startswith("layer ") and bar.task is not None:
                bar.detail(msg)
            else:
                bar.stage(msg)
        elif args.verbosity >= 0:
            print(f"[{time.perf_counter() - t0:6.1f} s] {msg}", file=sys.stderr, flush=True)

    try:
        out = build_checkpoint(args.out, config, overwrite=args.overwrite, progress=note)
    except FitError as e:
        raise MachineLimitError(f"the machine does not fit the {args.shape} layer shape: {e}") from e
    finally:
        if bar is not None:
            bar.done()
    seconds = time.perf_counter() - t0
    meta = read_machine_sidecar(out)
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    info = {"path": str(out), "shape": args.shape, "compiler_version": compiler_version(config),
            "layers": int(json.loads((out / "config.json").read_text())["num_hidden_layers"]),
            "vocab_size": meta["vocab_size"], "bytes": size,
            "build_seconds": meta["build_seconds"], "seconds": round(seconds, 3)}
    if args.json:
        print(json.dumps(info))
    else:
        print(f"wrote {out}: stock Qwen3_5ForCausalLM, {info['layers']} layers, vocab {info['vocab_size']}, "
              f"{size / 1e9:.2f} GB (compiler version {info['compiler_version']}); "
              f"built in {info['build_seconds']:.1f} s, {seconds:.1f} s in all")
        print("load it with transformers.AutoModelForCausalLM.from_pretrained(DIR) (no custom code)")
    return 0


def _confirm(question: str) -> bool:
    """Ask on the terminal; anything but y/yes is no."""
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _cmd_machine_cache(args: argparse.Namespace) -> int:
    from qwengpu.cuda.nvrtc import cache_dir as ptx_dir
    from qwengpu.cuda.nvrtc import clear_ptx_cache, ptx_cache_usage
    from qwengpu.model.machine_checkpoint import cache_entries, cache_root, clear_cache

    root = cache_root()
    rows = cache_entries()  # refuses a cache location that is not a folder
    ptx_files, ptx_bytes = ptx_cache_usage()
    total = sum(r["bytes"] for r in rows) + ptx_bytes
    if args.clear and not args.yes:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            raise QwenGPUError(f"--clear removes {len(rows)} machine entries and {ptx_files} PTX files "
                               f"({total / 1e9:.2f} GB) from {root.parent}: add --yes to confirm")
        if not _confirm(f"remove {len(rows)} machine entries and {ptx_files} PTX files "
                        f"({total / 1e9:.2f} GB) from {root.parent}?"):
            print("nothing removed", file=sys.stderr)
            return ExitCode.ERROR
    if args.clear:
        rows = clear_cache()
        ptx_files, ptx_bytes = clear_ptx_cache()
    if args.json:
        print(json.dumps({"root": str(root), "entries": rows, "cleared": bool(args.clear),
                          "bytes": sum(r["bytes"] for r in rows),
                          "ptx": {"path": str(ptx_dir()), "files": ptx_files, "bytes": ptx_bytes}}))
        return 0
    verb = "removed" if args.clear else "holds"
    print(f"{root} {verb} {len(rows)} entr{'y' if len(rows) == 1 else 'ies'}, "
          f"{sum(r['bytes'] for r in rows) / 1e9:.2f} GB")
    for r in rows:
        state = "" if r["complete"] else "  (incomplete: an interrupted or running build)"
        sizes = (f"hidden {r['hidden_size']}, intermediate {r['intermediate_size']}, {r['layers']} layers"
                 if r.get("hidden_size") else "sizes unknown")
        print(f"  {r['version']:<23} {r['bytes'] / 1e9:7.2f} GB  shape {r['shape_name']:<6} "
              f"{r.get('storage') or '?':<6} ({sizes})  last used {r['last_used']}{state}")
    print(f"{ptx_dir()} {verb} {ptx_files} PTX file{'' if ptx_files == 1 else 's'}, {ptx_bytes / 1e6:.1f} MB")
    return 0


def _cmd_machine(args: argparse.Namespace) -> int:
    if args.action == "build":
        return _cmd_machine_build(args)
    if args.action == "cache":
        return _cmd_machine_cache(args)
    from dataclasses import asdict, fields

    from qwengpu.codegen.lowering.table import refused_opcodes
    from qwengpu.isa.limits import LIMITS, machine_limits, shared_words_for
    from qwengpu.machine import protocol as P
    from qwengpu.machine.shape import MACHINE_UNITS
    from qwengpu.model.configs import SHAPE_DIMS, shape_named

    name = resolve_shape_name(args.shape)
    # the machine this shape compiles: its capacities and units, by name (no torch or transformers
    # import: `machine info` answers at once; a test checks SHAPE_DIMS against the configs)
    shape = shape_named(name)
    hidden, intermediate = SHAPE_DIMS[name]
    refused = refused_opcodes()
    slice_rows = [
        ("threads_per_block", LIMITS.threads_per_block,
         f"threads per block; more than {shape.threads}: parts of {shape.threads} one after another, or "
         f"with __syncthreads the machine's threads taking whole warps in turns (a multiple of 32)"),
        ("resident_threads", shape.threads, "threads held at once (2 warps of 8 four-lane groups)"),
        ("blocks_per_launch", shape.blocks, "blocks per launch, one after another (1-D grid)"),
        ("registers", shape.nregs, "32-bit registers per thread"),
        ("predicates", shape.npreds, "1-bit predicates per thread"),
        ("global_words", shape.gmem_words + shape.ro_words,
         f"32-bit words of global memory in all (buffers 16-byte aligned, 4-word guards; pages of "
         f"{P.PAGE_WORDS:,}, one read port)"),
        ("writable_words", shape.gmem_words,
         f"of them writable (banks of {shape.gmem_bank_rows:,} rows, a word each; the rest holds "
         "inputs no store reaches, four to a row, used when a launch does not fit these)"),
        ("shared_words", shared_words_for(shape.gmem_words),
         "32-bit words of shared memory per block (the top of global memory)"),
        ("program", shape.rom_rows, "machine instructions of program ROM (after the weight lowering)"),
    ]
    units = {f.name: v for f in fields(shape)
             if isinstance(v := getattr(shape, f.name), bool) and f.name in (*MACHINE_UNITS, "lane_rows")}
    layers = {"hidden_size": hidden, "intermediate_size": intermediate}
    if args.json:
        print(json.dumps({"shape": name, "layer_shape": layers, "isa": asdict(LIMITS),
                          "in_weights": {k: v for k, v, _ in slice_rows}, "units": units,
                          "refused_opcodes": refused}))
        return 0
    print("machine ISA limits (lowering, register allocation and the ISA simulator enforce these):")
    for _, v, unit in machine_limits():
        print(f"  {v:>6}  {unit}")
    how = "the default" if args.shape is None else "--shape"
    print(f"\nthe machine compiled into the weights: shape {name} ({how}; hidden {layers['hidden_size']}, "
          f"intermediate {layers['intermediate_size']}; `--shape` or ${SHAPE_ENV} picks another):")
    for _, v, unit in slice_rows:
        print(f"  {v:>6}  {unit}")
    print("units in the weights beside the integer datapath (what is absent runs as sequences of its ops):")
    for unit, present in units.items():
        note = UNIT_NOTES.get(unit, "")
        print(f"  {'yes' if present else 'no':>6}  {unit}{f': {note}' if note else ''}")
    print(f"\nPTX the interpreter runs but the machine refuses by name: {', '.join(refused)}")
    print(f"\na launch beyond a limit is refused with a message naming the limit (exit code "
          f"{int(ExitCode.MACHINE_LIMIT)})")
    return 0


def _cmd_hwcheck(args: argparse.Namespace) -> int:
    from qwengpu.hw.hwcheck import hwcheck

    return hwcheck(args.dir, pattern=args.k, as_json=args.json, arch=args.arch)


def _add_host_parsers(sub) -> None:
    """Advanced mode (``ask``, ``chat``, ``eval``): Qwen writes the CUDA; see qwengpu/host/."""
    from qwengpu.host.commands import add_parsers

    add_parsers(sub)


def _cmd_ask(args: argparse.Namespace) -> int:
    from qwengpu.host.commands import cmd_ask

    return cmd_ask(args)


def _cmd_chat(args: argparse.Namespace) -> int:
    from qwengpu.host.commands import cmd_chat

    return cmd_chat(args)


def _cmd_eval(args: argparse.Namespace) -> int:
    from qwengpu.host.commands import cmd_eval

    return cmd_eval(args)


def _cmd_kl(args: argparse.Namespace) -> int:
    from qwengpu.model.kl import cmd_kl

    return cmd_kl(args)


def _cmd_build(args: argparse.Namespace) -> int:
    if not getattr(args, "stock", False):  # the default: the lean mount (the base verbatim + the machine)
        from qwengpu.model.lean import cmd_build_lean

        return cmd_build_lean(args)
    from qwengpu.model.mount import cmd_build

    return cmd_build(args)


def _cmd_verify(args: argparse.Namespace) -> int:
    from qwengpu.model.verify import cmd_verify

    return cmd_verify(args)


def _cmd_exit_codes(args: argparse.Namespace) -> int:
    print("exit codes of every qwengpu command:")
    print(exit_code_table())
    return 0


def _quiet_transformers(verbosity: int) -> None:
    """transformers' repeated warnings (optional fast kernels it suggests, deprecations) are
    silenced unless -v: qwengpu does not use those kernels on purpose (FLA_CAVEAT). Set before
    transformers is imported, so it costs nothing where torch is never loaded."""
    if verbosity > 0:
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import warnings

    for cat in (FutureWarning, DeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=cat, module=r"(transformers|torch)(\.|$)")
    warnings.filterwarnings("ignore", message=r".*(causal_conv1d|causal-conv1d|flash-linear-attention).*")


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.cmd is None:
        ap.print_help()
        return ExitCode.USAGE
    _quiet_transformers(args.verbosity)
    handlers = {
        "ptx": _cmd_ptx,
        "run": _cmd_run,
        "check": _cmd_check,
        "machine": _cmd_machine,
        "hwcheck": _cmd_hwcheck,
        "ask": _cmd_ask,
        "chat": _cmd_chat,
        "eval": _cmd_eval,
        "kl": _cmd_kl,
        "build": _cmd_build,
        "verify": _cmd_verify,
        "exit-codes": _cmd_exit_codes,
    }
    try:
        return int(handlers[args.cmd](args))
    except QwenGPUError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except ModuleNotFoundError as exc:
        err = missing_extra(exc)
        if err is None:
            raise
        print(f"error: {err}", file=sys.stderr)
        return int(err.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)


if __name__ == "__main__":
    sys.exit(main())
