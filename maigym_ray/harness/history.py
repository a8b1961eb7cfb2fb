"""History strategies: which earlier steps a step's prompt carries, and how its token ids are assembled.

Token-in / token-out. A prompt is the episode header (system prompt and instruction), then, for each context
step j, that step's observation turn and the response the engine sampled at j, then the current observation
turn. These are concatenated token ids and are never re-tokenised. So within a window the prompt at step t+1
begins with the exact ids of the prompt and the response at step t, and the engine's prefix cache hits.

- **window-wise** (K steps per window, O steps of overlap). Window w holds steps ``[w(K-O), w(K-O)+K)``. Window 0
  acts for steps 0..K-1. Window w >= 1 takes over at step ``w(K-O)+O``; its first O steps are context
  generated under window w-1. The prompt only grows inside a window, so its prefix changes once per window.
  Training packs one sequence per window with the loss on the steps it acted for (each step trained once).
- **step-wise** "last k": the prompt carries the k previous steps, so the window slides every step once t > k.
  This is the baseline whose prefix changes at every step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from maigym_ray.harness.config import HistoryConfig

Strategy = Literal["window", "step"]


def window_of(t: int, k: int, o: int) -> int:
    """The window that acts at step ``t`` (window w >= 1 acts for steps [w(K-O)+O, w(K-O)+K))."""
    return max(0, (t - o) // (k - o))


def window_start(w: int, k: int, o: int) -> int:
    """The first step that window ``w`` holds (its first O steps are context when w >= 1)."""
    return w * (k - o)


def context_steps(cfg: HistoryConfig, t: int) -> range:
    """The earlier steps whose observation and response the prompt of step ``t`` carries."""
    if cfg.strategy == "window":
        return range(
            window_start(
                window_of(t, cfg.window_steps, cfg.window_overlap), cfg.window_steps, cfg.window_overlap
            ),
            t,
        )
    return range(max(0, t - cfg.last_k), t)


def prompt_ids(
    header: list[int], obs: list[list[int]], responses: list[list[int]], t: int, cfg: HistoryConfig
) -> list[int]:
    """Token ids of step ``t``'s prompt.

    Shapes: ``header`` [H]; ``obs[j]`` [O_j] for j <= t (observation turn of step j, ending with the
    assistant-turn opener); ``responses[j]`` [R_j] for j < t (ids the engine sampled, ending with its
    end-of-turn token). Returns [H + sum_{j in ctx}(O_j + R_j) + O_t].
    """
    ids = list(header)
    for j in context_steps(cfg, t):
        ids += obs[j]
        ids += responses[j]
    ids += obs[t]
    return ids


def continues(cfg: HistoryConfig, t: int) -> bool:
    """Whether step ``t``'s prompt is step ``t-1``'s prompt and response followed by step ``t``'s observation
    turn (the window grew by one step rather than moved)."""
    return t > 0 and context_steps(cfg, t).start == context_steps(cfg, t - 1).start


def prompt_text(
    header: str, obs: list[str], responses: list[str], t: int, cfg: HistoryConfig
) -> tuple[str, bool]:
    """The text of step ``t``'s prompt, assembled from rendered segments the way :func:`prompt_ids` assembles
    ids, kept compact: ``(only step t's observation turn, True)`` where the prompt continues step ``t-1``'s
    prompt and response, else ``(the whole window, False)``."""
    if continues(cfg, t):
        return obs[t], True
    parts = [header]
    for j in context_steps(cfg, t):
        parts += (obs[j], responses[j])
    return "".join([*parts, obs[t]]), False


def prompt_windows(steps: Iterable[tuple[str | None, bool | None, str | None]]) -> list[str | None]:
    """Every step's whole prompt text from the stored ``(prompt_text, prompt_continued, response_text)`` of an
    episode's steps in order; None where a store did not record it."""
    out: list[str | None] = []
    prev: str | None = None  # the previous step's prompt followed by its response
    for text, cont, response in steps:
        cur = None if text is None or (cont and prev is None) else ((prev or "") + text if cont else text)
        out.append(cur)
        prev = None if cur is None else cur + (response or "")
    return out


def prompt_images(images: list[list[bytes]], t: int, cfg: HistoryConfig) -> list[bytes]:
    """The images of step ``t``'s prompt, in order: context steps' images, then the current ones."""
    out: list[bytes] = []
    for j in context_steps(cfg, t):
        out += images[j]
    return out + images[t]


def reusable_prefix(prompt: list[int], earlier: list[list[int]]) -> int:
    """Tokens at the start of ``prompt`` that equal the start of one of the ``earlier`` sequences
    (earlier prompts followed by their responses): what a perfect prefix cache could serve."""
    best = 0
    for seq in earlier:
        n = min(len(prompt), len(seq))
        i = 0
        while i < n and prompt[i] == seq[i]:
            i += 1
        best = max(best, i)
    return best
