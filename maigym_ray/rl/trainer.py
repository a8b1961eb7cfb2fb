"""TorchTrainer: the GRPO policy update on an HF causal LM, in plain torch (CPU here; DeepSpeed on GPUs is
selected by config in the trainer actor).

``update`` takes packed sequences (see packing.py), collates them into micro-batches under a token budget,
computes the logprobs of every sequence's tokens, and accumulates the clipped token-level loss (plus an
optional k3 KL to a reference model) over the micro-batches. It then takes one optimizer step. The loss is
normalised over the whole batch, whatever the micro-batching, so the update does not depend on the token
budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from maigym_ray.rl.losses import clipped_policy_loss, k3_kl
from maigym_ray.rl.packing import PackedSequence, micro_batches


@dataclass
class TrainerConfig:
    """Optimisation settings of the policy update."""

    lr: float = 1e-5
    #: the ratio is clipped to [1 - eps_low, 1 + eps_high].
    eps_low: float = 0.2
    eps_high: float = 0.28
    #: weight of the k3 KL to the reference model (0 = no reference model needed).
    kl_coef: float = 0.0
    #: "token_mean" or "seq_mean_token_mean" (see losses.aggregate), normalised over the whole batch.
    aggregation: str = "token_mean"
    #: tokens per micro-batch (gradient accumulation runs over micro-batches).
    token_budget: int = 16384
    #: gradient-norm clip (0 = off).
    grad_clip: float = 1.0
    #: "sampled" (the engine's logprobs) or "recompute" (a no-grad forward of the current weights first).
    old_logprobs: str = "sampled"


def collate(seqs: list[PackedSequence], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Pads a micro-batch: ``input_ids``/``attention_mask`` [N, L]; ``loss_mask``/``old_logprobs`` [N, L-1]
    aligned with the predicted tokens (position i predicts token i+1)."""
    n, length = len(seqs), max(len(s) for s in seqs)
    ids = torch.full((n, length), pad_id, dtype=torch.long)
    attn = torch.zeros((n, length), dtype=torch.long)
    mask = torch.zeros((n, length), dtype=torch.float32)
    old = torch.zeros((n, length), dtype=torch.float32)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s.input_ids)
        attn[i, : len(s)] = 1
        mask[i, : len(s)] = torch.tensor(s.loss_mask, dtype=torch.float32)
        old[i, : len(s)] = torch.tensor(s.old_logprobs, dtype=torch.float32)
    adv = torch.tensor([s.advantage for s in seqs], dtype=torch.float32)
    return {
        "input_ids": ids,
        "attention_mask": attn,
        "loss_mask": mask[:, 1:],
        "old_logprobs": old[:, 1:],
        "advantages": adv,
    }


def token_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """[N, L-1] log p(token i+1 | tokens <= i) under ``model``."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


class TorchTrainer:
    """Holds the policy model, its optimizer and (optionally) a frozen reference model."""

    def __init__(self, model: Any, cfg: TrainerConfig | None = None, ref_model: Any = None) -> None:
        self.model = model
        self.cfg = cfg or TrainerConfig()
        self.ref_model = ref_model
        self.opt = torch.optim.AdamW(model.parameters(), lr=self.cfg.lr, weight_decay=0.0)
        if self.cfg.aggregation not in ("token_mean", "seq_mean_token_mean"):
            raise ValueError(
                f"aggregation {self.cfg.aggregation!r}: choose token_mean or seq_mean_token_mean"
            )

    def update(self, seqs: list[PackedSequence]) -> dict[str, float]:
        """One optimizer step over ``seqs`` (gradient accumulation over micro-batches)."""
        t0 = time.perf_counter()
        self.model.train()
        total_tokens = max(1.0, float(sum(sum(s.loss_mask[1:]) for s in seqs)))
        total_seqs = max(1, sum(1 for s in seqs if any(s.loss_mask[1:])))
        loss_sum = kl_sum = clip_sum = 0.0
        self.opt.zero_grad(set_to_none=True)
        for mb in micro_batches(seqs, self.cfg.token_budget):
            b = collate(mb)
            if self.cfg.old_logprobs == "recompute":
                with torch.no_grad():
                    b["old_logprobs"] = token_logprobs(self.model, b["input_ids"], b["attention_mask"])
            logp = token_logprobs(self.model, b["input_ids"], b["attention_mask"])
            per_token, clipped = clipped_policy_loss(
                logp, b["old_logprobs"], b["advantages"], b["loss_mask"], self.cfg.eps_low, self.cfg.eps_high
            )
            if self.cfg.kl_coef and self.ref_model is not None:
                with torch.no_grad():
                    ref = token_logprobs(self.ref_model, b["input_ids"], b["attention_mask"])
                kl = k3_kl(logp, ref, b["loss_mask"])
                per_token = per_token + self.cfg.kl_coef * kl
                kl_sum += float(kl.sum())
            if self.cfg.aggregation == "token_mean":
                loss = per_token.sum() / total_tokens
            else:
                tokens = b["loss_mask"].sum(dim=1).clamp(min=1.0)
                loss = (per_token.sum(dim=1) / tokens).sum() / total_seqs
            loss.backward()
            loss_sum += float(loss.detach())
            clip_sum += float(clipped.sum())
        if self.cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        return {
            "loss": loss_sum,
            "kl": kl_sum / total_tokens,
            "clip_frac": clip_sum / total_tokens,
            "tokens": float(sum(len(s) for s in seqs)),
            "update_s": time.perf_counter() - t0,
        }
