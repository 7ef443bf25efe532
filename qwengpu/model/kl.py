"""``qwengpu kl``: how far a mounted checkpoint's next-token distribution is from its base's.

For every position of a text, KL(base ‖ mounted) = Σ_b p_b (log p_b − log q_b), summed over the
base's V vocabulary positions, with q the mounted model's softmax over *all* its tokens (V + the
machine's): any probability the mounted model puts on machine tokens is missing from q_b and
counts against it. Logits come from the stock ``transformers`` forward (each side in float32 or
bfloat16: ``--base-dtype``, ``--dtype``) and are turned into log-probabilities in float64. The
mounted side must be a mount (its ``qwengpu_mount.json``) of this very base (the config hash the
build recorded): a plain checkpoint against itself would print KL 0 and prove nothing.

Two paths, because a mount must be exact on both: ``prefill`` (one forward over the whole text:
the chunked Gated DeltaNet rule) and ``decode`` (one token at a time through the cache: the
recurrent rule). The models are loaded with ``AutoModelForCausalLM`` only after a memory estimate
(weights from the safetensors headers, plus logits) says they fit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from qwengpu.errors import QwenGPUError

PATHS = ("prefill", "decode")
BASE_DTYPES = ("float32", "bfloat16")
MODEL_DTYPES = ("float32", "bfloat16")  # float16 is refused: the mount's flag gain 2^80 overflows it
# Tensors the causal-LM loader drops (vLLM/official extras): never loaded, never counted.
_IGNORED_PREFIXES = ("mtp.", "model.visual.")
_DTYPE_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


@dataclass
class PathStats:
    """Running KL statistics of one path (no per-token arrays kept: files may be long)."""

    tokens: int = 0
    kl_sum: float = 0.0
    kl_max: float = -math.inf
    kl_min: float = math.inf
    top1_agree: int = 0
    machine_mass_max: float = 0.0
    seconds: float = 0.0

    def add(self, base_logits, model_logits, vocab: int) -> None:
        """Fold rows of logits ([T, V] and [T, V']) into the statistics, in float64."""
        import torch

        p_log = torch.log_softmax(base_logits.to(torch.float64), dim=-1)
        q_log_all = torch.log_softmax(model_logits.to(torch.float64), dim=-1)
        q_log = q_log_all[:, :vocab]
        p = p_log.exp()
        # p log p is 0 where p == 0 (an underflowed base probability), never nan
        terms = torch.where(p > 0, p * (p_log - q_log), torch.zeros_like(p))
        kl = terms.sum(dim=-1)
        self.tokens += int(kl.numel())
        self.kl_sum += float(kl.sum())
        self.kl_max = max(self.kl_max, float(kl.max()))
        self.kl_min = min(self.kl_min, float(kl.min()))
        self.top1_agree += int((base_logits.argmax(-1) == model_logits.argmax(-1)).sum())
        if q_log_all.shape[-1] > vocab:
            mass = q_log_all[:, vocab:].exp().sum(-1)
            self.machine_mass_max = max(self.machine_mass_max, float(mass.max()))

    def summary(self) -> dict:
        """The reported numbers: mean/max KL, top-1 agreement, machine-token mass, token count."""
        n = max(self.tokens, 1)
        return {
            "tokens": self.tokens,
            "mean_kl": self.kl_sum / n,
            "max_kl": self.kl_max if self.tokens else 0.0,
            "min_kl": self.kl_min if self.tokens else 0.0,
            "top1_agreement": self.top1_agree / n,
            "max_machine_mass": self.machine_mass_max,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class Estimate:
    """What loading both models and running the paths will take, in bytes."""

    base_weights: int
    model_weights: int
    activations: int
    available: int
    device: str
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.base_weights + self.model_weights + self.activations


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _safetensors_files(path: Path) -> list[Path]:
    """The weight files of a checkpoint folder (sharded with an index, or one file)."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError) as exc:
            raise QwenGPUError(f"{index}: not a safetensors index ({exc})") from None
        return [path / n for n in names]
    single = path / "model.safetensors"
    if single.is_file():
        return [single]
    raise QwenGPUError(f"{path}: no model.safetensors or model.safetensors.index.json (not a checkpoint?)")


def checkpoint_elements(path: str | os.PathLike) -> int:
    """Number of weight elements the causal-LM loader will load (from the safetensors headers only;
    ``mtp.*`` and ``model.visual.*`` are skipped as the loader skips them)."""
    total = 0
    for f in _safetensors_files(Path(path)):
        if not f.is_file():
            raise QwenGPUError(f"{f}: missing weight file named by the index")
        with f.open("rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            try:
                header = json.loads(fh.read(n))
            except ValueError:
                raise QwenGPUError(f"{f}: not a safetensors file") from None
        for name, info in header.items():
            if name == "__metadata__" or name.startswith(_IGNORED_PREFIXES):
                continue
            total += math.prod(info["shape"])
    return total


def _text_config(path: Path) -> dict:
    """The text part of a checkpoint's config.json (the top level, or ``text_config``)."""
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise QwenGPUError(f"{path}: no config.json (not a checkpoint folder?)")
    try:
        cfg = json.loads(cfg_path.read_text())
    except ValueError as exc:
        raise QwenGPUError(f"{cfg_path}: not JSON ({exc})") from None
    text = cfg.get("text_config", cfg)
    if "vocab_size" not in text or "hidden_size" not in text:
        raise QwenGPUError(f"{cfg_path}: no vocab_size/hidden_size (not a Qwen3.5 config?)")
    return text


def available_bytes(device: str) -> int:
    """Free memory on ``device``: MemAvailable on CPU, the free bytes cuda reports on a GPU."""
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def estimate(base: Path, model: Path, tokens: int, base_dtype: str, paths: tuple[str, ...],
             device: str, model_dtype: str = "float32") -> Estimate:
    """Weights of both models in their run dtypes plus the largest activations (the prefill
    logits in float32 and their float64 copies, processed in blocks) and a margin for the rest."""
    bt, mt = _text_config(base), _text_config(model)
    base_w = checkpoint_elements(base) * (2 if base_dtype == "bfloat16" else 4)
    model_w = checkpoint_elements(model) * (2 if model_dtype == "bfloat16" else 4)
    vb, vm = bt["vocab_size"], mt["vocab_size"]
    rows = tokens if "prefill" in paths else 1
    logits = rows * (vb + vm) * 4
    block = min(rows, 64) * (vb + vm) * 8 * 4  # float64 log-softmax and its companions
    hidden = max(bt["hidden_size"], mt["hidden_size"])
    inter = max(bt.get("intermediate_size", 0), mt.get("intermediate_size", 0))
    acts = rows * (hidden + inter) * 4 * 8  # a few live layer activations of one forward
    margin = 512 * 2**20
    return Estimate(base_w, model_w, logits + block + acts + margin, available_bytes(device), device)


def _clock_text(s: float) -> str:
    s = max(0, int(round(s)))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """kl's progress on stderr: each stage (loading either model, each path) as it starts, with the
    time since the command began; on the token loop, tokens done of total, tokens/s and the time
    left. The rate counts only the path's own compute (its clock starts when the path starts,
    after both models are loaded), so a long load does not make decoding look slow. Rewritten in
    place on a terminal (at most twice a second), one line every ten seconds otherwise."""

    def __init__(self, enabled: bool = True, stream=None, clock: Callable[[], float] = time.monotonic,
                 every: float | None = None) -> None:
        self.enabled, self.stream, self.clock = enabled, stream if stream is not None else sys.stderr, clock
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every if every is not None else (0.5 if self.tty else 10.0)
        self.t_begin = clock()
        self.label, self.total, self.t0, self.last = "", 0, self.t_begin, -math.inf

    def _print(self, msg: str, final: bool = True) -> None:
        if self.tty:
            print("\r\x1b[K" + msg, end="\n" if final else "", file=self.stream, flush=True)
        else:
            print(msg, file=self.stream, flush=True)

    def stage(self, msg: str) -> None:
        """A new stage (one line)."""
        if self.enabled:
            self._print(f"kl [{_clock_text(self.clock() - self.t_begin)}] {msg}")

    def start(self, label: str, total: int) -> None:
        """A path begins: its token count, and the clock its rate is measured by."""
        self.label, self.total, self.t0, self.last = label, total, self.clock(), -math.inf
        self.stage(f"{label}: {total} tokens")

    def rate(self, done: int) -> float:
        """Tokens per second of the current path so far (its own compute only)."""
        dt = self.clock() - self.t0
        return done / dt if dt > 0 else 0.0

    def tokens(self, done: int) -> None:
        """``done`` of the path's tokens are through both models."""
        if not self.enabled:
            return
        now = self.clock()
        if done < self.total and now - self.last < self.every:
            return
        self.last = now
        r = self.rate(done)
        left = f", {_clock_text((self.total - done) / r)} left" if r > 0 and done < self.total else ""
        self._print(f"kl {self.label}: {done}/{self.total} tokens, {r:.2f} tokens/s{left}",
                    final=done >= self.total)


def _quiet_transformers() -> None:
    """No loading bars or kernel-fallback notices between our lines (errors still show)."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


def _load(path: Path, dtype: str, device: str):
    """A stock causal LM from ``path`` (either Qwen3.5 layout), in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        m = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    except (OSError, ValueError, KeyError) as exc:
        raise QwenGPUError(f"{path}: cannot load with AutoModelForCausalLM ({exc})") from None
    return m.to(device).eval()


def _prefill(base, model, ids, vocab: int, st: PathStats) -> None:
    """One forward of each model over the whole text (the chunked DeltaNet rule)."""
    import torch

    t0 = time.perf_counter()
    with torch.no_grad():
        bl = base(input_ids=ids, use_cache=False).logits[0]
        ml = model(input_ids=ids, use_cache=False).logits[0]
        for r in range(0, bl.shape[0], 64):
            st.add(bl[r:r + 64].float(), ml[r:r + 64].float(), vocab)
    st.seconds += time.perf_counter() - t0


def _decode(base, model, ids, vocab: int, st: PathStats, show: Callable[[int], None]) -> None:
    """Token by token through each model's cache (the recurrent DeltaNet rule after the first)."""
    import torch

    t0 = time.perf_counter()
    bc = mc = None
    n = ids.shape[1]
    with torch.no_grad():
        for t in range(n):
            tok = ids[:, t:t + 1]
            bo = base(input_ids=tok, cache=bc, use_cache=True)
            mo = model(input_ids=tok, cache=mc, use_cache=True)
            bc, mc = bo.cache, mo.cache
            st.add(bo.logits[0].float(), mo.logits[0].float(), vocab)
            show(t + 1)
    st.seconds += time.perf_counter() - t0


def read_text_tokens(base: Path, text_file: Path, max_tokens: int | None) -> tuple[list[int], int]:
    """The text's token ids under the base's own tokenizer (no added specials), cut to max_tokens."""
    from transformers import AutoTokenizer

    try:
        text = text_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QwenGPUError(f"cannot read {text_file}: {exc}") from None
    try:
        tok = AutoTokenizer.from_pretrained(base)
    except (OSError, ValueError) as exc:
        raise QwenGPUError(f"{base}: no usable tokenizer ({exc})") from None
    ids = tok(text, add_special_tokens=False).input_ids
    if not ids:
        raise QwenGPUError(f"{text_file}: no tokens (empty text)")
    full = len(ids)
    if max_tokens is not None:
        ids = ids[:max_tokens]
    return ids, full


def compute_kl(
    base: str | os.PathLike,
    model: str | os.PathLike,
    text_file: str | os.PathLike,
    *,
    max_tokens: int | None = 512,
    paths: tuple[str, ...] = PATHS,
    base_dtype: str = "float32",
    dtype: str = "float32",
    device: str = "cpu",
    progress: bool | Progress = False,
    require_mount: bool = False,
) -> dict:
    """KL(base ‖ model) per token on each path; see the module docstring. Returns a JSON-able dict.

    ``dtype``: the mounted side's (float32 or bfloat16). ``require_mount`` (the command sets it):
    refuse a ``model`` that is not a mount of ``base``; off, any two checkpoints of one vocabulary
    compare (the tests' base-against-itself controls)."""
    import torch

    base, model, text_file = Path(base), Path(model), Path(text_file)
    if dtype == "float16":
        raise QwenGPUError("--dtype float16 is not supported: the mount's final norm holds a gain of 2^80 in "
                           "its flag dim, far beyond float16's range (65504); use bfloat16 or float32")
    if dtype not in MODEL_DTYPES:
        raise QwenGPUError(f"unknown dtype {dtype!r} for the mounted model (expected float32 or bfloat16)")
    for p in paths:
        if p not in PATHS:
            raise QwenGPUError(f"unknown path {p!r} (expected prefill, decode or both)")
    if base_dtype not in BASE_DTYPES:
        raise QwenGPUError(f"unknown base dtype {base_dtype!r} (expected float32 or bfloat16)")
    if max_tokens is not None and max_tokens < 1:
        raise QwenGPUError(f"--max-tokens must be at least 1 (got {max_tokens})")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise QwenGPUError(f"device {device} asked for, but torch sees no CUDA device")
    for p in (base, model):
        if not p.is_dir():
            raise QwenGPUError(f"{p}: no such checkpoint folder")
    vocab = _text_config(base)["vocab_size"]
    vm = _text_config(model)["vocab_size"]
    if vm < vocab:
        raise QwenGPUError(
            f"{model} has a vocabulary of {vm}, smaller than the base's {vocab}: not a mount of it"
        )
    ids, full = read_text_tokens(base, text_file, max_tokens)
    if require_mount:
        check_is_mount_of(base, model)
    est = estimate(base, model, len(ids), base_dtype, paths, device, dtype)
    if est.total > est.available:
        raise QwenGPUError(
            f"not enough memory on {device}: the base needs {_gib(est.base_weights)} ({base_dtype}), "
            f"the mounted model {_gib(est.model_weights)} ({dtype}), activations for {len(ids)} tokens "
            f"about {_gib(est.activations)}; {_gib(est.total)} in all, {_gib(est.available)} available "
            "(try --max-tokens, --path decode, --base-dtype bfloat16 or a larger machine)"
        )
    show = progress if isinstance(progress, Progress) else Progress(bool(progress))
    show.stage(f"loading the base {base} ({base_dtype})")
    bm = _load(base, base_dtype, device)
    show.stage(f"loading the mounted model {model} ({dtype})")
    mm = _load(model, dtype, device)
    if mm.config.vocab_size != vm or bm.config.vocab_size != vocab:
        raise QwenGPUError("the loaded vocabulary sizes differ from config.json")
    out: dict = {
        "base": str(base),
        "model": str(model),
        "text": str(text_file),
        "base_dtype": base_dtype,
        "model_dtype": dtype,
        "device": device,
        "base_vocab": vocab,
        "model_vocab": vm,
        "tokens": len(ids),
        "text_tokens": full,
        "estimate_bytes": {k: v for k, v in asdict(est).items() if k != "notes"} | {"total": est.total},
        "paths": {},
    }
    out["paths"] = kl_of_models(bm, mm, ids, vocab, paths=paths, progress=show)
    return out


def check_is_mount_of(base: Path, model: Path) -> None:
    """Refuse a ``model`` folder that is not a ``qwengpu build`` mount of ``base`` (by its sidecar,
    its token offset and the base config hash the build recorded)."""
    from qwengpu.model.mount import MountError, config_hash, read_mount_sidecar

    try:
        rec = read_mount_sidecar(model)
    except MountError:
        raise QwenGPUError(f"{model} is not a qwengpu mount (no valid qwengpu_mount.json): `qwengpu kl` "
                           "measures a mount against its base; build one with `qwengpu build --base BASE "
                           "--out DIR` (a plain checkpoint against itself would only print KL 0)") from None
    vocab = _text_config(base)["vocab_size"]
    if rec.get("token_offset") != vocab:
        raise QwenGPUError(f"{model} was mounted on a base with {rec.get('token_offset')} tokens, {base} has "
                           f"{vocab}: not its base")
    try:
        cfg = json.loads((base / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise QwenGPUError(f"{base / 'config.json'}: unreadable ({exc})") from None
    if config_hash(cfg) != rec.get("base_config_sha256"):
        raise QwenGPUError(f"{base}: its config.json is not the one {model} was built from (pass the base "
                           "the mount was built from)")


def kl_of_models(base_model, mounted_model, ids: list[int], vocab: int, *, paths: tuple[str, ...] = PATHS,
                 progress: bool | Progress = False) -> dict[str, dict]:
    """KL(base ‖ mounted) statistics of already loaded models on token ids, per path (for scripts
    that hold the models anyway, e.g. bench/device)."""
    import torch

    show = progress if isinstance(progress, Progress) else Progress(bool(progress))
    dev = next(mounted_model.parameters()).device
    x = torch.tensor([ids], device=dev)
    res: dict[str, dict] = {}
    for p in paths:
        if p not in PATHS:
            raise QwenGPUError(f"unknown path {p!r} (expected prefill, decode or both)")
        st = PathStats()
        show.start(p, len(ids))
        if p == "prefill":
            _prefill(base_model, mounted_model, x, vocab, st)
            show.tokens(len(ids))
        else:
            _decode(base_model, mounted_model, x, vocab, st, show.tokens)
        res[p] = st.summary()
    return res


def format_report(r: dict) -> str:
    """A short human-readable table of ``compute_kl``'s result."""
    cut = f" (of {r['text_tokens']})" if r["text_tokens"] > r["tokens"] else ""
    lines = [
        f"KL(base ‖ mounted) over the base's {r['base_vocab']} tokens "
        f"(mounted vocabulary {r['model_vocab']}), {r['tokens']} tokens of {r['text']}{cut}",
        f"base {r['base_dtype']}, mounted {r['model_dtype']}, on {r['device']}; tokens/s counts each path's "
        "compute (both models), not the loading",
        f"{'path':<8} {'tokens':>7} {'mean KL':>11} {'max KL':>11} {'top-1':>8} {'machine mass':>13} "
        f"{'s':>8} {'tokens/s':>9}",
    ]
    for name, s in r["paths"].items():
        rate = s["tokens"] / s["seconds"] if s["seconds"] > 0 else 0.0
        lines.append(
            f"{name:<8} {s['tokens']:>7} {s['mean_kl']:>11.3e} {s['max_kl']:>11.3e} "
            f"{100 * s['top1_agreement']:>7.2f}% {s['max_machine_mass']:>13.3e} {s['seconds']:>8.2f} "
            f"{rate:>9.2f}"
        )
    return "\n".join(lines)


def add_parser(sub) -> None:
    """The ``kl`` sub-command's arguments (registered by qwengpu/cli.py)."""
    p = sub.add_parser(
        "kl",
        help="KL(base ‖ mounted) per token on a text, on the prefill and the decode path",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    p.add_argument("--base", required=True, help="the base Qwen3.5 checkpoint folder")
    p.add_argument("--model", required=True, help="the mounted checkpoint folder (qwengpu build --out)")
    p.add_argument("--text", required=True, help="a UTF-8 text file, tokenized with the base's tokenizer")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--max-tokens", type=int, default=512, help="use the first N tokens (default 512)")
    p.add_argument("--path", choices=["prefill", "decode", "both"], default="both")
    p.add_argument("--base-dtype", choices=BASE_DTYPES, default="float32",
                   help="dtype the base runs in (default float32)")
    p.add_argument("--dtype", default="float32", metavar="{float32,bfloat16}",
                   help="dtype the mounted model runs in (default float32; float16 is refused: the mount's "
                   "flag gain 2^80 overflows it)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")


def cmd_kl(args: argparse.Namespace) -> int:
    """Run ``compute_kl`` from parsed arguments and print the table or the JSON."""
    import torch

    _quiet_transformers()
    if args.device == "cpu" and "OMP_NUM_THREADS" in os.environ:
        torch.set_num_threads(max(1, int(os.environ["OMP_NUM_THREADS"] or 1)))
    paths = PATHS if args.path == "both" else (args.path,)
    r = compute_kl(args.base, args.model, args.text, max_tokens=args.max_tokens, paths=paths,
                   base_dtype=args.base_dtype, dtype=args.dtype, device=args.device,
                   progress=Progress(True), require_mount=True)
    print(json.dumps(r, indent=2) if args.json else format_report(r))
    return 0
