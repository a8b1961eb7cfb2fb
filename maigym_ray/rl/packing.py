"""Packing trajectories into training sequences (pure functions; CPU-testable).

Window-wise history makes every prompt of a window a prefix of the window's last prompt, so a whole window
trains as ONE sequence: the last acting step's prompt + response, with the loss mask on the responses of the
steps that window acted for. The overlap steps at the start of a window are context only (they were trained
in the previous window), so each step is trained exactly once. Step-wise history has no shared prefix, so it
packs one sequence per step. Sequences are then bin-packed into micro-batches under a token budget.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from maigym_ray.harness.config import HistoryConfig
from maigym_ray.harness.history import window_of
from maigym_ray.types import Trajectory


@dataclass(frozen=True)
class PackedSequence:
    """One training sequence: ids [L], loss mask [L] (1 on trained response tokens), old logprobs [L]
    (the sampled logprob on masked tokens, 0 elsewhere), the episode's advantage and the steps it trains.

    ``constraints`` holds a ``(start, end, regex)`` for every trained response ``input_ids[start:end]`` that was
    sampled under a regex (a constrained action space): the trainer computes those tokens' logprobs under the
    same grammar mask, as the policy that acted.

    ``behaviour_logprobs`` [L] keeps the engine's sampled logprobs once ``old_logprobs`` has been re-based on the
    trainer's weights (``sequence_logprobs``); empty until then. ``staleness`` is the group's (rl/staleness.py),
    for the clip rate per staleness. ``token_scale`` [L] weights each trained token for a step normaliser
    (:func:`step_scales`); empty: every token weighs 1."""

    input_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    old_logprobs: tuple[float, ...]
    advantage: float
    episode_id: str
    steps: tuple[int, ...]
    constraints: tuple[tuple[int, int, str], ...] = ()
    behaviour_logprobs: tuple[float, ...] = ()
    staleness: int = 0
    token_scale: tuple[float, ...] = ()

    def __len__(self) -> int:
        return len(self.input_ids)


def _sequence(prompt: tuple[int, ...], response: tuple[int, ...]) -> list[int]:
    return list(prompt) + list(response)


def pack_window(
    traj: Trajectory, cfg: HistoryConfig, advantage: float, skip: frozenset[int] = frozenset()
) -> list[PackedSequence]:
    """One sequence per history window of ``traj`` (which must come from window-wise history ``cfg``).

    Steps in ``skip`` (``Turn.index``) stay in their window as context but carry no loss; a window whose
    steps are all skipped gives no sequence."""
    turns = [u for u in traj.turns if u.response_ids]
    windows: dict[int, list[int]] = {}
    for i, u in enumerate(turns):
        windows.setdefault(window_of(u.index, cfg.window_steps, cfg.window_overlap), []).append(i)
    out = []
    for _w, idx in sorted(windows.items()):
        last = turns[idx[-1]]
        ids = _sequence(last.prompt_ids, last.response_ids)
        mask = [0] * len(ids)
        old = [0.0] * len(ids)
        spans = []
        trained = []
        for i in idx:
            u = turns[i]
            start, end = len(u.prompt_ids), len(u.prompt_ids) + len(u.response_ids)
            if ids[:end] != _sequence(u.prompt_ids, u.response_ids):
                raise ValueError(
                    f"step {u.index} of {traj.episode_id} is not a prefix of its window's sequence: "
                    "was the trajectory made with this window-wise history?"
                )
            if u.index in skip:
                continue
            trained.append(u.index)
            mask[start:end] = [1] * (end - start)
            if len(u.logprobs) == end - start:
                old[start:end] = list(u.logprobs)
            if u.constraint:
                spans.append((start, end, u.constraint))
        if not trained:
            continue
        out.append(
            PackedSequence(
                tuple(ids),
                tuple(mask),
                tuple(old),
                advantage,
                traj.episode_id,
                tuple(trained),
                tuple(spans),
            )
        )
    return out


def pack_step(traj: Trajectory, advantage: float, skip: frozenset[int] = frozenset()) -> list[PackedSequence]:
    """One sequence per step not in ``skip``: its prompt + response, the loss on the response."""
    out = []
    for u in traj.turns:
        if not u.response_ids or u.index in skip:
            continue
        n_prompt, n_resp = len(u.prompt_ids), len(u.response_ids)
        old = [0.0] * n_prompt + (list(u.logprobs) if len(u.logprobs) == n_resp else [0.0] * n_resp)
        out.append(
            PackedSequence(
                tuple(_sequence(u.prompt_ids, u.response_ids)),
                (0,) * n_prompt + (1,) * n_resp,
                tuple(old),
                advantage,
                traj.episode_id,
                (u.index,),
                ((n_prompt, n_prompt + n_resp, u.constraint),) if u.constraint else (),
            )
        )
    return out


def pack(
    traj: Trajectory, cfg: HistoryConfig, advantage: float, skip: frozenset[int] = frozenset()
) -> list[PackedSequence]:
    """Packs ``traj`` the way its history strategy allows, with no loss on the steps in ``skip``."""
    if cfg.strategy == "window":
        return pack_window(traj, cfg, advantage, skip)
    return pack_step(traj, advantage, skip)


#: How each step's loss is normalised: "none" (trainer.aggregation alone decides), "trajectory" (1/|tau|: each step
#: of an episode weighs 1/steps, so every episode counts once) or "constant" (1/k: each step weighs 1/k for a fixed
#: k, so a long episode's steps count as much as a short one's; AsyncWebRL).
STEP_NORMALIZERS = ("none", "trajectory", "constant")


def step_scales(seq: PackedSequence, episode_steps: int, normalizer: str, k: int) -> PackedSequence:
    """``seq`` with ``token_scale``: a trained token of step ``i`` weighs ``c / len(response of step i)``, with
    ``c = 1/episode_steps`` ("trajectory") or ``1/k`` ("constant"). Summed over a batch and divided by its
    episodes (the trainer does so when sequences carry a scale) this is the mean over episodes of
    ``c * sum of the steps' mean token losses``. "none" returns ``seq`` unchanged."""
    if normalizer == "none":
        return seq
    if normalizer not in STEP_NORMALIZERS:
        raise ValueError(f"step normalizer {normalizer!r}: choose one of {STEP_NORMALIZERS}")
    c = 1.0 / max(1, episode_steps if normalizer == "trajectory" else k)
    scale = [0.0] * len(seq)
    # a step's response is a maximal run of trained tokens; two steps of one window are never adjacent (a
    # prompt of at least the next step's observation lies between them)
    i = 0
    while i < len(seq):
        if not seq.loss_mask[i]:
            i += 1
            continue
        j = i
        while j < len(seq) and seq.loss_mask[j]:
            j += 1
        scale[i:j] = [c / (j - i)] * (j - i)
        i = j
    return replace(seq, token_scale=tuple(scale))


#: The fixed cost of one micro-batch's forward and backward, in tokens: what an extra micro-batch must save in
#: padding to be worth it. Measured on the tiny text model on one CPU thread: 13 ms for one 16-token sequence,
#: 122 µs a token at 7,680 (about 90 tokens' worth). A large model on a GPU, which a small micro-batch leaves
#: idle, wants more (trainer.micro_batch_overhead).
MICRO_BATCH_OVERHEAD = 128


def micro_batches(
    seqs: list[PackedSequence], token_budget: int, overhead: int = MICRO_BATCH_OVERHEAD
) -> list[list[PackedSequence]]:
    """Splits ``seqs`` into micro-batches whose PADDED size (sequences × the longest one, what ``collate``
    allocates and the model computes) is at most ``token_budget``; a sequence longer than the budget gets a
    micro-batch of its own. Every sequence lands in exactly one micro-batch.

    The split minimises the padded tokens plus ``overhead`` tokens a micro-batch. Counting unpadded tokens
    instead (first-fit) let one long reply pad a whole round: in the learning guard one 269-token sequence
    padded 47 others of about 160, so 29–38 % of the update's tokens were padding, and a micro-batch could hold
    1.6× the budget (docs/experiments/2026-12-05-decision-measurements.md).

    It searches the splits of the longest-first order into runs (a run pads to its first sequence) with a
    dynamic programme over suffixes; ties go to fewer micro-batches.
    """
    if token_budget <= 0:
        raise ValueError("token_budget must be positive")
    if overhead < 0:
        raise ValueError("overhead must be >= 0")
    order = sorted(seqs, key=len, reverse=True)
    n = len(order)
    # for the suffix order[j:]: its least cost, and where its first micro-batch ends
    cost = np.zeros(n + 1, dtype=np.int64)
    end = np.full(n + 1, n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        width = max(1, len(order[i]))
        ends = np.arange(min(n, i + max(1, token_budget // width)), i, -1)  # furthest first: ties keep fewer
        total = cost[ends] + (ends - i) * width + overhead
        k = int(np.argmin(total))
        cost[i], end[i] = total[k], ends[k]
    out, i = [], 0
    while i < n:
        out.append(order[i : int(end[i])])
        i = int(end[i])
    return out
