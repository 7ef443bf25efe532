"""The checks that need a real NVIDIA GPU, in one prepared run (never part of the tests).

Run through ``bench/device/run_device_checks.sh`` (TF32 off everywhere, a wall-clock limit).
Steps, each timed and reported even when a later one fails or runs out of time:

1. ``hwcheck``: ``qwengpu hwcheck`` on the corpus (``kernels/``) and the external suite
   (``kernels/external/``): every output bit of the interpreter against the GPU. Started first, in
   a child process, so it runs while the mount is being written.
2. ``base``: a random Qwen3.5-2B-shaped base (``qwengpu.model.synthetic``, official conditional
   layout, bfloat16 on disk): the 2B layer shape and hidden 2048 with 4 layers and a 32,768-token
   vocabulary by default, so that the mount (20.6 GB: the machine's 37 layers at the mounted
   width 4096 are most of it) is written within the budget; ``--full`` is the whole 2B shape
   (24 layers, 248,320 tokens: a 27.6 GB mount, 6.91 B parameters; both sizes from
   ``make_plan`` on the 2B machine).
3. ``machine``: the standalone machine for the base's layer shape, built into the machine cache
   (a fresh device machine has none).
4. ``launch_cpu``: a few corpus kernels through our CPU runtime (the standalone machine's fast
   runtime, in a child process while the mount is written; ``--cpu-runtime mounted``: the mount's
   own fast runtime afterwards; the mount's tests prove the two token-for-token equal): the trace
   the CPU writes, and its outputs against the spec.
5. ``mount``: ``build_mount`` of the machine on the base (float32, the mounted width).
6. ``stock_forward``: the whole mount through stock ``AutoModelForCausalLM`` on the device in
   float32: every argmax of a teacher-forced prefill of prompt + trace equal to the CPU trace
   (the chunked DeltaNet path), the recurrent path token by token on the first kernel, and a
   negative control (one compiled weight's sign flipped: the replay must break).
7. ``kl``: KL(base ‖ mounted) on a text (``qwengpu.model.kl``), base in float32 and in bfloat16.

It prints one summary table and writes one JSON file (through a temporary name). Exit status: 0
when every step that ran passed, 1 when one failed, 3 when nothing failed but a step was skipped
for time. ``--device cpu --small`` is the dry run of the whole script on a CPU (a hidden-128
base on the machine's test layer shape).

Needs on the device machine (no network): Python with torch (CUDA), transformers 5.24 (the
version the stock forward is pinned to; the H200 image has 5.17, so ``run_device_checks.sh``
installs ``.whl/transformers-5.24.0-py3-none-any.whl`` when that folder is carried), safetensors,
scipy, tokenizers, an NVRTC (``nvidia-cuda-nvrtc``) and ``cuda-bindings`` for hwcheck; the checkout
itself needs no install (it is put on ``sys.path``). Free disk in ``--work`` for the base and the
mount (~21 GB by default, ~32 GB with ``--full``) plus the machine cache (9.1 GB for the 2B
layer shape, ``$QWENGPU_CACHE``), and GPU memory for the float32 mount plus the base (~25 GB by
default, ~40 GB with ``--full``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run from a checkout that is not pip-installed (the device machine)
    sys.path.insert(0, str(ROOT))
DEFAULT_KERNELS = ("saturate", "logic_ops", "funnel_shift", "branch_nested")
SMALL_KERNELS = ("saturate", "logic_ops")


class Budget:
    """Wall-clock budget of the run; steps ask before they start, loops before each token."""

    def __init__(self, seconds: float) -> None:
        self.t0 = time.monotonic()
        self.seconds = seconds

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.t0)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


def log(msg: str) -> None:
    """One timestamped progress line on stderr."""
    print(f"[device-checks {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_step(report: dict, name: str, budget: Budget, need_s: float, fn, *args, **kw):
    """Run one step, record status/seconds/result in ``report["steps"][name]``; never raises."""
    if budget.left() < need_s:
        report["steps"][name] = {
            "status": "skipped",
            "reason": f"out of time ({budget.left():.0f} s left, needs about {need_s:.0f} s)",
        }
        log(f"{name}: skipped (out of time)")
        return None
    log(f"{name}: start ({budget.left():.0f} s left)")
    t0 = time.perf_counter()
    try:
        result = fn(*args, **kw)
        status = "ok" if not (isinstance(result, dict) and result.get("failed")) else "FAIL"
        entry = {"status": status, **(result if isinstance(result, dict) else {})}
    except Exception as exc:  # a device check reports every failure and goes on
        result = None
        entry = {
            "status": "error",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=6),
        }
    entry["seconds"] = round(time.perf_counter() - t0, 2)
    entry.pop("failed", None)
    report["steps"][name] = entry
    log(f"{name}: {entry['status']} in {entry['seconds']} s")
    return result


# ---------------------------------------------------------------------------------------------
# 0. environment
# ---------------------------------------------------------------------------------------------
def environment(device: str) -> dict:
    """Versions, the device, and TF32 off (also in the environment for child processes)."""
    import torch
    import transformers

    os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    env = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpu_threads": torch.get_num_threads(),
        "device": device,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
    }
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda but torch sees no CUDA device (a CPU-only torch?)")
        p = torch.cuda.get_device_properties(0)
        env.update(
            gpu=p.name,
            capability=f"{p.major}.{p.minor}",
            gpu_memory_gib=round(p.total_memory / 2**30, 1),
            cuda=torch.version.cuda,
        )
    if transformers.__version__ != "5.24.0":
        env["warning"] = f"transformers {transformers.__version__}, not the pinned 5.24.0"
    try:
        import cuda.bindings  # noqa: F401

        env["cuda_bindings"] = True
    except ImportError:
        env["cuda_bindings"] = False
    return env


# ---------------------------------------------------------------------------------------------
# 1. hwcheck (child processes, in a thread)
# ---------------------------------------------------------------------------------------------
def _hwcheck_one(folder: str, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "qwengpu.cli", "hwcheck", folder, "--json"]
    env = dict(os.environ, NVIDIA_TF32_OVERRIDE="0")
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "skipped", "reason": f"timed out after {timeout:.0f} s", "failed": False}
    secs = round(time.perf_counter() - t0, 2)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    try:
        r = json.loads(last)
    except ValueError:
        return {
            "status": "error",
            "exit": done.returncode,
            "seconds": secs,
            "stderr": done.stderr.strip()[-2000:],
            "failed": True,
        }
    rows = r.get("results", [])
    bad = [x for x in rows if x["status"] in ("DIFF", "ERROR")]
    approx = [x["kernel"] for x in rows if x["status"] == "approx-diff"]
    return {
        "status": "FAIL" if bad else "ok",
        "gpu": r.get("gpu"),
        "arch": r.get("arch"),
        "matched": r.get("matched"),
        "total": r.get("total"),
        "approx_only": approx,
        "differ_or_error": bad,
        "seconds": secs,
        "failed": bool(bad),
    }


def start_hwcheck(report: dict, device: str, budget: Budget) -> threading.Thread | None:
    """Run hwcheck on both folders in the background (GPU only); results land in the report."""
    if not device.startswith("cuda"):
        for k in ("hwcheck_corpus", "hwcheck_external"):
            report["steps"][k] = {"status": "n/a", "reason": "needs an NVIDIA GPU (dry run on CPU)"}
        return None

    def work() -> None:
        for key, folder in (("hwcheck_corpus", "kernels"), ("hwcheck_external", "kernels/external")):
            if not (ROOT / folder).is_dir():
                report["steps"][key] = {"status": "skipped", "reason": f"{folder} is missing"}
                continue
            log(f"{key}: start")
            res = _hwcheck_one(folder, max(30.0, budget.left() - 20))
            res.pop("failed", None)
            report["steps"][key] = res
            log(f"{key}: {res['status']} ({res.get('matched')}/{res.get('total')})")

    t = threading.Thread(target=work, daemon=True)
    t.start()
    return t


# ---------------------------------------------------------------------------------------------
# 2-3. base and mount
# ---------------------------------------------------------------------------------------------
def make_base(work: Path, small: bool, base_layers: int, base_vocab: int) -> dict:
    """The random base: the 2B layer shape and hidden (``--full``: all 24 layers and the 2B's
    248,320-token vocabulary; the default fewer of both, so that writing the ~20 GB mount fits the
    budget), or the hidden-128 test-shape base with ``--small``."""
    from qwengpu.model.synthetic import make_synthetic_base

    out = work / ("base_small" if small else "base_2b")
    if small:
        path = make_synthetic_base(
            out,
            layout="conditional",
            shape="test",
            hidden=128,
            layers=2,
            vocab=1024,
            dtype="bfloat16",
            tied=False,
            overwrite=True,
        )
    else:
        path = make_synthetic_base(
            out,
            layout="conditional",
            shape="2b",
            layers=base_layers,
            vocab=base_vocab,
            dtype="bfloat16",
            tied=True,
            overwrite=True,
        )
    cfg = json.loads((path / "config.json").read_text())["text_config"]
    size = sum(p.stat().st_size for p in path.glob("*.safetensors"))
    return {
        "path": str(path),
        "hidden": cfg["hidden_size"],
        "layers": cfg["num_hidden_layers"],
        "vocab": cfg["vocab_size"],
        "bytes": size,
    }


def make_mount(work: Path, base: str) -> dict:
    from qwengpu.model.mount import build_mount

    out = work / "mount"
    rec = build_mount(base, out, overwrite=True, progress=lambda m: log(f"  mount: {m}"))
    return {
        "path": str(out),
        "mounted_hidden": rec["mounted_hidden"],
        "c": rec["c"],
        "layers": rec["layers"],
        "token_offset": rec["token_offset"],
        "bytes": rec["total_bytes"],
        "build_seconds": rec.get("build_seconds"),
    }


# ---------------------------------------------------------------------------------------------
# 4. launches on the CPU runtime
# ---------------------------------------------------------------------------------------------
def _machine_config(base: str):
    """The machine's compile config for the base's layer shape (what the mount compiles)."""
    from qwengpu.model.mount import machine_config_for, text_config_of

    _, text = text_config_of(json.loads((Path(base) / "config.json").read_text()))
    return machine_config_for(text)


def make_machine(base: str) -> dict:
    """Build (or load) the standalone machine for the base's layer shape into the machine cache,
    so the CPU traces can run while the mount is written."""
    from qwengpu.model.machine_checkpoint import compiler_version
    from qwengpu.model.mount import machine_entry

    mcfg = _machine_config(base)
    entry = machine_entry(mcfg, progress=lambda m: log(f"  machine: {m}"))
    return {
        "entry": str(entry),
        "compiler_version": compiler_version(mcfg),
        "hidden": mcfg.hidden_size,
        "intermediate": mcfg.intermediate_size,
    }


def traces_child(base: str, kernels: list[str], out: str) -> int:
    """(child process) Each kernel through the standalone machine's CPU runtime (``run_machine``,
    fast): prompt, trace, outputs checked against the spec; written as JSON to ``out``."""
    import torch

    from qwengpu.runtime.engine import machine_model, run_machine

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    mcfg = _machine_config(base)
    t0 = time.perf_counter()
    machine_model(mcfg)
    res: dict = {
        "runtime": "standalone machine, qwengpu.runtime.fast (CPU)",
        "load_seconds": round(time.perf_counter() - t0, 2),
        "kernels": {},
    }
    for k in kernels:
        cu = ROOT / "kernels" / f"{k}.cu"
        t1 = time.perf_counter()
        run = run_machine(cu, cu.with_suffix(".json"), config=mcfg, max_tokens=200_000)
        res["kernels"][k] = {
            "status": "ok" if run.passed else "FAIL",
            "prompt": list(run.prompt),
            "trace": list(run.trace),
            "mismatches": run.mismatches[:3],
            "seconds": round(time.perf_counter() - t1, 2),
        }
        tmp = out + ".tmp"
        Path(tmp).write_text(json.dumps(res))
        os.replace(tmp, out)
    return 0


def start_traces(base: str, kernels: list[str], work: Path) -> tuple[subprocess.Popen, Path]:
    """Start :func:`traces_child` in its own process (it runs beside the mount's writing)."""
    out = work / "traces.json"
    out.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--traces-child",
        str(out),
        "--base",
        base,
        "--kernels",
        ",".join(kernels),
    ]
    log_f = open(work / "traces.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log_f, stderr=subprocess.STDOUT)
    return proc, out


def collect_traces(proc: subprocess.Popen, out: Path, budget: Budget, traces: dict) -> dict:
    """Wait for the traces child (leaving time for the GPU steps) and take its traces."""
    try:
        proc.wait(timeout=max(5.0, budget.left() - 90))
    except subprocess.TimeoutExpired:
        proc.kill()
    if not out.is_file():
        tail = (
            (out.parent / "traces.log").read_text()[-1500:] if (out.parent / "traces.log").is_file() else ""
        )
        return {"failed": True, "error": f"no traces (exit {proc.returncode})", "log_tail": tail}
    res = json.loads(out.read_text())
    failed = proc.returncode != 0
    for k, r in res["kernels"].items():
        traces[k] = (r.pop("prompt"), r.pop("trace"))
        r["prompt_tokens"], r["trace_tokens"] = len(traces[k][0]), len(traces[k][1])
        failed |= r["status"] != "ok"
    res["exit"] = proc.returncode
    res["failed"] = failed
    return res


def launch_cpu(mount: str, kernels: list[str], budget: Budget, traces: dict) -> dict:
    from qwengpu.runtime.mounted import MountedModel

    t0 = time.perf_counter()
    mm = MountedModel.load(mount, runtime="fast", device="cpu")
    out = {"runtime": mm.runtime, "load_seconds": round(time.perf_counter() - t0, 2), "kernels": {}}
    failed = mm.runtime != "fast"
    for k in kernels:
        if budget.left() < 60:
            out["kernels"][k] = {"status": "skipped", "reason": "out of time"}
            continue
        cu = ROOT / "kernels" / f"{k}.cu"
        t1 = time.perf_counter()
        run = mm.launch(cu, cu.with_suffix(".json"))
        traces[k] = (list(run.prompt), list(run.trace))
        ok = run.passed
        failed |= not ok
        out["kernels"][k] = {
            "status": "ok" if ok else "FAIL",
            "prompt_tokens": len(run.prompt),
            "trace_tokens": len(run.trace),
            "mismatches": run.mismatches[:3],
            "seconds": round(time.perf_counter() - t1, 2),
        }
    del mm
    import gc

    gc.collect()
    out["failed"] = failed
    return out


# ---------------------------------------------------------------------------------------------
# 5. the stock forward on the device
# ---------------------------------------------------------------------------------------------
def _argmaxes(model, ids: list[int], device: str, rows: int = 256) -> list[int]:
    """Argmax of every position of one prefill (the head applied in slices: T x V' logits at once
    would be GBs at the 2B vocabulary)."""
    import torch

    with torch.no_grad():
        h = model.model(input_ids=torch.tensor([ids], device=device), use_cache=False).last_hidden_state[0]
        out = []
        for r in range(0, h.shape[0], rows):
            out.append(model.lm_head(h[r : r + rows]).argmax(-1))
        return torch.cat(out).tolist()


def _replay(model, prompt: list[int], trace: list[int], V: int, device: str) -> dict:
    """Teacher-forced prefill of prompt + trace[:-1]: argmax at each step against the trace."""
    ids = [t + V for t in prompt + trace[:-1]]
    t0 = time.perf_counter()
    got = _argmaxes(model, ids, device)[len(prompt) - 1 :]
    want = [t + V for t in trace]
    bad = next((i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b), None)
    return {
        "equal": bad is None,
        "tokens": len(ids),
        "first_mismatch": bad,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def _decode(
    model, prompt: list[int], trace: list[int], V: int, device: str, steps: int, budget: Budget
) -> dict:
    """The recurrent path: prefill the prompt, then feed the trace one token at a time through the
    cache; each step's argmax against the next trace token."""
    import torch

    t0 = time.perf_counter()
    n = min(steps, len(trace))
    with torch.no_grad():
        out = model(input_ids=torch.tensor([[t + V for t in prompt]], device=device), use_cache=True)
        done, bad = 0, None
        for i in range(n):
            if int(out.logits[0, -1].argmax()) != trace[i] + V:
                bad = i
                break
            done += 1
            if i + 1 == n or budget.left() < 30:
                break
            out = model(
                input_ids=torch.tensor([[trace[i] + V]], device=device), cache=out.cache, use_cache=True
            )
    return {
        "equal": bad is None,
        "steps": done,
        "asked": n,
        "first_mismatch": bad,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def stock_forward(
    mount: str, traces: dict, device: str, decode_steps: int, budget: Budget, hold: dict
) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    rec = json.loads((Path(mount) / "qwengpu_mount.json").read_text())
    V = int(rec["token_offset"])
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(mount, dtype=torch.float32).to(device).eval()
    model.requires_grad_(False)
    hold["mount_model"] = model
    out: dict = {"load_seconds": round(time.perf_counter() - t0, 2), "prefill": {}, "decode": {}}
    failed = False
    for k, (prompt, trace) in traces.items():
        if budget.left() < 40:
            out["prefill"][k] = {"status": "skipped", "reason": "out of time"}
            continue
        r = _replay(model, prompt, trace, V, device)
        out["prefill"][k] = r
        failed |= not r["equal"]
    if traces and budget.left() > 60:
        k = next(iter(traces))
        prompt, trace = traces[k]
        out["decode"][k] = r = _decode(model, prompt, trace, V, device, decode_steps, budget)
        failed |= not r["equal"]
    # negative control: one compiled weight's sign flipped must break the replay
    if traces and budget.left() > 40:
        k = next(iter(traces))
        prompt, trace = traces[k]
        w = model.model.layers[12].mlp.gate_proj.weight
        r_, c_ = (w != 0).nonzero()[0].tolist()
        old = float(w[r_, c_])
        with torch.no_grad():
            w[r_, c_] = -old
        try:
            r = _replay(model, prompt, trace, V, device)
        finally:
            with torch.no_grad():
                w[r_, c_] = old
        out["negative_control"] = {
            "kernel": k,
            "tensor": "model.layers.12.mlp.gate_proj.weight",
            "element": [r_, c_],
            "replay_broke": not r["equal"],
            "first_mismatch": r["first_mismatch"],
        }
        failed |= r["equal"]
    if device.startswith("cuda"):
        out["peak_gpu_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    out["failed"] = failed
    return out


# ---------------------------------------------------------------------------------------------
# 6. KL on text
# ---------------------------------------------------------------------------------------------
def kl_text(
    base: str,
    mount: str,
    text_file: Path,
    device: str,
    tokens: int,
    decode_tokens: int,
    budget: Budget,
    hold: dict,
) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from qwengpu.model.kl import kl_of_models, read_text_tokens

    mm = hold.get("mount_model")
    if mm is None:
        mm = AutoModelForCausalLM.from_pretrained(mount, dtype=torch.float32).to(device).eval()
    ids, full = read_text_tokens(Path(base), text_file, tokens)
    vocab = json.loads((Path(base) / "config.json").read_text())["text_config"]["vocab_size"]
    out: dict = {"tokens": len(ids), "text_tokens": full, "text": str(text_file)}
    for dtype in ("float32", "bfloat16"):
        if budget.left() < 30:
            out[dtype] = {"status": "skipped", "reason": "out of time"}
            continue
        bm = AutoModelForCausalLM.from_pretrained(base, dtype=getattr(torch, dtype)).to(device).eval()
        res = kl_of_models(bm, mm, ids, vocab, paths=("prefill",))
        if budget.left() > 45:
            res |= kl_of_models(bm, mm, ids[:decode_tokens], vocab, paths=("decode",))
        out[dtype] = res
        del bm
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    f32 = out.get("float32", {})
    out["failed"] = any(s.get("max_kl", 0) > 1e-9 for s in f32.values() if isinstance(s, dict))
    return out


# ---------------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------------
def summary_rows(report: dict) -> list[tuple[str, str, str]]:
    """(check, status, detail) per line of the summary table."""
    rows = []
    st = report["steps"]
    for key in ("hwcheck_corpus", "hwcheck_external"):
        s = st.get(key, {"status": "missing"})
        if "matched" in s:
            detail = (
                f"{s['matched']}/{s['total']} bit-identical, {len(s['differ_or_error'])} differ/error, "
                f"{len(s['approx_only'])} approx-only, {s['seconds']} s"
            )
        else:
            detail = s.get("reason", s.get("error", s.get("stderr", "")))
        rows.append((key, s["status"], detail))
    for key in ("base", "machine", "mount"):
        s = st.get(key, {"status": "missing"})
        if key == "machine" and s["status"] == "ok":
            detail = f"{s['compiler_version']} (hidden {s['hidden']}), {s['seconds']} s"
        elif s["status"] == "ok":
            detail = (
                f"hidden {s.get('hidden', s.get('mounted_hidden'))}, {s.get('bytes', 0) / 1e9:.1f} GB, "
                f"{s['seconds']} s"
            )
        else:
            detail = s.get("reason", s.get("error", ""))
        rows.append((key, s["status"], detail))
    s = st.get("launch_cpu", {"status": "missing"})
    for k, r in s.get("kernels", {}).items():
        rows.append(
            (
                f"launch_cpu {k}",
                r["status"],
                f"{r.get('trace_tokens', '')} trace tokens, {r.get('seconds', '')} s",
            )
        )
    if "kernels" not in s:
        rows.append(("launch_cpu", s["status"], s.get("reason", s.get("error", ""))))
    s = st.get("stock_forward", {"status": "missing"})
    for k, r in s.get("prefill", {}).items():
        rows.append(
            (
                f"prefill replay {k}",
                "ok" if r.get("equal") else r.get("status", "FAIL"),
                f"{r.get('tokens', '')} tokens, first mismatch {r.get('first_mismatch')}",
            )
        )
    for k, r in s.get("decode", {}).items():
        rows.append(
            (
                f"decode replay {k}",
                "ok" if r["equal"] else "FAIL",
                f"{r['steps']}/{r['asked']} steps, first mismatch {r['first_mismatch']}",
            )
        )
    if "negative_control" in s:
        n = s["negative_control"]
        rows.append(
            (
                "negative control",
                "ok" if n["replay_broke"] else "FAIL",
                f"flipped {n['tensor']}{n['element']}: replay broke at {n['first_mismatch']}",
            )
        )
    if "prefill" not in s:
        rows.append(("stock_forward", s["status"], s.get("reason", s.get("error", ""))))
    s = st.get("kl", {"status": "missing"})
    for dt in ("float32", "bfloat16"):
        for path, r in (s.get(dt) or {}).items():
            if isinstance(r, dict) and "mean_kl" in r:
                rows.append(
                    (
                        f"KL base {dt} {path}",
                        ("ok" if r["max_kl"] <= 1e-9 else "FAIL") if dt == "float32" else "info",
                        f"mean {r['mean_kl']:.3e} max {r['max_kl']:.3e} "
                        f"top-1 {100 * r['top1_agreement']:.2f}% ({r['tokens']} tokens)",
                    )
                )
    if not any(dt in s for dt in ("float32", "bfloat16")):
        rows.append(("kl", s["status"], s.get("reason", s.get("error", ""))))
    return rows


def write_json(path: Path, report: dict) -> None:
    """Write through a temporary file in the same folder, then rename (never half-written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(report, f, indent=2, default=str)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (dry run)")
    ap.add_argument("--small", action="store_true", help="hidden-128 base on the test layer shape (dry run)")
    ap.add_argument(
        "--work",
        default=os.environ.get(
            "QWENGPU_DEVICE_WORK", str(Path(tempfile.gettempdir()) / "qwengpu-device-checks")
        ),
    )
    ap.add_argument(
        "--out", default=str(Path(tempfile.gettempdir()) / "qwengpu-device-checks-out" / "device_checks.json")
    )
    ap.add_argument("--budget-s", type=float, default=450.0, help="wall-clock budget (default 450 s)")
    ap.add_argument(
        "--kernels", default=None, help="comma-separated corpus kernels (default: four short ones)"
    )
    ap.add_argument(
        "--full", action="store_true", help="the whole 2B-shaped base: 24 layers, 248,320-token vocabulary"
    )
    ap.add_argument("--base-layers", type=int, default=None, help="layers of the 2B-shaped base (default 4)")
    ap.add_argument("--base-vocab", type=int, default=None, help="its vocabulary (default 32768)")
    ap.add_argument("--decode-steps", type=int, default=None, help="recurrent-path steps (default 400 / 40)")
    ap.add_argument("--kl-tokens", type=int, default=None, help="prefill KL tokens (default 512 / 24)")
    ap.add_argument("--kl-decode-tokens", type=int, default=None, help="decode KL tokens (default 128 / 8)")
    ap.add_argument("--skip", default="", help="comma-separated steps to skip: hwcheck,stock_forward,kl")
    ap.add_argument("--keep", action="store_true", help="keep the base and the mount in --work")
    ap.add_argument(
        "--cpu-runtime",
        choices=["standalone", "mounted"],
        default="standalone",
        help="the CPU traces: the standalone machine's runtime in a child process beside the mount's "
        "writing (default), or the mount's own fast runtime after it",
    )
    ap.add_argument("--traces-child", help=argparse.SUPPRESS)
    ap.add_argument("--base", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.traces_child:
        return traces_child(a.base, a.kernels.split(","), a.traces_child)
    budget = Budget(a.budget_s)
    small = a.small
    kernels = a.kernels.split(",") if a.kernels else list(SMALL_KERNELS if small else DEFAULT_KERNELS)
    decode_steps = a.decode_steps or (40 if small else 400)
    kl_tokens = a.kl_tokens or (24 if small else 512)
    kl_decode = a.kl_decode_tokens or (8 if small else 128)
    skip = set(filter(None, a.skip.split(",")))
    unknown = skip - {"hwcheck", "stock_forward", "kl"}
    if unknown:
        ap.error(f"--skip: unknown step(s) {', '.join(sorted(unknown))} (hwcheck, stock_forward, kl)")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv[1:],
        "device": a.device,
        "small": small,
        "kernels": kernels,
        "steps": {},
    }
    for k in skip:
        for name in ("hwcheck_corpus", "hwcheck_external") if k == "hwcheck" else (k,):
            report["steps"][name] = {"status": "n/a", "reason": "--skip"}
    import torch

    if a.device == "cpu":
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    report["environment"] = run_step(report, "environment", budget, 0, environment, a.device)
    if report["environment"] is None:
        write_json(Path(a.out), report)
        print(json.dumps(report["steps"]["environment"], indent=2))
        return 1
    hw = None if "hwcheck" in skip else start_hwcheck(report, a.device, budget)
    base_layers = a.base_layers or (24 if a.full else 4)
    base_vocab = a.base_vocab or (248_320 if a.full else 32_768)
    report["base_profile"] = {"layers": base_layers, "vocab": base_vocab, "full": a.full}
    base = run_step(report, "base", budget, 30, make_base, work, small, base_layers, base_vocab)
    machine = run_step(report, "machine", budget, 60, make_machine, base["path"]) if base else None
    child = start_traces(base["path"], kernels, work) if machine and a.cpu_runtime == "standalone" else None
    mount = run_step(report, "mount", budget, 60, make_mount, work, base["path"]) if machine else None
    traces: dict = {}
    hold: dict = {}
    if child is not None:
        run_step(report, "launch_cpu", budget, 0, collect_traces, *child, budget, traces)
    if mount:
        if child is None:
            run_step(report, "launch_cpu", budget, 60, launch_cpu, mount["path"], kernels, budget, traces)
        if "stock_forward" not in skip and traces:
            run_step(
                report,
                "stock_forward",
                budget,
                60,
                stock_forward,
                mount["path"],
                traces,
                a.device,
                decode_steps,
                budget,
                hold,
            )
        if "kl" not in skip:
            text = ROOT / "bench" / "device" / "kl_text.txt"
            run_step(
                report,
                "kl",
                budget,
                45,
                kl_text,
                base["path"],
                mount["path"],
                text,
                a.device,
                kl_tokens,
                kl_decode,
                budget,
                hold,
            )
    hold.clear()
    if hw is not None:
        hw.join(timeout=max(1.0, budget.left()))
        for k in ("hwcheck_corpus", "hwcheck_external"):
            report["steps"].setdefault(
                k, {"status": "skipped", "reason": "still running at the end of the budget"}
            )
    if not a.keep:
        import shutil

        for p in ("mount", "base_2b", "base_small"):
            shutil.rmtree(work / p, ignore_errors=True)
    report["seconds"] = round(budget.elapsed(), 1)
    rows = summary_rows(report)
    w = max(len(r[0]) for r in rows)
    print(
        f"\nqwenGPU device checks on {report['environment'].get('gpu', a.device)} "
        f"({report['seconds']} s, budget {a.budget_s:.0f} s)"
    )
    for name, status, detail in rows:
        print(f"  {name:<{w}}  {status:<8} {detail}")
    statuses = [s.get("status") for s in report["steps"].values()]
    report["result"] = (
        "FAIL"
        if any(s in ("FAIL", "error") for s in statuses)
        else "incomplete"
        if "skipped" in statuses
        else "ok"
    )
    write_json(Path(a.out), report)
    print(f"\nresult: {report['result']}; JSON: {a.out}")
    return {"ok": 0, "FAIL": 1, "incomplete": 3}[report["result"]]


if __name__ == "__main__":
    sys.exit(main())
