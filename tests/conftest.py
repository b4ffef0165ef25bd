import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same RNG state, so failures reproduce."""
    torch.manual_seed(0)
    yield
