"""WeightReceiver: a vLLM worker extension that loads new weights into the running model in place.

vLLM imports this class into its worker (``worker_extension_cls``) and the engine actor calls its methods
through ``collective_rpc``. ``collective_rpc`` does not carry torch tensors on CPU (a tensor arrives as a
tuple holding a dtype string), so each bucket travels as bytes and is rebuilt here. It is handed to
``reload_weights``, which also handles the CPU backend's repacked weights; a plain ``load_weights`` fails
there ("Parameter has no attribute weight_loader").
"""

from __future__ import annotations

from typing import Any

import torch

from maigym_ray.weights.buckets import unflatten

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def encode_bucket(names: list[str], tensors: list[torch.Tensor]) -> dict[str, Any]:
    """One bucket as plain data: flat bytes, dtype name, names and shapes (same dtype for all tensors)."""
    from maigym_ray.weights.buckets import flatten

    flat = flatten([t.detach().cpu().contiguous() for t in tensors])
    dtype = str(flat.dtype).removeprefix("torch.")
    raw = flat.view(torch.int16) if flat.dtype == torch.bfloat16 else flat  # numpy has no bfloat16
    return {
        "data": raw.numpy().tobytes(),
        "dtype": dtype,
        "names": names,
        "shapes": [list(t.shape) for t in tensors],
    }


def decode_bucket(bucket: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """The (name, tensor) pairs of an encoded bucket."""
    dtype = _DTYPES[bucket["dtype"]]
    carrier = torch.int16 if dtype == torch.bfloat16 else dtype
    flat = torch.frombuffer(bytearray(bucket["data"]), dtype=carrier)
    if dtype == torch.bfloat16:
        flat = flat.view(torch.bfloat16)
    tensors = unflatten(flat, [torch.Size(s) for s in bucket["shapes"]])
    return list(zip(bucket["names"], tensors, strict=True))


class WeightReceiver:
    """Mixed into vLLM's worker; ``self`` is the worker (it has ``reload_weights``)."""

    def load_buckets(self, buckets: list[dict[str, Any]]) -> int:
        """Loads every tensor of ``buckets`` into the model in place; returns how many were loaded."""
        named = [pair for b in buckets for pair in decode_bucket(b)]
        self.reload_weights(weights_iterator=iter(named), is_checkpoint_format=True)  # type: ignore[attr-defined]
        return len(named)
