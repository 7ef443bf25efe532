"""``qwengpu verify``: check a mounted checkpoint bit for bit, without trusting it.

Why: a mount is tens of GB written once and then loaded for every launch; a flipped bit in a
compiled weight silently breaks launches (or, worse, only some), and a mount from another compiler
version runs another machine. Verify reads safetensors only (headers and raw bytes: no pickle, no
remote code) and checks:

* the sidecar's compiler version against this qwengpu's (another version is named as such);
* every stored tensor's bytes against the sha256 the build recorded (a flipped bit is named);
* every compiled tensor recomputed from the machine (the cache entry of this compiler version,
  built when absent) through the documented transform (``mount.make_plan``) and compared bit for
  bit; with ``--base``, every base tensor recomputed from the base the same way, and the base's
  config hash checked;
* the config (mounted hidden, layers, layer types, vocabulary, untied, float32) and the tokenizer
  (machine token ``t`` at id ``V + t``, both ways; with ``--base``, the base's ids unchanged).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from qwengpu.errors import CheckpointError
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


def _stored_sha(ck: Checkpoint, name: str) -> str:
    h = hashlib.sha256()
    info = ck.info(name)
    lo, hi = info["data_offsets"]
    step = 1 << 26
    for a in range(0, hi - lo, step):
        h.update(ck.raw(name, a, min(step, hi - lo - a)))
    return h.hexdigest()


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
                 recompute: bool = True) -> dict[str, Any]:
    """Every check above; returns a report (``ok``, ``problems``, counts). Never raises for a
    mismatch (the report says it); raises only when ``model_dir`` is not a mount at all.
    ``recompute=False`` (``--quick``): the stored bytes against the build's record only."""
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
    for i, n in enumerate(sorted(names & set(sums))):
        stored[n] = _stored_sha(ck, n)
        if stored[n] != sums[n]:
            problems.append(f"tensor {n}: stored bytes differ from the build's sha256 (damaged)")
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
        machine = inspect_machine(machine_entry(mcfg, progress))
        try:
            plan = make_plan(base, base_cfg, machine, width=rec["mounted_hidden"])
        except MountError as e:
            problems.append(f"cannot recompute the mount: {e}")
            plan = None
        if plan is not None:
            for t in plan.tensors:
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
            if base is not None:
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
        want = machine.ckpt.get("model.norm.weight").float()[used]
        if not torch.equal(got[mdims].view(torch.int32), want.view(torch.int32)) or \
                float(got[plan.flag_dim]) != FLAG_GAIN - 1.0:
            problems.append(f"tensor {name}: the machine dims or the flag gain differ from the transform")
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
    if src == "model.embed_tokens.weight":  # base rows: the flag value, zero on the machine dims
        for a in range(0, V, CHUNK_ROWS):
            got = ck.rows(name, a, min(V, a + CHUNK_ROWS))
            if (got[:, plan.flag_dim] != ALPHA).any() or got[:, plan.H:plan.flag_dim].ne(0).any():
                problems.append(f"tensor {name}: base rows {a}.. break the flag / zero machine dims")
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

    rep = verify_mount(args.model, args.base, progress=None if args.json else note, recompute=not args.quick)
    if args.json:
        print(json.dumps(rep))
    elif rep["ok"]:
        print(f"{args.model}: OK — {rep['tensors_hashed']} tensors match the build's record, "
              f"{rep['tensors_recomputed']} recomputed bit for bit"
              + ("" if args.base else " (machine side; pass --base to recompute the base's too)")
              + f"; tokenizer {rep['tokenizer']}; compiler version {rep['compiler_version']} "
              f"({rep['seconds']:.1f} s)")
    else:
        print(f"{args.model}: FAILED ({len(rep['problems'])} problems)")
        for p in rep["problems"][:50]:
            print(f"  {p}")
    return 0 if rep["ok"] else 9
