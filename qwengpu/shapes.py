"""The machine shapes by name, and the default: one machine everywhere.

``qwengpu run``/``check``/``eval``/``machine``, the Python API, the runner and the benches run the
machine compiled into Qwen3.5-2B's layer shape (``2b``: the one every mount uses, with the units that
fit there) unless told otherwise. The small ``test`` shape (hidden 2048, intermediate 2048: no room
for the multiplier or the float adders; the same protocol) exists for fast tests: pick it with
``--shape test``, ``shape="test"`` or ``QWENGPU_MACHINE_SHAPE=test`` (the test suite sets it).

Why a module of its own: the CLI's parser and the API resolve the default without importing torch or
the compiler (``import qwengpu`` stays light).
"""

from __future__ import annotations

import os

from qwengpu.errors import UsageError

#: the shape names, the default first
SHAPES = ("2b", "test")
DEFAULT_SHAPE_NAME = "2b"
#: the environment variable that overrides the default (``test`` for fast tests)
SHAPE_ENV = "QWENGPU_MACHINE_SHAPE"
SHAPE_HELP = (f"the layer shape the machine is compiled into: 2b (Qwen3.5-2B's layers, as every mount; "
              f"the default) or test (small and fast, no multiplier or float adders: more tokens); "
              f"${SHAPE_ENV} sets the default")


def default_shape_name() -> str:
    """``$QWENGPU_MACHINE_SHAPE`` when set (a bad value is a :class:`UsageError`), else ``2b``."""
    env = os.environ.get(SHAPE_ENV, "").strip()
    if not env:
        return DEFAULT_SHAPE_NAME
    if env.lower() not in SHAPES:
        raise UsageError(f"{SHAPE_ENV}={env!r} is not a machine shape (choose from {', '.join(SHAPES)})")
    return env.lower()


def resolve_shape_name(name: str | None) -> str:
    """``name`` checked (``2b`` or ``test``), or the default when None."""
    if name is None:
        return default_shape_name()
    if name not in SHAPES:
        raise UsageError(f"unknown machine shape {name!r} (choose from {', '.join(SHAPES)})")
    return name
