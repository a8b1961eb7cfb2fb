"""ModelPolicy through run_episode with a scripted engine: token-in/token-out and the prefix property."""

from __future__ import annotations

import pytest

from maigym_ray.harness.episode import run_episode
from maigym_ray.harness.history import HistoryConfig, window_of
from maigym_ray.harness.model_policy import ModelPolicy, action_text
from maigym_ray.harness.prompt import PromptBuilder
from maigym_ray.harness.scripted_engine import ScriptedEngine
from maigym_ray.types import Observation, Reward, StepResult, TaskSpec

pytestmark = pytest.mark.unit


def encode(text: str) -> list[int]:
    return [ord(c) for c in text]


def decode(ids: list[int]) -> str:
    """Like a tokenizer's decode(..., skip_special_tokens=True): the end-of-turn marker is not text."""
    return "".join(map(chr, ids)).replace("<|im_end|>", "")


class CountingEnv:
    """An in-memory EnvHandle: every step shows a new screen; the answer "42" solves the task."""

    def __init__(self) -> None:
        self.answer = ""
        self.steps = 0

    def _obs(self, error: str = "") -> Observation:
        return Observation(
            "web", b"", 10, 10, f'[b{self.steps}] button "Next {self.steps}"', last_action_error=error
        )

    async def reset(self, task: TaskSpec) -> Observation:
        self.steps = 0
        return self._obs()

    async def step(self, action: str) -> StepResult:
        self.steps += 1
        if action.startswith("answer("):
            self.answer = action
        error = "" if action.startswith(("click(", "answer(")) else "unknown action"
        return StepResult(self._obs(error), action.startswith("answer("), {})

    async def evaluate(self) -> Reward:
        return Reward(1.0, True) if "42" in self.answer else Reward(0.0, False)


TASK = TaskSpec(
    id="count", instruction="Press next until step 25, then answer 42.", apps=("mail",), max_steps=30
)


def script(_episode: str, step: int) -> str:
    if step == 25:
        return 'Action: answer(text="42")'
    if step == 3:
        return "I am confused"  # a malformed reply becomes a parse error observation, not a crash
    return f'I will press it.\nAction: click(id="b{step}")'


async def test_window_history_tokens_are_stored_and_extend_within_windows():
    engine = ScriptedEngine(script, encode, end_ids=encode("<|im_end|>"))
    policy = ModelPolicy(engine, PromptBuilder(encode), decode, HistoryConfig("window", 10, 2))
    traj = await run_episode(CountingEnv(), TASK, policy)
    assert traj.reward.success and len(traj.turns) == 26
    assert traj.turns[3].action_text == "I am confused" and traj.turns[3].parse_error == "unknown action"
    assert "Your last action failed: unknown action" in decode(list(traj.turns[4].prompt_ids))
    for prev, cur in zip(traj.turns, traj.turns[1:], strict=False):
        head = list(prev.prompt_ids) + list(prev.response_ids)
        same_window = window_of(cur.index, 10, 2) == window_of(prev.index, 10, 2)
        assert (list(cur.prompt_ids[: len(head)]) == head) == same_window
        if same_window:  # the scripted engine's perfect cache serves the whole previous sequence
            assert cur.timings["cached_tokens"] == len(head)
    assert "".join(map(chr, traj.turns[0].response_ids)).endswith("<|im_end|>")  # sampled ids kept as is
    assert policy._episodes == {}  # per-episode token state is dropped when the episode ends


async def test_step_wise_history_changes_prefix_every_step_past_k():
    engine = ScriptedEngine(script, encode)
    policy = ModelPolicy(engine, PromptBuilder(encode), decode, HistoryConfig("step", last_k=2))
    traj = await run_episode(CountingEnv(), TASK, policy)
    extends = [
        list(cur.prompt_ids[: len(prev.prompt_ids) + len(prev.response_ids)])
        == list(prev.prompt_ids) + list(prev.response_ids)
        for prev, cur in zip(traj.turns, traj.turns[1:], strict=False)
    ]
    assert extends[:2] == [True, True] and not any(extends[2:])


def test_action_text_takes_the_last_action_line():
    assert action_text('think\nAction: click(id="a")\nmore') == 'click(id="a")'
    assert action_text("  wait()  ") == "wait()"


async def test_context_overflow_ends_the_episode_and_scores_it():
    from maigym_ray.errors import ContextOverflowError

    class SmallEngine(ScriptedEngine):
        async def generate(self, prompt_ids, images, sampling, episode_id):
            if len(prompt_ids) > 1500:
                raise ContextOverflowError("prompt too long")
            return await super().generate(prompt_ids, images, sampling, episode_id)

    policy = ModelPolicy(
        SmallEngine(script, encode), PromptBuilder(encode), decode, HistoryConfig("step", last_k=30)
    )
    traj = await run_episode(CountingEnv(), TASK, policy)
    assert 0 < len(traj.turns) < 25 and not traj.infra_failed
    assert traj.error == "prompt too long" and traj.reward.value == 0.0
