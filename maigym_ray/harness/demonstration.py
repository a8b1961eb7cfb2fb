"""DemonstrationPolicy: golden solutions replayed through the model harness, token-in / token-out.

SFT warm-up must see exactly the prompts RL and eval see. This policy is a :class:`ModelPolicy` whose engine
"generates" the golden action, encoded with the model's tokenizer and closed with the end-of-turn ids, so the
trajectory carries the same prompt ids, history windows and response framing as a sampled one and packs with the
same packing code. The golden action comes from a golden policy asked with the step's observation: the task's
fixed golden list (then ``terminate``) by default, or a suite's scripted solver (MiniWoB++ pages are random per
seed, so their solutions are read off the screen).
"""

from __future__ import annotations

from collections.abc import Callable

from maigym_ray.harness.config import HistoryConfig
from maigym_ray.harness.model_policy import ModelPolicy
from maigym_ray.harness.policy import Decision, GoldenPolicy, PolicyClient
from maigym_ray.harness.prompt import PromptBuilder
from maigym_ray.harness.replay_engine import ReplayEngine
from maigym_ray.types import Observation, TaskSpec


class DemonstrationPolicy:
    """Replays the ``golden`` policy's actions (default: ``task.golden``) as model responses; ``end_ids`` close
    each response (e.g. ``<|im_end|>``)."""

    def __init__(
        self,
        builder: PromptBuilder,
        encode: Callable[[str], list[int]],
        decode: Callable[[list[int]], str],
        end_ids: tuple[int, ...],
        history: HistoryConfig | None = None,
        golden: PolicyClient | None = None,
    ) -> None:
        self._next: dict[str, str] = {}
        self._golden: PolicyClient = golden or GoldenPolicy()
        engine = ReplayEngine(self._script, encode, end_ids)
        self._inner = ModelPolicy(engine, builder, decode, history)

    def _script(self, episode_id: str, step: int) -> str:
        return self._next[episode_id]

    async def act(
        self, task: TaskSpec, observation: Observation, step: int, episode_id: str = ""
    ) -> Decision:
        golden = await self._golden.act(task, observation, step, episode_id)
        self._next[episode_id] = golden if isinstance(golden, str) else golden.text
        return await self._inner.act(task, observation, step, episode_id)

    def end_episode(self, episode_id: str) -> None:
        """Forgets an episode (and lets the golden policy forget it)."""
        self._next.pop(episode_id, None)
        end = getattr(self._golden, "end_episode", None)
        if end is not None:
            end(episode_id)
        self._inner.end_episode(episode_id)
