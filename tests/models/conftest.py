"""Every model test runs on one thread: tiny tensors run fastest so (see tests/decoding/test_search.py),
whatever thread count an earlier test left behind."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
