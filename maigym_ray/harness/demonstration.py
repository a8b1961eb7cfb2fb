"""DemonstrationPolicy: golden solutions replayed through the model harness, token-in / token-out.

SFT warm-up must see exactly the prompts RL and eval see. This policy is a :class:`ModelPolicy` whose engine
"generates" the task's golden action (then ``terminate``), encoded with the model's tokenizer and closed with
the end-of-turn ids, so the trajectory carries the same prompt ids, history windows and response framing as a
sampled one and packs with the same packing code.
"""

from __future__ import annotations

from collections.abc import Callable

from maigym_ray.harness.config import HistoryConfig
from maigym_ray.harness.model_policy import ModelPolicy
from maigym_ray.harness.policy import Decision, GoldenPolicy
from maigym_ray.harness.prompt import PromptBuilder
from maigym_ray.harness.replay_engine import ReplayEngine
from maigym_ray.types import Observation, TaskSpec


class DemonstrationPolicy:
    """Replays ``task.golden`` as model responses; ``end_ids`` close each response (e.g. ``<|im_end|>``)."""

    def __init__(
        self,
        builder: PromptBuilder,
        encode: Callable[[str], list[int]],
        decode: Callable[[list[int]], str],
        end_ids: tuple[int, ...],
        history: HistoryConfig | None = None,
    ) -> None:
        self._tasks: dict[str, TaskSpec] = {}
        self._golden = GoldenPolicy()
        engine = ReplayEngine(self._script, encode, end_ids)
        self._inner = ModelPolicy(engine, builder, decode, history)

    def _script(self, episode_id: str, step: int) -> str:
        task = self._tasks[episode_id]
        return task.golden[step] if step < len(task.golden) else 'terminate(status="success")'

    async def act(
        self, task: TaskSpec, observation: Observation, step: int, episode_id: str = ""
    ) -> Decision:
        self._tasks[episode_id] = task
        return await self._inner.act(task, observation, step, episode_id)

    def end_episode(self, episode_id: str) -> None:
        """Forgets an episode."""
        self._tasks.pop(episode_id, None)
        self._inner.end_episode(episode_id)
