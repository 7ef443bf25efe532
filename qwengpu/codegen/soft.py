"""Lowering for the weights, the entry point: importing this module registers every expander.

The pieces import one way (no import cycle), each registering its expanders in the framework's
registry when imported:

* ``softcore``: the framework (``EXPANDERS``, ``expander``, ``Fresh``/``Seq``, ``Routine`` and
  call sites, outlined windows, ``expand_for_weights``) and the integer expanders (``mul``,
  ``mulhi``, ``mulw``, ``plop``, division, sub-word loads); its docstring has the rules;
* ``softfloat`` / ``softfloat64``: the float and float64 ops as integer sequences;
* ``softmem``: memory spaces, atomics, sub-word stores, warp ops, launch shapes, and the launch
  pipeline (``lower_for_weights``, ``run_weights``) that needs all of the above.

This module imports them all and re-exports ``softcore``'s names, so ``soft.expand_for_weights``
/ ``soft.run_for_weights`` always see the whole registry (a module importing only ``softcore``
would expand no float or memory op). Nothing here is imported by the pieces.
"""

from __future__ import annotations

# softfloat, softfloat64, softmem: imported for their registration in ``softcore.EXPANDERS``
from qwengpu.codegen import softfloat, softfloat64, softmem  # noqa: F401
from qwengpu.codegen.softcore import (
    CSE_OPS,
    CSE_REACH,
    EXPANDERS,
    FALSE,
    FLOAT_OPS,
    IMPURE,
    INTEGER_EXPANDED,
    M32,
    MIN_WINDOW,
    MUL_VARIANTS,
    OUTLINE_MODES,
    ROM_BUDGET,
    ROUTERS,
    ROUTINE_MODES,
    SIDE_EFFECTS,
    TRUE,
    WEIGHT_CMPS,
    WEIGHT_OPS,
    WMAX,
    ZERO,
    Expander,
    Fresh,
    Options,
    Routine,
    RoutineInstance,
    Seq,
    Window,
    X,
    call,
    const_plan,
    expand_for_weights,
    expander,
    find_windows,
    in_weights,
    local_value_numbering,
    mul_into,
    mulhi_into,
    negations,
    register_floats,
    routable,
    route_floats,
    run_for_weights,
    simulate_for_weights,
    special_bits,
    udivmod_into,
    unsupported_ops,
    value_bounds,
    weight_name,
)

__all__ = [
    "WEIGHT_OPS",
    "WEIGHT_CMPS",
    "SIDE_EFFECTS",
    "INTEGER_EXPANDED",
    "ROM_BUDGET",
    "MUL_VARIANTS",
    "ROUTINE_MODES",
    "OUTLINE_MODES",
    "M32",
    "WMAX",
    "Options",
    "Fresh",
    "Seq",
    "Expander",
    "EXPANDERS",
    "expander",
    "Routine",
    "RoutineInstance",
    "call",
    "ROUTERS",
    "routable",
    "weight_name",
    "in_weights",
    "unsupported_ops",
    "special_bits",
    "value_bounds",
    "negations",
    "expand_for_weights",
    "CSE_OPS",
    "CSE_REACH",
    "local_value_numbering",
    "IMPURE",
    "MIN_WINDOW",
    "Window",
    "find_windows",
    "X",
    "ZERO",
    "const_plan",
    "mul_into",
    "udivmod_into",
    "mulhi_into",
    "simulate_for_weights",
    "run_for_weights",
    "FLOAT_OPS",
    "register_floats",
    "route_floats",
    "FALSE",
    "TRUE",
]
