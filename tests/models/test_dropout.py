"""attnmt's Dropout behaves like nn.Dropout: same keep rate, same scaling, same gradient rule."""

import pytest
import torch
from torch import nn

from attnmt.models.dropout import Dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keeps_one_minus_p_and_scales_the_kept(p):
    torch.manual_seed(0)
    x = torch.rand(200, 500, dtype=torch.float64) + 0.5  # no zeros of its own
    y = Dropout(p).train()(x)
    kept = y != 0
    n = kept.numel()
    assert abs(kept.double().mean().item() - (1 - p)) < 4 * ((p * (1 - p) / n) ** 0.5)
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    # the same statistics as torch's own dropout
    ref = nn.Dropout(p).train()(x)
    assert abs((ref != 0).double().mean().item() - kept.double().mean().item()) < 0.01


def test_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(1)
    x = torch.randn(30, 40, dtype=torch.float64, requires_grad=True)
    y = Dropout(0.4).train()(x)
    (grad,) = torch.autograd.grad((y * 3).sum(), x)
    expected = torch.where(y != 0, torch.full_like(x, 3 / 0.6), torch.zeros_like(x))
    torch.testing.assert_close(grad, expected)


def test_identity_in_eval_mode_and_with_p_zero():
    x = torch.randn(4, 5)
    assert Dropout(0.5).eval()(x) is x
    assert Dropout(0.0).train()(x) is x
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(1.0)


def test_the_same_seed_gives_the_same_mask():
    x = torch.ones(64, 64)
    torch.manual_seed(7)
    a = Dropout(0.3).train()(x)
    torch.manual_seed(7)
    b = Dropout(0.3).train()(x)
    assert torch.equal(a, b)
