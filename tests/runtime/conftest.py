"""Runtime tests: torch on at most 2 threads (this is what the CI machine has)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def two_threads():
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, min(2, old)))
    yield
    torch.set_num_threads(old)
