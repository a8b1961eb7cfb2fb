"""TorchTrainer: the GRPO policy update on an HF causal LM, in plain torch (CPU here; DeepSpeed ZeRO on many
ranks is deepspeed_trainer.py, which shares this module's loss).

``update`` takes packed sequences (see packing.py), collates them into micro-batches under a token budget,
computes the logprobs of every sequence's tokens, and accumulates the clipped token-level loss (plus an
optional k3 KL to a reference model) over the micro-batches. It then takes one optimizer step. The loss is
normalised over the whole batch, whatever the micro-batching, so the update does not depend on the token
budget.
"""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from maigym_ray.errors import ConfigError
from maigym_ray.rl.losses import clipped_policy_loss, decoupled_weights, k3_kl
from maigym_ray.rl.packing import MICRO_BATCH_OVERHEAD, PackedSequence, micro_batches
from maigym_ray.rl.staleness import clip_by_staleness

OLD_LOGPROBS = ("sampled", "recompute", "round")
CORRECTIONS = ("none", "decoupled")
#: "off" (the model's own dtype) or "bf16": forward and backward under bfloat16 autocast (the weights, their
#: gradients and AdamW's state stay float32). On CPUs with AVX-512-BF16 or AMX, 1.8x the tokens/s of float32.
AUTOCAST = ("off", "bf16")


@dataclass
class TrainerConfig:
    """Optimisation settings of the policy update."""

    lr: float = 1e-5
    #: the ratio is clipped to [1 - eps_low, 1 + eps_high].
    eps_low: float = 0.2
    eps_high: float = 0.28
    #: weight of the k3 KL to the reference model in the loss (with a reference model and 0 here, the KL is
    #: measured and logged but not optimised).
    kl_coef: float = 0.0
    #: "token_mean" or "seq_mean_token_mean" (see losses.aggregate), normalised over the whole batch.
    aggregation: str = "token_mean"
    #: padded tokens per micro-batch (sequences × the longest; gradient accumulation runs over micro-batches).
    token_budget: int = 16384
    #: what one more micro-batch costs, in tokens: the split minimises padding plus this per micro-batch
    #: (rl/packing.py ``micro_batches``).
    micro_batch_overhead: int = MICRO_BATCH_OVERHEAD
    #: gradient-norm clip (0 = off).
    grad_clip: float = 1.0
    #: the logprobs the clipped ratio divides by: "sampled" (the engine's), "recompute" (a no-grad forward of
    #: the current weights before every micro-batch: the ratio is then 1 at every step) or "round" (the driver
    #: recomputes them once per round with the weights that sampled it, before the first pass, and tokens the
    #: engine had no choice over leave the loss). Replies sampled under a regex (policy.action_space) are scored
    #: under the same grammar in every mode, so "sampled" stays the policy that acted there too.
    old_logprobs: str = "sampled"
    #: mixed precision of the forward and backward passes: "off" or "bf16" (AUTOCAST).
    autocast: str = "off"
    #: off-policy correction: "none" (the ratio divides by ``old_logprobs``) or "decoupled" (decoupled PPO, as
    #: AReaL: the ratio divides by the proximal policy, the trainer's weights before the update, recomputed
    #: once like "round", and each token is weighted by min(pi_prox / pi_behav, ``is_cap``), with pi_behav the
    #: engine's sampled logprobs). For asynchronous RL, where a token may come from weights several updates old.
    correction: str = "none"
    #: truncation of the decoupled correction's importance weight.
    is_cap: float = 2.0
    #: train only the last N decoder layers and the final norm (0 = every parameter). The embeddings (and a
    #: head tied to them) and the layers below stay frozen, so the backward pass stops at layer L - N and
    #: AdamW keeps no state for them: the cheap mode for a pretrained model on CPUs.
    trainable_layers: int = 0

    def __post_init__(self) -> None:
        """Raises ConfigError on a setting the trainers cannot run."""
        if self.autocast not in AUTOCAST:
            raise ConfigError(f"trainer.autocast={self.autocast!r}: choose one of {', '.join(AUTOCAST)}")
        if self.trainable_layers < 0:
            raise ConfigError(f"trainer.trainable_layers={self.trainable_layers}: need >= 0 (0 = all)")
        if self.aggregation not in ("token_mean", "seq_mean_token_mean"):
            raise ConfigError(
                f"trainer.aggregation={self.aggregation!r}: choose token_mean or seq_mean_token_mean"
            )
        if self.correction not in CORRECTIONS:
            raise ConfigError(
                f"trainer.correction={self.correction!r}: choose one of {', '.join(CORRECTIONS)}"
            )
        if self.correction == "decoupled" and self.old_logprobs == "recompute":
            raise ConfigError(
                "trainer.correction=decoupled needs a proximal policy fixed before the update: "
                "trainer.old_logprobs=recompute re-bases it at every micro-batch (use sampled or round)"
            )
        if self.is_cap <= 0:
            raise ConfigError(f"trainer.is_cap={self.is_cap}: need > 0")
        if self.old_logprobs not in OLD_LOGPROBS:
            raise ConfigError(
                f"trainer.old_logprobs={self.old_logprobs!r}: choose one of {', '.join(OLD_LOGPROBS)}"
            )
        if self.token_budget <= 0 or self.micro_batch_overhead < 0:
            raise ConfigError(
                f"trainer.token_budget={self.token_budget} must be > 0 and trainer.micro_batch_overhead="
                f"{self.micro_batch_overhead} >= 0"
            )


def collate(seqs: list[PackedSequence], pad_id: int = 0, grammar: Any = None) -> dict[str, torch.Tensor]:
    """Pads a micro-batch: ``input_ids``/``attention_mask`` [N, L]; ``loss_mask``/``old_logprobs`` [N, L-1]
    aligned with the predicted tokens (position i predicts token i+1); ``advantages`` and ``staleness`` [N].
    ``behaviour_logprobs`` and ``token_scale`` [N, L-1] are there when some sequence carries them.

    When a sequence carries constraints, ``allowed`` [T, V] (bool) holds the tokens its grammar allowed at each
    of the T trained positions, in the order of ``loss_mask > 0`` (row-major); unconstrained positions allow
    every token. ``grammar`` (a :class:`maigym_ray.policy.grammar.TokenGrammar`) rebuilds the masks.
    """
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
    batch = {
        "input_ids": ids,
        "attention_mask": attn,
        "loss_mask": mask[:, 1:],
        "old_logprobs": old[:, 1:],
        "advantages": adv,
        "staleness": torch.tensor([s.staleness for s in seqs], dtype=torch.long),
    }
    if any(s.behaviour_logprobs for s in seqs):
        behav = old.clone()
        for i, s in enumerate(seqs):
            if s.behaviour_logprobs:
                behav[i, : len(s)] = torch.tensor(s.behaviour_logprobs, dtype=torch.float32)
        batch["behaviour_logprobs"] = behav[:, 1:]
    if any(s.token_scale for s in seqs):
        scale = torch.zeros((n, length), dtype=torch.float32)
        for i, s in enumerate(seqs):
            scale[i, : len(s)] = torch.tensor(s.token_scale or [1.0] * len(s), dtype=torch.float32)
        batch["token_scale"] = scale[:, 1:]
    if any(s.constraints for s in seqs):
        if grammar is None:
            raise ValueError("sequences sampled under a regex need the trainer's grammar (TokenGrammar)")
        batch["allowed"] = _allowed(seqs, grammar)
    return batch


def _allowed(seqs: list[PackedSequence], grammar: Any) -> torch.Tensor:
    """[T, V] bool, the rows of ``collate``'s ``allowed``."""
    rows = []
    for s in seqs:
        # one row per trained token t >= 1 (it is predicted at position t - 1), in order
        row_of = {t: k for k, t in enumerate(t for t in range(1, len(s)) if s.loss_mask[t])}
        out = torch.ones((len(row_of), grammar.vocab_size), dtype=torch.bool)
        for start, end, regex in s.constraints:
            masks = grammar.allowed(regex, s.input_ids[start:end])
            picked = [(row_of[t], t - start) for t in range(start, end) if t in row_of]
            if picked:  # "round" may have dropped a span's forced tokens from the loss
                dst, src = zip(*picked, strict=True)
                out[list(dst)] = masks[list(src)]
        rows.append(out)
    return torch.cat(rows)


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    mask: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """[N, L-1] log p(token i+1 | tokens <= i) under ``model``.

    With ``mask`` ([N, L-1]), only the masked positions are computed (0 elsewhere): the LM head and the
    log-softmax then run on the trained tokens only, not on every prompt token. In GUI-agent sequences the
    responses are a few percent of the tokens, and the head over the vocabulary is the largest matmul (and
    on GPUs the largest activation) of a small model.

    With ``allowed`` ([T, V] bool over the T masked positions, see :func:`collate`), each of those positions'
    softmax runs over its allowed tokens only: the logprob of the constrained policy that sampled them.
    """
    base = getattr(model, "module", model)  # a DeepSpeed engine wraps the HF model
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    decoder = base.get_decoder() if hasattr(base, "get_decoder") else None
    plain_head = getattr(getattr(base, "config", None), "final_logit_softcapping", None) is None
    if mask is None or head is None or decoder is None or not plain_head:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
        if mask is None or allowed is None:
            return torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        sel = mask > 0
        logits = logits[sel]
    else:
        hidden = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, :-1]
        sel = mask > 0
        logits = head(hidden[sel]).float()  # [T, V] for the T masked positions
    if allowed is not None:
        if allowed.shape != logits.shape:
            raise ValueError(
                f"allowed {tuple(allowed.shape)} does not match the logits {tuple(logits.shape)}"
            )
        logits = logits.masked_fill(~allowed, float("-inf"))
    picked = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:][sel].unsqueeze(-1)).squeeze(-1)
    out = torch.zeros(mask.shape, dtype=picked.dtype, device=picked.device)
    return out.masked_scatter(sel, picked)


#: A sampled logprob at least this high means the engine had no choice: under a constrained action space the
#: grammar allowed that token alone (vLLM returns the masked distribution's logprob, exactly 0 there).
FORCED_LOGPROB = -1e-6


def sequence_logprobs(
    model: Any,
    seqs: list[PackedSequence],
    token_budget: int,
    grammar: Any = None,
    overhead: int = MICRO_BATCH_OVERHEAD,
) -> list[PackedSequence]:
    """``seqs`` re-based on ``model`` for ``old_logprobs: round``: ``old_logprobs`` [L] become ``model``'s own
    on the trained tokens (0 elsewhere), from one no-grad pass under ``token_budget`` tokens per micro-batch.

    Tokens the engine sampled with no choice (logprob >= FORCED_LOGPROB: the ``"`` after ``click(id=``, the
    end of turn after a complete action) leave the loss mask. The constrained policy's gradient there is zero,
    while the model's own logprob of such a token can be tiny, and its ratio then swings far past the clip range
    after one step (a negative advantage's clipped loss is unbounded in the ratio).
    """
    device = next(getattr(model, "module", model).parameters()).device
    out: dict[int, PackedSequence] = {}
    index = {id(s): i for i, s in enumerate(seqs)}
    with torch.no_grad():
        for mb in micro_batches(seqs, token_budget, overhead):
            batch = {k: v.to(device) for k, v in collate(mb, grammar=grammar).items()}
            logp = token_logprobs(
                model, batch["input_ids"], batch["attention_mask"], batch["loss_mask"], batch.get("allowed")
            )
            for row, s in zip(logp.cpu(), mb, strict=True):
                # row[j] is the logprob of token j + 1; a sequence's fields are indexed by token
                own = (0.0, *row[: len(s) - 1].tolist())
                mask = tuple(
                    int(m and old < FORCED_LOGPROB)
                    for m, old in zip(s.loss_mask, s.old_logprobs, strict=True)
                )
                old = tuple(float(v) if m else 0.0 for v, m in zip(own, mask, strict=True))
                behaviour = s.behaviour_logprobs or s.old_logprobs  # what the engine sampled with, kept
                out[index[id(s)]] = replace(s, loss_mask=mask, old_logprobs=old, behaviour_logprobs=behaviour)
    return [out[i] for i in range(len(seqs))]


def autocast(cfg: TrainerConfig, device: torch.device) -> Any:
    """The autocast context of ``cfg.autocast`` on ``device`` (a no-op context when off)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.autocast == "bf16")


def trainable_parameters(model: Any, layers: int) -> list[torch.nn.Parameter]:
    """The parameters that train: all of them at ``layers`` 0, else those of the last ``layers`` decoder layers
    and of the final norm; every other parameter gets ``requires_grad=False``. ConfigError when the model has
    no numbered decoder layers or fewer than ``layers``."""
    named = list(model.named_parameters())
    if not layers:
        return [p for _, p in named]
    found = {int(m.group(1)) for n, _ in named if (m := _LAYER.search(n))}
    if len(found) < layers:
        raise ConfigError(
            f"trainer.trainable_layers={layers}: the model has {len(found)} numbered decoder layers"
        )
    first = max(found) - layers + 1
    keep = []
    for name, p in named:
        m = _LAYER.search(name)
        train = (int(m.group(1)) >= first) if m else _FINAL_NORM.search(name) is not None
        p.requires_grad_(train)
        if train:
            keep.append(p)
    return keep


_LAYER = re.compile(r"\.layers\.(\d+)\.")
_FINAL_NORM = re.compile(r"(^|\.)(norm|final_layernorm|ln_f)\.weight$")


def loss_counts(seqs: list[PackedSequence]) -> tuple[float, float]:
    """(loss tokens, sequences with at least one loss token) of ``seqs``: the loss normalisers before the
    floor at 1 (a data-parallel trainer sums them over ranks first). Step-normalised sequences (``token_scale``,
    packing.step_scales) are averaged over episodes instead: the second number is then the episodes (a rank
    holds whole episodes, so the sum over ranks still counts each once)."""
    tokens = float(sum(sum(s.loss_mask[1:]) for s in seqs))
    if any(s.token_scale for s in seqs):
        return tokens, float(len({s.episode_id for s in seqs if any(s.loss_mask[1:])}))
    live = float(sum(1 for s in seqs if any(s.loss_mask[1:])))
    return tokens, live


#: "grpo" (the clipped policy loss) or "sft" (negative log-likelihood of the masked tokens).
OBJECTIVES = ("grpo", "sft")


@dataclass
class MicroBatchLoss:
    """One micro-batch's share of the batch loss (a scalar with grad) and its summed statistics."""

    loss: torch.Tensor
    kl_sum: float
    clipped: float
    #: {staleness: (clipped tokens, trained tokens)} (rl/staleness.py ``clip_by_staleness``).
    by_staleness: dict[int, tuple[float, float]] = field(default_factory=dict)


def micro_batch_loss(
    model: Any,
    batch: dict[str, torch.Tensor],
    cfg: TrainerConfig,
    total_tokens: float,
    total_seqs: float,
    ref_model: Any = None,
    objective: str = "grpo",
) -> MicroBatchLoss:
    """The clipped policy loss (+ ``cfg.kl_coef`` * k3 KL to ``ref_model``) of one collated micro-batch,
    or with ``objective="sft"`` the negative log-likelihood of the masked tokens (SFT warm-up),
    normalised by the WHOLE batch's ``total_tokens`` (token_mean) or ``total_seqs`` (seq_mean_token_mean), so
    that summing the micro-batches' losses (and gradients) gives the batch loss whatever the micro-batching.

    ``model`` is anything called like an HF causal LM (the module itself, or a DeepSpeed engine wrapping it).
    With ``cfg.old_logprobs == "recompute"``, ``batch["old_logprobs"]`` is replaced in place by a no-grad
    forward of ``model``.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: choose one of {', '.join(OBJECTIVES)}")
    args = (batch["input_ids"], batch["attention_mask"], batch["loss_mask"], batch.get("allowed"))
    if objective == "sft":
        logp = token_logprobs(model, *args)
        return MicroBatchLoss(
            _aggregate(-logp * batch["loss_mask"], batch, cfg, total_tokens, total_seqs), 0.0, 0.0
        )
    if cfg.old_logprobs == "recompute":
        with torch.no_grad():
            batch["old_logprobs"] = token_logprobs(model, *args)
    logp = token_logprobs(model, *args)
    per_token, clipped = clipped_policy_loss(
        logp, batch["old_logprobs"], batch["advantages"], batch["loss_mask"], cfg.eps_low, cfg.eps_high
    )
    if cfg.correction == "decoupled" and "behaviour_logprobs" in batch:
        per_token = per_token * decoupled_weights(
            batch["old_logprobs"], batch["behaviour_logprobs"], batch["loss_mask"], cfg.is_cap
        )
    kl_sum = 0.0
    if ref_model is not None:  # measured whenever there is a reference; in the loss only with a coefficient
        with torch.no_grad():
            ref = token_logprobs(ref_model, *args)
        kl = k3_kl(logp, ref, batch["loss_mask"])
        if cfg.kl_coef:
            per_token = per_token + cfg.kl_coef * kl
        kl_sum = float(kl.detach().sum())
    return MicroBatchLoss(
        _aggregate(per_token, batch, cfg, total_tokens, total_seqs),
        kl_sum,
        float(clipped.sum()),
        clip_by_staleness(clipped, batch["loss_mask"], batch["staleness"]),
    )


def _aggregate(
    per_token: torch.Tensor,
    batch: dict[str, torch.Tensor],
    cfg: TrainerConfig,
    total_tokens: float,
    total_seqs: float,
) -> torch.Tensor:
    if "token_scale" in batch:  # a step normaliser (packing.step_scales): the mean over episodes
        return (per_token * batch["token_scale"]).sum() / total_seqs
    if cfg.aggregation == "token_mean":
        return per_token.sum() / total_tokens
    tokens = batch["loss_mask"].sum(dim=1).clamp(min=1.0)
    return (per_token.sum(dim=1) / tokens).sum() / total_seqs


def add_by_staleness(total: dict[int, list[float]], part: dict[int, tuple[float, float]]) -> None:
    """Adds a micro-batch's clipped and trained tokens per staleness into ``total``."""
    for k, (c, n) in part.items():
        acc = total.setdefault(k, [0.0, 0.0])
        acc[0] += c
        acc[1] += n


def staleness_stats(by_staleness: dict[int, list[float]]) -> dict[str, float]:
    """An update's stats keys ``clipped_sK`` and ``trained_sK`` (token counts at staleness K), which the driver
    sums over its optimizer steps into the clip rate per staleness."""
    out: dict[str, float] = {}
    for k, (c, n) in sorted(by_staleness.items()):
        out[f"clipped_s{k}"] = c
        out[f"trained_s{k}"] = n
    return out


class TorchTrainer:
    """Holds the policy model, its optimizer and (optionally) a frozen reference model."""

    def __init__(
        self, model: Any, cfg: TrainerConfig | None = None, ref_model: Any = None, grammar: Any = None
    ) -> None:
        self.model = model
        self.cfg = cfg or TrainerConfig()
        self.ref_model = ref_model
        #: rebuilds the token masks of replies sampled under a regex (a TokenGrammar; see collate).
        self.grammar = grammar
        params = trainable_parameters(model, self.cfg.trainable_layers)
        self.opt = torch.optim.AdamW(params, lr=self.cfg.lr, weight_decay=0.0)

    def set_lr(self, lr: float) -> None:
        """Sets the optimizer's learning rate (the SFT warm-up and RL use different ones)."""
        for g in self.opt.param_groups:
            g["lr"] = lr

    def update(self, seqs: list[PackedSequence], objective: str = "grpo") -> dict[str, float]:
        """One optimizer step over ``seqs`` (gradient accumulation over micro-batches); ``objective`` is
        "grpo" or "sft" (see :func:`micro_batch_loss`)."""
        t0 = time.perf_counter()
        self.model.train()
        tokens, live = loss_counts(seqs)
        total_tokens, total_seqs = max(1.0, tokens), max(1.0, live)
        loss_sum = kl_sum = clip_sum = 0.0
        by_staleness: dict[int, list[float]] = {}
        self.opt.zero_grad(set_to_none=True)
        device = next(self.model.parameters()).device  # batches are collated on the CPU
        for mb in micro_batches(seqs, self.cfg.token_budget, self.cfg.micro_batch_overhead):
            batch = {k: v.to(device, non_blocking=True) for k, v in collate(mb, grammar=self.grammar).items()}
            with autocast(self.cfg, device):
                out = micro_batch_loss(
                    self.model, batch, self.cfg, total_tokens, total_seqs, self.ref_model, objective
                )
            out.loss.backward()
            loss_sum += float(out.loss.detach())
            kl_sum += out.kl_sum
            clip_sum += out.clipped
            add_by_staleness(by_staleness, out.by_staleness)
        if self.cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(
                [p for g in self.opt.param_groups for p in g["params"]], self.cfg.grad_clip
            )
        self.opt.step()
        return {
            "loss": loss_sum,
            "kl": kl_sum / total_tokens,
            "clip_frac": clip_sum / total_tokens,
            "tokens": float(sum(len(s) for s in seqs)),
            "update_s": time.perf_counter() - t0,
            # distinct replies so far that a constrained engine sampled outside the grammar the trainer rebuilt
            # (scored unmasked): a running count
            "grammar_mismatches": float(self.grammar.mismatches if self.grammar is not None else 0),
            **staleness_stats(by_staleness),
        }

    def logprobs(self, seqs: list[PackedSequence]) -> list[PackedSequence]:
        """``seqs`` with the current weights' logprobs as their old logprobs (see :func:`sequence_logprobs`)."""
        self.model.eval()
        with autocast(self.cfg, next(self.model.parameters()).device):
            return sequence_logprobs(
                self.model, seqs, self.cfg.token_budget, self.grammar, self.cfg.micro_batch_overhead
            )

    def weights(self) -> list[tuple[str, torch.Tensor]]:
        """The tensors an engine reloads: the full state dict, tied weights under both names (vLLM's in-place
        reload rebuilds every parameter it is given and leaves out-of-list ones, such as a tied
        ``lm_head.weight``, uninitialised)."""
        return [(n, t.detach()) for n, t in self.model.state_dict().items()]

    def freeze_reference(self) -> None:
        """Keeps a frozen copy of the current weights as the KL reference."""
        ref = copy.deepcopy(self.model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        self.ref_model = ref

    def save(self, path: str | Path) -> None:
        """Writes the model's, the optimizer's and the reference's state into the directory ``path``."""
        Path(path).mkdir(parents=True, exist_ok=True)
        ref = self.ref_model.state_dict() if self.ref_model is not None else None
        state = {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(), "reference": ref}
        torch.save(state, Path(path) / "trainer.pt")

    def load(self, path: str | Path) -> None:
        """Restores the state written by ``save``."""
        state = torch.load(Path(path) / "trainer.pt", map_location="cpu", weights_only=True)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        if state.get("reference") is not None:
            self.freeze_reference()
            self.ref_model.load_state_dict(state["reference"])
