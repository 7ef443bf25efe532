"""``qwengpu verify``: check a mounted checkpoint bit for bit, without trusting it.

Why: a mount is tens of GB written once and then loaded for every launch; a flipped bit in a
compiled weight silently breaks launches (or, worse, only some), and a mount from another compiler
version runs another machine. Verify reads safetensors only (headers and raw bytes: no pickle, no
remote code) and checks:

* the sidecar's compiler version against this qwengpu's (another version is named as such);
* every stored tensor's bytes against the sha256 the build recorded (a flipped bit is named), and
  every float32 tensor for NaN or infinite values, placed in the machine dims or the base dims
  (the mount's zeros multiply them: 0 * inf is NaN in the stock forward);
* every compiled tensor recomputed from the machine (the cache entry of this compiler version,
  built when absent, and checked against its own recorded sha256s before use: a damaged entry is
  refused, never recomputed from) through the documented transform (``mount.make_plan``) and
  compared bit for bit; without ``--base``, the base rows of the embedding and head and the final
  norm are checked above the base's dims in full (zeros, the flag); with ``--base``, every base
  tensor (every embedding and head row, every dim) recomputed from the base the same way, and the
  base's config hash checked;
* the config (mounted hidden, layers, layer types, vocabulary, untied, float32) and the tokenizer
  (machine token ``t`` at id ``V + t``, both ways; with ``--base``, the base's ids unchanged).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from qwengpu.errors import CheckpointError
from qwengpu.model.finite import hidden_axis, nonfinite_in_dims
from qwengpu.model.machine_checkpoint import MachineCacheError
from qwengpu.model.mount import (
    MACHINE_VOCAB,
    Checkpoint,
    MountError,
    config_hash,
    inspect_machine,
    machine_config_for,
    machine_entry,
    machine_token,
    make_plan,
    mount_config,
    read_mount_sidecar,
    text_config_of,
)
from qwengpu.model.safetensors_stream import tensor_bytes as _bytes


class VerifyError(CheckpointError):
    """The mount does not verify (the message lists what differs)."""


def _stored_sha(ck: Checkpoint, name: str, finite: bool = False) -> tuple[str, bool]:
    """(SHA-256 of the tensor's stored bytes, whether all its values are finite) in one read; the
    finiteness is looked at only for a float32 tensor and ``finite=True`` (else reported True)."""
    import torch

    h = hashlib.sha256()
    info = ck.info(name)
    lo, hi = info["data_offsets"]
    step = 1 << 26
    look = finite and info["dtype"] == "F32"
    ok = True
    for a in range(0, hi - lo, step):
        data = ck.raw(name, a, min(step, hi - lo - a))
        h.update(data)
        if look and ok:
            ok = bool(torch.isfinite(torch.frombuffer(bytearray(data), dtype=torch.float32)).all())
    return h.hexdigest(), ok


def _nonfinite_problems(ck: Checkpoint, name: str, origin: str, H: int) -> list[str]:
    """Where a tensor's non-finite values are: in the machine dims (above the base's ``H``: the
    mount's zeros there, so text breaks) or in the base dims (a launch reads them as 0 * inf)."""
    t = ck.get(name)
    axis = hidden_axis(name, t.dim())
    if axis is None:
        return [f"tensor {name} ({origin}): {nonfinite_in_dims(t, slice(None), 0)} non-finite values "
                "(NaN or infinite)"]
    out = []
    up = nonfinite_in_dims(t, slice(H, None), axis)
    low = nonfinite_in_dims(t, slice(0, H), axis)
    if up:
        out.append(f"tensor {name} ({origin}): {up} non-finite values in the machine dims {H}.."
                   f"{t.shape[axis] - 1} (the stock forward multiplies them by zeros: 0 * inf is NaN)")
    if low:
        out.append(f"tensor {name} ({origin}): {low} non-finite values in the base dims 0..{H - 1} (a launch "
                   "passes zeros through them: 0 * inf is NaN)")
    return out


def _pseudo_base_config(mounted: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any]:
    """The base's config as far as the plan needs it, recovered from the mount (no base at hand)."""
    cfg = json.loads(json.dumps(mounted))
    text = cfg if cfg.get("model_type") == "qwen3_5_text" else cfg["text_config"]
    lm = rec["layers"]["machine"][1]
    text.update(hidden_size=rec["hidden"], vocab_size=rec["base_vocab"],
                num_hidden_layers=rec["layers"]["base"][1] - rec["layers"]["base"][0],
                layer_types=text["layer_types"][lm:])
    return cfg


def verify_mount(model_dir: str | Path, base_dir: str | Path | None = None, progress=None,
                 recompute: bool = True, only: Collection[str] | None = None) -> dict[str, Any]:
    """Every check above; returns a report (``ok``, ``problems``, counts). Never raises for a
    mismatch (the report says it); raises only when ``model_dir`` is not a mount at all.
    ``recompute=False`` (``--quick``): the stored bytes against the build's record only.
    ``only`` (``--tensor``): check just these tensors (hash, finiteness, recompute); the machine
    cache entry is still checked whole before any recompute."""
    t0 = time.perf_counter()
    model_dir = Path(model_dir)
    rec = read_mount_sidecar(model_dir)
    ck = Checkpoint(model_dir)
    problems: list[str] = []
    report: dict[str, Any] = {"path": str(model_dir), "problems": problems}
    layout, text = text_config_of(ck.config)
    from qwengpu.model.machine_checkpoint import compiler_version

    mcfg = machine_config_for(text)
    current = compiler_version(mcfg)
    report["compiler_version"] = rec.get("compiler_version")
    report["current_compiler_version"] = current
    other_version = rec.get("compiler_version") != current
    if other_version:
        problems.append(f"built by compiler version {rec.get('compiler_version')}, this qwengpu compiles "
                        f"{current}: the mount holds another machine (rebuild it with `qwengpu build`)")
    # 1. stored bytes vs the build's record
    sums = rec.get("tensors", {})
    names = set(ck.names())
    for n in sorted(set(sums) - names):
        problems.append(f"tensor {n} is missing from the checkpoint")
    for n in sorted(names - set(sums)):
        problems.append(f"tensor {n} is not in the build's record")
    stored: dict[str, str] = {}
    origins = rec.get("tensor_origin", {})
    if only is not None:
        for n in sorted(set(only) - names):
            problems.append(f"tensor {n} is not in the checkpoint (--tensor)")
    for i, n in enumerate(sorted(names & set(sums))):
        if only is not None and n not in only:
            continue
        origin = origins.get(n, "base")  # the base side: where the mount's zeros multiply its values
        stored[n], finite = _stored_sha(ck, n, finite=origin in ("base", "both"))
        if stored[n] != sums[n]:
            problems.append(f"tensor {n}: stored bytes differ from the build's sha256 (damaged)")
        if not finite:
            problems.extend(_nonfinite_problems(ck, n, origin, int(rec["hidden"])))
        if progress is not None and i % 64 == 0:
            progress(f"hashed {i}/{len(names)} tensors")
    report["tensors_hashed"] = len(stored)
    # 2. recompute what can be recomputed
    base = Checkpoint(base_dir) if base_dir is not None else None
    if base is not None:
        base_cfg = base.config
        if config_hash(base_cfg) != rec.get("base_config_sha256"):
            problems.append(f"{base_dir}: its config.json is not the one this mount was built from")
    else:
        base_cfg = _pseudo_base_config(ck.config, rec)
    recomputed = 0
    if not other_version and recompute:
        if progress is not None:
            progress("recomputing the compiled tensors from the machine")
        plan = None
        try:  # the machine cache entry is checked against its recorded sha256s before it is used
            machine = inspect_machine(machine_entry(mcfg, progress))
        except MachineCacheError as e:
            problems.append(f"cannot recompute the mount: {e}")
        else:
            try:
                plan = make_plan(base, base_cfg, machine, width=rec["mounted_hidden"])
            except MountError as e:
                problems.append(f"cannot recompute the mount: {e}")
        if plan is not None:
            for t in plan.tensors:
                if only is not None and t.name not in only:
                    continue
                if t.name not in names:
                    problems.append(f"tensor {t.name} is missing from the checkpoint")
                    continue
                if list(ck.shape(t.name)) != list(t.shape):
                    problems.append(f"tensor {t.name}: shape {list(ck.shape(t.name))}, "
                                    f"expected {list(t.shape)}")
                    continue
                if t.produce is not None:
                    h = hashlib.sha256()
                    for chunk in t.produce():
                        h.update(_bytes(chunk))
                    recomputed += 1
                    if h.hexdigest() != stored.get(t.name):
                        problems.append(f"tensor {t.name} ({t.origin}): differs from the recomputed "
                                        "transform")
                elif t.origin == "both":  # no base: the machine's rows of the embedding / head
                    recomputed += _check_machine_rows(ck, t.name, plan, machine, problems)
            if base is not None and only is None:
                want = mount_config(base_cfg, plan, machine)
                if want != ck.config:
                    diff = sorted(k for k in set(want) | set(ck.config) if want.get(k) != ck.config.get(k))
                    problems.append(f"config.json differs from the mount's config in {', '.join(diff)}")
    report["tensors_recomputed"] = recomputed
    # 3. config essentials
    l_end = rec["layers"]["base"][1]
    V = int(rec["token_offset"])
    want = {"hidden_size": rec["mounted_hidden"], "num_hidden_layers": l_end, "vocab_size": V + MACHINE_VOCAB,
            "tie_word_embeddings": False}
    for k, v in want.items():
        if text.get(k) != v:
            problems.append(f"config.json: {k} = {text.get(k)!r}, expected {v!r}")
    if text.get("dtype", ck.config.get("dtype")) != "float32":
        problems.append("config.json: dtype is not float32 (the compensation needs float32)")
    if len(text.get("layer_types", [])) != l_end:
        problems.append("config.json: layer_types does not list every layer")
    # 4. tokenizer
    extended = rec.get("tokenizer_extended")
    report["tokenizer"] = _check_tokenizer(model_dir, base_dir, V, problems) if extended else "none"
    report["ok"] = not problems
    report["seconds"] = round(time.perf_counter() - t0, 3)
    return report


def _check_machine_rows(ck: Checkpoint, name: str, plan, machine, problems: list[str]) -> int:
    """Without the base: the machine's rows of the embedding / lm_head and the final norm's machine
    dims, recomputed and compared bit for bit."""
    import torch

    from qwengpu.model.mount import ALPHA, CHUNK_ROWS, FLAG_GAIN, FLAG_WEIGHT

    V, used, mdims = plan.V, torch.tensor(machine.used), torch.tensor(plan.mdims)
    if name.endswith("norm.weight"):
        got = ck.get(name)
        want = torch.zeros(plan.Hp)  # above the base's dims: the machine's, the flag gain, zeros
        want[mdims] = machine.ckpt.get("model.norm.weight").float()[used]
        want[plan.flag_dim] = FLAG_GAIN - 1.0
        if not torch.equal(got[plan.H:].view(torch.int32), want[plan.H:].view(torch.int32)):
            problems.append(f"tensor {name}: the machine dims, the flag gain or the zeros above the base's "
                            "dims differ from the transform")
        return 1
    src = "lm_head.weight" if name == "lm_head.weight" else "model.embed_tokens.weight"
    for a in range(0, MACHINE_VOCAB, CHUNK_ROWS):
        b = min(MACHINE_VOCAB, a + CHUNK_ROWS)
        o = torch.zeros(b - a, plan.Hp)
        o[:, mdims] = machine.ckpt.rows(src, a, b).float()[:, used]
        if src == "lm_head.weight":
            o[:, plan.flag_dim] = FLAG_WEIGHT
        else:
            o[:, torch.tensor(plan.filler_dims, dtype=torch.long)] = torch.tensor(
                plan.filler_values, dtype=torch.float32)
        got = ck.rows(name, V + a, V + b)
        if not torch.equal(got.view(torch.int32), o.view(torch.int32)):
            problems.append(f"tensor {name}: machine rows {V + a}..{V + b - 1} differ from the transform")
            return 1
    # base rows, every dim above the base's: zero, but the embedding's flag (ALPHA), bit for bit
    want = torch.zeros(plan.Hp - plan.H)
    if src == "model.embed_tokens.weight":
        want[plan.flag_dim - plan.H] = ALPHA
    for a in range(0, V, CHUNK_ROWS):
        got = ck.rows(name, a, min(V, a + CHUNK_ROWS))[:, plan.H:]
        bad = got.view(torch.int32).ne(want.view(torch.int32)).any(1)
        if bad.any():
            r = a + int(bad.nonzero()[0])
            problems.append(f"tensor {name}: base row {r} is not the transform's above the base's dims "
                            f"(zeros{', the flag ALPHA' if src == 'model.embed_tokens.weight' else ''})")
            return 1
    return 1


def _check_tokenizer(model_dir: Path, base_dir, V: int, problems: list[str]) -> str:
    from tokenizers import Tokenizer

    try:
        tk = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    except Exception as e:  # noqa: BLE001 - any parse failure is the finding
        problems.append(f"tokenizer.json does not load with tokenizers ({e})")
        return "broken"
    for t in (0, 1, 255, 4096, MACHINE_VOCAB - 1):
        if tk.id_to_token(V + t) != machine_token(t) or tk.token_to_id(machine_token(t)) != V + t:
            problems.append(f"tokenizer: machine token {t} is not id {V + t} both ways")
            return "wrong"
    bad = [t for t in range(MACHINE_VOCAB) if tk.id_to_token(V + t) != machine_token(t)]
    if bad:
        problems.append(f"tokenizer: {len(bad)} machine tokens at the wrong id (first: {bad[0]})")
    if base_dir is not None and (Path(base_dir) / "tokenizer.json").is_file():
        bt = Tokenizer.from_file(str(Path(base_dir) / "tokenizer.json"))
        bv, mv = bt.get_vocab(with_added_tokens=True), tk.get_vocab(with_added_tokens=True)
        changed = [k for k, i in bv.items() if mv.get(k) != i]
        if changed:
            problems.append(f"tokenizer: {len(changed)} base tokens changed id (first: {changed[0]!r})")
        for fn in ("chat_template.jinja",):
            a, b = Path(base_dir) / fn, model_dir / fn
            if a.is_file() and (not b.is_file() or a.read_bytes() != b.read_bytes()):
                problems.append(f"{fn} differs from the base's")
    return "ok" if not bad else "wrong"


def cmd_verify(args) -> int:
    import sys

    t0 = time.perf_counter()

    def note(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:6.1f} s] {msg}", file=sys.stderr, flush=True)

    from qwengpu.model.lean import LEAN_FORMAT, mount_format

    if mount_format(args.model) == LEAN_FORMAT:  # the default `qwengpu build` output
        from qwengpu.model.lean_verify import verify_lean

        rep = verify_lean(args.model, args.base, progress=None if args.json else note, quick=args.quick)
    else:
        rep = verify_mount(args.model, args.base, progress=None if args.json else note,
                           recompute=not args.quick, only=set(args.tensor) if args.tensor else None)
    if args.json:
        print(json.dumps(rep))
    elif rep["ok"]:
        print(f"{args.model}: OK — {rep['tensors_hashed']} tensors"
              + (" (those named by --tensor)" if args.tensor else "") + " match the build's record, "
              f"{rep['tensors_recomputed']} recomputed bit for bit"
              + ("" if args.base else " (machine side; pass --base to recompute the base's too)")
              + f"; tokenizer {rep['tokenizer']}; compiler version {rep['compiler_version']} "
              f"({rep['seconds']:.1f} s)")
    else:
        print(f"{args.model}: FAILED ({len(rep['problems'])} problems)")
        for p in rep["problems"][:50]:
            print(f"  {p}")
    return 0 if rep["ok"] else 9
