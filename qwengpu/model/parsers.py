"""The mount's sub-command arguments (``build``, ``verify``), kept free of torch.

``qwengpu --help`` and every interpreter command must work on a plain ``pip install qwengpu``
(no torch): the parsers live here, the commands in ``model/mount.py`` and ``model/verify.py``,
imported only when the command runs.
"""

from __future__ import annotations


def add_build_parser(sub) -> None:
    """``qwengpu build --base BASE --out OUT [--stock [--width N]] [--overwrite] [--json]``."""
    p = sub.add_parser("build", help="mount the machine beside a local Qwen3.5 checkpoint (default: the "
                       "base's files verbatim + the machine sparse; --stock: one stock float32 checkpoint)")
    p.add_argument("--base", required=True, metavar="DIR", help="a local Qwen3.5 checkpoint folder "
                   "(Qwen3_5ForCausalLM or Qwen3_5ForConditionalGeneration, safetensors)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to create (new or empty)")
    p.add_argument("--stock", action="store_true", help="write the stock single float32 checkpoint (the "
                   "machine's layers, then the base's, loadable by AutoModelForCausalLM and vLLM) instead of "
                   "the default lean mount (the base's files verbatim + the machine stored sparse)")
    p.add_argument("--width", type=int, metavar="N", help="--stock: mounted hidden size (default: H * 4^k "
                   "when one fits, so text logits stay bit-identical, else H + 2048)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    p.add_argument("--json", action="store_true", help="print the sidecar summary as JSON")


def add_verify_parser(sub) -> None:
    """``qwengpu verify --model DIR [--base DIR] [--quick] [--tensor NAME ...] [--json]``."""
    p = sub.add_parser("verify", help="check a mounted checkpoint bit for bit (recompute every compiled "
                       "tensor; with --base, every base tensor)")
    p.add_argument("--model", required=True, metavar="DIR", help="the mounted checkpoint (`qwengpu build`)")
    p.add_argument("--base", metavar="DIR", help="the base it was built from (checks the base's tensors too)")
    p.add_argument("--quick", action="store_true", help="only the stored bytes against the build's "
                   "sha256 record (no recompute)")
    p.add_argument("--tensor", action="append", metavar="NAME", help="check only this tensor (repeatable): "
                   "its bytes, its values' finiteness and its recompute")
    p.add_argument("--json", action="store_true")
