"""The conformance corpus generator's modules (see tools/gen_corpus.py)."""

from . import k_atomic, k_basic, k_control, k_float, k_numeric, k_shared, k_warp

ALL_MODULES = [k_basic, k_float, k_control, k_shared, k_atomic, k_warp, k_numeric]
