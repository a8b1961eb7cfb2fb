"""Weight-sync buckets: size and dtype limits, exact flatten/unflatten round trip."""

from __future__ import annotations

import pytest
import torch

from maigym_ray.weights.buckets import flatten, plan_buckets, unflatten

pytestmark = [pytest.mark.unit, pytest.mark.numeric]


def test_buckets_respect_size_and_dtype_and_keep_order():
    named = [
        ("a", torch.Size([10]), torch.float32),
        ("b", torch.Size([20]), torch.float32),
        ("c", torch.Size([100]), torch.float32),
        ("d", torch.Size([5]), torch.bfloat16),
        ("e", torch.Size([5]), torch.bfloat16),
    ]
    buckets = plan_buckets(named, bucket_bytes=160)  # 40 float32
    assert [b.indices for b in buckets] == [(0, 1), (2,), (3, 4)]  # c is too big and goes alone
    assert [b.dtype for b in buckets] == [torch.float32, torch.float32, torch.bfloat16]
    assert [b.numel for b in buckets] == [30, 100, 10]
    with pytest.raises(ValueError):
        plan_buckets(named, 0)


def test_flatten_unflatten_round_trip():
    tensors = [torch.randn(3, 4), torch.randn(5), torch.randn(2, 2, 2)]
    flat = flatten(tensors)
    assert flat.shape == (12 + 5 + 8,)
    back = unflatten(flat, [t.shape for t in tensors])
    assert all(torch.equal(a, b) for a, b in zip(tensors, back, strict=True))
    with pytest.raises(ValueError):
        unflatten(flat, [torch.Size([3])])
