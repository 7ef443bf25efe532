"""``qwengpu kl`` measures a mount against its own base: a plain checkpoint (which against itself
would print KL 0 and top-1 100 %) or the mount of another base is refused; ``--dtype`` sets the
mounted side's dtype (float16 refused); progress names each stage and its tokens/s leaves out the
loading."""

from __future__ import annotations

import io
import json
import time

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from qwengpu.model import kl as klmod  # noqa: E402
from qwengpu.model.synthetic import make_synthetic_base  # noqa: E402

TEXT = "The answer is 42. What is the sum of 1 and 2? It is 3.\n__global__ void k() {}\n"


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    root = tmp_path_factory.mktemp("klplain")
    base = make_synthetic_base(root / "base", hidden=64, layers=1, vocab=1024, dtype="float32")
    text = root / "t.txt"
    text.write_text(TEXT)
    return base, text


def _kl(argv, capsys):
    from qwengpu.cli import main

    code = main(["kl", *argv])
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err
    return code, cap.out, cap.err


def test_a_plain_checkpoint_is_refused(plain, capsys):
    """The old command printed KL 0 and top-1 100 % here."""
    base, text = plain
    code, out, err = _kl(["--base", str(base), "--model", str(base), "--text", str(text)], capsys)
    assert code != 0 and out == ""
    assert "error:" in err and "is not a qwengpu mount" in err and "qwengpu build" in err


def test_the_mount_of_another_base_is_refused(plain, small_mount, capsys):
    base, text = plain  # same vocabulary as the small mount's base, another config
    code, out, err = _kl(["--base", str(base), "--model", str(small_mount), "--text", str(text)], capsys)
    assert code != 0 and out == "" and "is not the one" in err and "was built from" in err


def test_dtype_float16_and_unknown_are_refused(small_base, small_mount, plain, capsys):
    _, text = plain
    for dt, msg in (("float16", "float16 is not supported"), ("int8", "unknown dtype 'int8'")):
        code, out, err = _kl(["--base", str(small_base), "--model", str(small_mount), "--text", str(text),
                              "--dtype", dt], capsys)
        assert code != 0 and out == "" and msg in err, err


def test_progress_rate_leaves_out_the_loading():
    """A fake clock: 100 s of loading, then 5 tokens in 5 s is 1 token/s (not 5/105)."""
    now = [0.0]
    out = io.StringIO()
    p = klmod.Progress(True, stream=out, clock=lambda: now[0], every=0.0)
    p.stage("loading the base")
    now[0] = 100.0
    p.stage("loading the mounted model")
    p.start("decode", 10)
    now[0] = 105.0
    p.tokens(5)
    now[0] = 110.0
    p.tokens(10)
    assert out.getvalue().splitlines() == [
        "kl [0:00] loading the base",
        "kl [1:40] loading the mounted model",
        "kl [1:40] decode: 10 tokens",
        "kl decode: 5/10 tokens, 1.00 tokens/s, 0:05 left",
        "kl decode: 10/10 tokens, 1.00 tokens/s",
    ]


def test_progress_of_a_run_excludes_load_time(plain, monkeypatch):
    """Through ``compute_kl``: loading is made to take 1000 s on the progress clock; the decode rate
    shown must still be the decode's own (far above tokens / 1000 s)."""
    base, text = plain
    offset = [0.0]
    real_load = klmod._load

    def slow_load(*a, **k):
        offset[0] += 1000.0
        return real_load(*a, **k)

    monkeypatch.setattr(klmod, "_load", slow_load)
    out = io.StringIO()
    prog = klmod.Progress(True, stream=out, clock=lambda: time.monotonic() + offset[0], every=0.0)
    r = klmod.compute_kl(base, base, text, max_tokens=8, paths=("decode",), progress=prog)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("kl [0:00] loading the base ") and "(float32)" in lines[0]
    assert lines[1].startswith("kl [16:4") and "loading the mounted model " in lines[1]
    assert lines[2].startswith("kl [33:") and lines[2].endswith("decode: 8 tokens")
    last = lines[-1]
    assert last.startswith("kl decode: 8/8 tokens, ") and last.endswith(" tokens/s")
    rate = float(last.split(", ")[1].split()[0])
    assert rate > 8 / 1000.0 * 10, last
    assert r["paths"]["decode"]["tokens"] == 8


def test_mounted_side_in_bfloat16(small_base, small_mount, plain, capsys):
    """``--dtype bfloat16``: the mounted model loads and runs in bfloat16 (half the weight bytes in
    the estimate), the report says so, both bfloat16 sides agree on the top token."""
    _, text = plain
    code, out, err = _kl(["--base", str(small_base), "--model", str(small_mount), "--text", str(text),
                          "--dtype", "bfloat16", "--base-dtype", "bfloat16", "--path", "prefill",
                          "--max-tokens", "6", "--json"], capsys)
    assert code == 0, err
    r = json.loads(out)
    assert r["model_dtype"] == "bfloat16" and r["base_dtype"] == "bfloat16"
    assert r["estimate_bytes"]["model_weights"] == 2 * klmod.checkpoint_elements(small_mount)
    s = r["paths"]["prefill"]
    assert s["tokens"] == 6 and s["top1_agreement"] == 1.0 and s["max_machine_mass"] <= 1e-30
    assert "loading the mounted model" in err and "(bfloat16)" in err
