"""The token census (``runtime.engine.token_census``): every token of a trace counted once, by kind."""

from __future__ import annotations

from qwengpu.machine import protocol as P
from qwengpu.runtime.engine import CENSUS_KINDS, token_census


def test_census_counts_each_kind_and_every_token():
    trace = [
        P.pass_(3, 0), P.ctl(P.MASK, 5), P.data(0, 1), P.data(1, 2), P.ctl(P.STORE, 1),
        P.ctl(P.BANK, 1), P.pass_(4, 1), P.ctl(P.SHORT, 0), P.ctl(P.USHORT, 2), P.ctl(P.BLOCK, 1),
        P.ctl(P.BAR, 0), P.ctl(P.DUMPADDR, 0), P.data(0, 7), P.data(1, 0), P.data(2, 0), P.ctl(P.HALT),
    ]  # fmt: skip
    n = token_census(trace)
    assert tuple(n) == CENSUS_KINDS
    assert n == {"pass": 2, "mask": 1, "bank": 1, "result": 2, "short": 2, "store": 1, "dump": 4,
                 "control": 3}
    assert sum(n.values()) == len(trace)
