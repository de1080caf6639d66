"""The suite's own hygiene: a test's change to process-wide torch settings does not reach the tests after it
(``conftest.keep_torch_threads``). The two tests run in this order, in one worker (``--dist loadfile``)."""

from __future__ import annotations

import pytest
import torch

FOUND: list[int] = []


def test_a_test_raises_torch_threads() -> None:
    FOUND.append(torch.get_num_threads())
    torch.set_num_threads(FOUND[0] + 1)
    assert torch.get_num_threads() == FOUND[0] + 1


def test_the_next_test_starts_on_the_threads_the_first_found() -> None:
    if not FOUND:
        pytest.skip("meaningful after test_a_test_raises_torch_threads")
    assert torch.get_num_threads() == FOUND[0]
