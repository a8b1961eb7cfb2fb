"""Policies the harness can run without a model: golden replay and random actions.

The PolicyClient protocol is what ``run_episode`` calls. Model-backed clients (the vLLM engine, any
OpenAI-compatible server) implement the same protocol, so eval, collection and RL share one loop.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from maigym_ray.types import Observation, TaskSpec


@dataclass(frozen=True)
class Decision:
    """A policy's step: the action text, and for model policies the exact ids and logprobs behind it."""

    text: str
    prompt_ids: tuple[int, ...] = ()
    response_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    num_cached_tokens: int = 0
    policy_version: int = 0
    #: the prompt's text (the whole window, or what follows the previous step's prompt and response where
    #: ``prompt_continued``) and the whole reply; see :class:`maigym_ray.types.Turn`.
    prompt_text: str = ""
    prompt_continued: bool = False
    response_text: str = ""
    #: the regex the reply was sampled under ("" when free); see :class:`maigym_ray.types.Turn`.
    constraint: str = ""


class PolicyClient(Protocol):
    """Given the task, the current observation, the step index and the episode id, returns the next action
    (grammar text, or a Decision carrying the tokens behind it)."""

    async def act(
        self, task: TaskSpec, observation: Observation, step: int, episode_id: str = ""
    ) -> str | Decision: ...


class GoldenPolicy:
    """Replays a task's golden solution, then terminates (a scripted upper bound and a validation tool)."""

    async def act(self, task: TaskSpec, observation: Observation, step: int, episode_id: str = "") -> str:
        return task.golden[step] if step < len(task.golden) else 'terminate(status="success")'


class RandomPolicy:
    """Clicks random elements of the accessibility text, sometimes types, scrolls or goes back (a baseline)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    async def act(self, task: TaskSpec, observation: Observation, step: int, episode_id: str = "") -> str:
        r = self.rng.random()
        textboxes = [e for e in observation.elements if e.role == "textbox"]
        if textboxes and r < 0.25:
            return f'type(id="{self.rng.choice(textboxes).id}", text="test")'
        if r < 0.3:
            return 'scroll(direction="down")'
        if r < 0.35:
            return "navigate_back()"
        if observation.elements:
            return f'click(id="{self.rng.choice(observation.elements).id}")'
        return f"click(x={self.rng.randint(0, 1000)}, y={self.rng.randint(0, 1000)})"
