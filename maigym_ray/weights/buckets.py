"""Weight sync buckets: named tensors flattened into few large buffers for one broadcast each (pure torch).

Broadcasting many small tensors pays a collective round trip per tensor; flat buckets of a configured size
(same dtype per bucket) keep the link busy. The receiving side unflattens each bucket into the named tensors
that vLLM's ``reload_weights`` takes. Every bucket carries the weights' version.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Bucket:
    """Which tensors (by index into the named list) share one flat buffer, and its dtype and size."""

    indices: tuple[int, ...]
    dtype: torch.dtype
    numel: int


def plan_buckets(shapes: list[tuple[str, torch.Size, torch.dtype]], bucket_bytes: int) -> list[Bucket]:
    """Groups tensors, in order, into buckets of at most ``bucket_bytes`` (a bigger tensor gets its own) and
    of one dtype each. Shapes: a list of (name, shape, dtype)."""
    if bucket_bytes <= 0:
        raise ValueError("bucket_bytes must be positive")
    buckets: list[Bucket] = []
    cur: list[int] = []
    cur_dtype: torch.dtype | None = None
    cur_numel = 0
    for i, (_name, shape, dtype) in enumerate(shapes):
        numel = int(torch.Size(shape).numel())
        size = numel * torch.empty((), dtype=dtype).element_size()
        cur_bytes = cur_numel * (torch.empty((), dtype=cur_dtype).element_size() if cur_dtype else 0)
        if cur and (dtype != cur_dtype or cur_bytes + size > bucket_bytes):
            buckets.append(Bucket(tuple(cur), cur_dtype, cur_numel))  # type: ignore[arg-type]
            cur, cur_numel = [], 0
        cur.append(i)
        cur_dtype = dtype
        cur_numel += numel
    if cur:
        buckets.append(Bucket(tuple(cur), cur_dtype, cur_numel))  # type: ignore[arg-type]
    return buckets


def flatten(tensors: list[torch.Tensor]) -> torch.Tensor:
    """One contiguous 1-D buffer holding ``tensors`` back to back (all of one dtype)."""
    return torch.cat([t.detach().reshape(-1) for t in tensors]) if tensors else torch.empty(0)


def unflatten(flat: torch.Tensor, shapes: list[torch.Size]) -> list[torch.Tensor]:
    """Views of ``flat`` with ``shapes`` (the inverse of ``flatten``)."""
    out, offset = [], 0
    for shape in shapes:
        n = int(torch.Size(shape).numel())
        out.append(flat[offset : offset + n].view(shape))
        offset += n
    if offset != flat.numel():
        raise ValueError(f"bucket holds {flat.numel()} elements, shapes need {offset}")
    return out
