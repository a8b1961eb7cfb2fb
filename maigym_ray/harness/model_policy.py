"""ModelPolicy: a PolicyClient that asks a generation engine, token-in / token-out.

Per episode it keeps the header ids, every observation turn's ids and images, and the response ids the engine
sampled. Each step's prompt is assembled by the history strategy from those segments, never re-tokenised, so
with window-wise history the engine's prefix cache hits and training later sees exactly the sampled ids.
Beside the ids it keeps each segment's text (replies as decoded), so a step's prompt text for the trajectory
is a join of those texts, never a decode of the ids.
The engine is anything with ``generate`` (the vLLM engine actor, an OpenAI-compatible client, a scripted fake).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from maigym_ray.generation import Engine, SamplingConfig
from maigym_ray.harness.action_space import action_regex, visible_ids
from maigym_ray.harness.config import ActionSpaceConfig, HistoryConfig
from maigym_ray.harness.history import prompt_ids, prompt_images, prompt_text
from maigym_ray.harness.policy import Decision
from maigym_ray.harness.prompt import PromptBuilder
from maigym_ray.types import Observation, TaskSpec


@dataclass
class _EpisodeTokens:
    header: list[int]
    #: the rendered text of each segment, kept beside its ids so a step's prompt text is a join, never a decode
    header_text: str
    obs: list[list[int]] = field(default_factory=list)
    responses: list[list[int]] = field(default_factory=list)
    images: list[list[bytes]] = field(default_factory=list)
    obs_text: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)


def action_text(reply: str) -> str:
    """The part of a reply that should be the action (after the last ``Action:``, first line); the env
    parses it strictly, so a malformed reply becomes a parse error the model reads next turn."""
    tail = reply.rsplit("Action:", 1)[-1].strip()
    return tail.split("\n", 1)[0].strip() if tail else reply.strip()


class ModelPolicy:
    """Builds prompts with ``builder`` and ``history``, asks ``engine``, decodes with ``decode``. With
    ``action_space.visible_ids`` each step's sampling carries the regex of the actions allowed on that screen."""

    def __init__(
        self,
        engine: Engine,
        builder: PromptBuilder,
        decode: Callable[[list[int]], str],
        history: HistoryConfig | None = None,
        sampling: SamplingConfig | None = None,
        max_episodes: int = 4096,
        action_space: ActionSpaceConfig | None = None,
    ) -> None:
        self.engine = engine
        self.builder = builder
        self.decode = decode
        self.history = history or HistoryConfig()
        self.sampling = sampling or SamplingConfig()
        self.max_episodes = max_episodes
        self.action_space = action_space or ActionSpaceConfig()
        self._episodes: OrderedDict[str, _EpisodeTokens] = OrderedDict()

    async def act(
        self, task: TaskSpec, observation: Observation, step: int, episode_id: str = ""
    ) -> Decision:
        if step == 0 or episode_id not in self._episodes:
            header = self.builder.header(task, observation.platform)
            self._episodes[episode_id] = _EpisodeTokens(header.ids, header.text)
            while len(self._episodes) > self.max_episodes:  # episodes that never finished cleanly
                self._episodes.popitem(last=False)
        ep = self._episodes[episode_id]
        turn = self.builder.observation(observation, step, task)
        ep.obs.append(turn.ids)
        ep.obs_text.append(turn.text)
        ep.images.append(self.builder.images(observation))
        ids = prompt_ids(ep.header, ep.obs, ep.responses, step, self.history)
        sampling = self.sampling
        if self.action_space.visible_ids:
            actions = self.builder.allowed_actions(observation.platform)
            sampling = replace(
                sampling, regex=action_regex(actions, visible_ids(self.builder.shown_a11y(observation)))
            )
        gen = await self.engine.generate(
            ids, prompt_images(ep.images, step, self.history), sampling, episode_id
        )
        ep.responses.append(list(gen.response_ids))
        reply = self.decode(list(gen.response_ids))
        ep.replies.append(reply)
        text, continued = prompt_text(ep.header_text, ep.obs_text, ep.replies, step, self.history)
        return Decision(
            action_text(reply),
            tuple(ids),
            gen.response_ids,
            gen.logprobs,
            gen.num_cached_tokens,
            gen.policy_version,
            prompt_text=text,
            prompt_continued=continued,
            response_text=reply,
            constraint=sampling.regex,
        )

    def end_episode(self, episode_id: str) -> None:
        """Forgets an episode's tokens."""
        self._episodes.pop(episode_id, None)
