"""Model shapes the machine is compiled into: the small test shape, and the default machine shape.

Why here: both the checkpoint builder (``model/``) and the runtimes (``runtime/``) need them; the
runtime imports ``model``, never the other way round."""

from __future__ import annotations

from qwengpu.machine.shape import MachineShape

DEFAULT_SHAPE = MachineShape()
#: read-only words of the 2B shape: six banks of 2,048 rows of four words (one layer's 16 key heads
#: each), above its 16,384 writable words: 65,536 in all (docs/machine-in-weights.md 9.17)
RO_WORDS_2B = 49152
#: the test shape's: one bank of 512 rows of four words (8 key heads of 128 rows, 64 bits each)
SMALL_RO_WORDS, SMALL_RO_BANK_ROWS = 2048, 512
#: the ROM of the machine in a shape without the units' room (the test shape): one 1,024-row bank.
#: Four banks (4,096 rows, the 2B shape's) do not fit its residual (measured: FitError, "all 2041
#: signal dimensions are taken"); the protocol is the same (12-bit pc, BANK tokens)
SMALL_ROM_ROWS = 1024
#: global memory of the test shape: two pages in two banks of 1,024 rows (half a layer each), so
#: the fast tests run the page tokens, the bank select and the one read port the 2B shape's
#: 16,384 words use (measured: 40 layers, as with 1,024 words), built before the datapath
#: (``MachineShape.gmem_late``)
SMALL_GMEM_WORDS, SMALL_GMEM_BANK_ROWS = 2048, 1024
#: the smallest ``intermediate_size`` whose layers host the 4-lane multiplier (measured: the
#: machine with it does not fit intermediate 2048, 3072 or 4096 at hidden 2048, and fits 6144, the
#: Qwen3.5-2B shape, at 37 layers: docs/machine-in-weights.md section 8)
MULTIPLIER_MIN_INTERMEDIATE = 6144
#: the width (hidden size) the 2B-shape machine is compiled at: Qwen3.5-2B's layer fields, a wider
#: residual. The one-lane float multiplier needs it (measured: at 2,048 "all 2041 signal dimensions
#: are taken", at 2,304 too; at 2,560 43 layers, 2,533 signal dims; docs/machine-in-weights.md
#: 9.21). A mount's width is the base's plus this (``mount.default_width``): 4,608 for the 2B
MACHINE_WIDTH_2B = 2560


def machine_2b_config():
    """The layer config of the 2B-shape machine: Qwen3.5-2B's text config at MACHINE_WIDTH_2B."""
    from qwengpu.compiler import text_config

    return text_config("qwen3_5_2b_text", hidden_size=MACHINE_WIDTH_2B)


#: (hidden, intermediate) of the named machine shapes' layer configs (``config_named``; a test
#: checks them against the configs): the shape by name without building a transformers config
SHAPE_DIMS = {"2b": (MACHINE_WIDTH_2B, 6144), "test": (2048, 2048)}


def shape_for(config) -> MachineShape:
    """The machine compiled into ``config``'s layers (:func:`shape_of` its hidden and intermediate
    sizes)."""
    return shape_of(int(config.hidden_size), int(config.intermediate_size))


def shape_named(name: str) -> MachineShape:
    """The machine shape named ``2b`` or ``test``, without importing torch or transformers (the
    interpreter engine's "would the machine refuse this launch" note)."""
    return shape_of(*SHAPE_DIMS[name])


def shape_of(hidden: int, intermediate: int) -> MachineShape:
    """The machine compiled into layers of these sizes: with the multiplier and the float adders where
    they have room (both measured on the 2B shape: bench/fadd_unit.py), and the one-lane float
    multiplier at a width of MACHINE_WIDTH_2B or more."""
    if intermediate >= MULTIPLIER_MIN_INTERMEDIATE:
        return MachineShape(multiplier=True, fadd=True, ro_words=RO_WORDS_2B,
                            fmulf=hidden >= MACHINE_WIDTH_2B, lane_rows=True)
    return MachineShape(rom_rows=SMALL_ROM_ROWS, gmem_words=SMALL_GMEM_WORDS,
                        gmem_bank_rows=SMALL_GMEM_BANK_ROWS, gmem_late=False, lane_rows=True)


def read_only_test_shape() -> MachineShape:
    """The test shape with read-only words (one bank of SMALL_RO_BANK_ROWS rows above its 2,048
    writable words), for the tests of that path. Not the default test shape: with the bank its
    machine uses 1,977 residual dims, and a mount of the tests' hidden-128 base stays at width 2048
    (c = 4, bit-identical text) only while they are at most 1,914."""
    return MachineShape(rom_rows=SMALL_ROM_ROWS, gmem_words=SMALL_GMEM_WORDS,
                        gmem_bank_rows=SMALL_GMEM_BANK_ROWS, gmem_late=False,
                        ro_words=SMALL_RO_WORDS, ro_bank_rows=SMALL_RO_BANK_ROWS)


def test_config(hidden: int = 2048, intermediate: int = 2048):
    """The small Qwen3.5 shape the tests compile the machine into (fast on CPU)."""
    from transformers import Qwen3_5TextConfig

    return Qwen3_5TextConfig(
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        linear_num_key_heads=16,
        linear_num_value_heads=16,
        linear_key_head_dim=128,
        linear_value_head_dim=64,
        vocab_size=64,
    )
