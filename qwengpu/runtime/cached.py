"""The default launch path's model: the fast runtime gathered from the machine's lean cache entry.

Why its own module: it joins the engine's machine configs (:mod:`qwengpu.runtime.engine`), the lean
cache entry (:mod:`qwengpu.model.machine_sparse`) and the layer-by-layer gathering the lean mount
uses (:func:`qwengpu.runtime.lean.fast_from_lean`, which imports the engine: kept out of it).
``qwengpu run`` (``--runtime fast``, the default) loads this; ``--runtime stock`` and ``--replay``
load the stock checkpoint (:func:`qwengpu.runtime.engine.machine_model`).
"""

from __future__ import annotations

import sys

from qwengpu.machine import protocol as P
from qwengpu.machine.circuit import MachineShape
from qwengpu.model.configs import shape_for
from qwengpu.runtime.engine import machine_config

_FAST_CACHE: dict[tuple, object] = {}


def machine_fast(config=None, shape: MachineShape | None = None, progress=None):
    """The fast runtime's model (:class:`qwengpu.runtime.fast.FastModel`) of the machine for
    ``config`` (None: the default machine's), gathered from the lean cache entry
    (:mod:`qwengpu.model.machine_sparse`: ~0.8 GB on the 2B shape instead of the ~9 GB stock
    checkpoint; built when absent), once per process. Every stored part's SHA-256 is checked before
    its tensor is used; a damaged entry is rebuilt once, with a warning, never run."""
    from qwengpu.errors import CheckpointError
    from qwengpu.model import machine_sparse as S
    from qwengpu.runtime.lean import fast_from_lean

    config = config if config is not None else machine_config()
    shape = shape if shape is not None else shape_for(config)
    key = (repr(config.to_dict()), shape)
    if key not in _FAST_CACHE:

        def note(msg: str) -> None:  # the first use builds the entry: say so
            if msg.startswith(("compiling", "writing the machine sparse to")):
                print(f"qwengpu: {msg} (first use of this compiler version; cached afterwards)",
                      file=sys.stderr, flush=True)
            if progress is not None:
                progress(msg)

        entry, rec = S.entry_or_build(config, shape, progress=note)
        try:
            fast = fast_from_lean(entry, rec, progress)
        except (CheckpointError, OSError) as e:
            print(f"warning: machine cache entry unusable, rebuilding: {' '.join(str(e).split())}",
                  file=sys.stderr)
            entry, rec = S.entry_or_build(config, shape, progress=note, rebuild=True)
            fast = fast_from_lean(entry, rec, progress)
        _FAST_CACHE[key] = fast
    return _FAST_CACHE[key]


def fast_generate(fast):
    """``run_machine``'s ``generate_fn`` for a :class:`~qwengpu.runtime.fast.FastModel`: the greedy
    trace up to HALT (what ``run_trace_fast`` writes for the stock model it was gathered from)."""

    def generate_fn(prompt, max_tokens: int, on_token=None) -> list[int]:
        return fast.generate(prompt, max_tokens, stop=P.ctl(P.HALT), on_token=on_token)

    return generate_fn
