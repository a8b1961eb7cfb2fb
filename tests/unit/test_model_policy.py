"""ModelPolicy through run_episode with a scripted engine: token-in/token-out and the prefix property."""

from __future__ import annotations

import pytest

from maigym_ray.harness.episode import run_episode
from maigym_ray.harness.history import HistoryConfig, prompt_windows, window_of
from maigym_ray.harness.model_policy import ModelPolicy, action_text
from maigym_ray.harness.prompt import PromptBuilder, PromptConfig
from maigym_ray.harness.replay_engine import ReplayEngine
from maigym_ray.harness.trajectory_store import load_trajectories, write_all
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
    engine = ReplayEngine(script, encode, end_ids=encode("<|im_end|>"))
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
    screen0 = CountingEnv()._obs()
    first = policy.builder.header(TASK, "web").ids + policy.builder.observation(screen0, 0, TASK).ids
    assert list(traj.turns[0].prompt_ids) == first  # the builder's segments are the ids the engine was given
    assert policy._episodes == {}  # per-episode token state is dropped when the episode ends


async def test_step_wise_history_changes_prefix_every_step_past_k():
    engine = ReplayEngine(script, encode)
    policy = ModelPolicy(engine, PromptBuilder(encode), decode, HistoryConfig("step", last_k=2))
    traj = await run_episode(CountingEnv(), TASK, policy)
    extends = [
        list(cur.prompt_ids[: len(prev.prompt_ids) + len(prev.response_ids)])
        == list(prev.prompt_ids) + list(prev.response_ids)
        for prev, cur in zip(traj.turns, traj.turns[1:], strict=False)
    ]
    assert extends[:2] == [True, True] and not any(extends[2:])


@pytest.mark.parametrize("history", [HistoryConfig("window", 10, 2), HistoryConfig("step", last_k=2)])
async def test_texts_are_stored_compactly_and_rebuild_the_prompt_the_engine_read(history, tmp_path):
    engine = ReplayEngine(script, encode, end_ids=encode("<|im_end|>"))
    traj = await run_episode(CountingEnv(), TASK, ModelPolicy(engine, PromptBuilder(encode), decode, history))
    write_all(tmp_path, [traj])
    (stored,) = load_trajectories(tmp_path)
    assert stored == traj
    turns = stored.turns
    windows = prompt_windows((u.prompt_text, u.prompt_continued, u.response_text) for u in turns)
    for u, w in zip(turns, windows, strict=True):
        # the rebuilt window is the very prompt the engine read (decode drops the end-of-turn markers)
        assert w is not None and w.replace("<|im_end|>", "") == decode(list(u.prompt_ids))
        assert u.a11y == f'[b{u.index}] button "Next {u.index}"'
    assert turns[0].response_text == 'I will press it.\nAction: click(id="b0")'
    assert turns[3].response_text == turns[3].action_text == "I am confused"
    continued = [u.prompt_continued for u in turns]
    stored_chars, whole_chars = sum(len(u.prompt_text) for u in turns), sum(map(len, windows))
    if history.strategy == "window":  # a window's text is kept once: each later step adds its turn only
        assert continued == [t > 0 and window_of(t, 10, 2) == window_of(t - 1, 10, 2) for t in range(26)]
        assert stored_chars * 3 < whole_chars
    else:  # step-wise: the window moves every step once it holds k steps
        assert continued == [t in (1, 2) for t in range(26)]


def test_action_text_takes_the_last_action_line():
    assert action_text('think\nAction: click(id="a")\nmore') == 'click(id="a")'
    assert action_text("  wait()  ") == "wait()"


async def test_context_overflow_ends_the_episode_and_scores_it():
    from maigym_ray.errors import ContextOverflowError

    class SmallEngine(ReplayEngine):
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


async def test_prompt_text_is_the_decoded_prompt_with_a_real_tokenizer():
    """With the tiny model's BPE tokenizer, each rebuilt window is what the prompt ids decode to, but for the
    sampled end-of-turn id after each reply (replies are stored as decoded, special tokens dropped)."""
    from maigym_ray.policy.engine import resolve_model
    from maigym_ray.rollout import load_tokenizer

    tok = load_tokenizer(resolve_model("tiny-text"))

    def enc(s: str) -> list[int]:
        return tok.encode(s, add_special_tokens=False).ids

    def dec(ids: list[int]) -> str:
        return tok.decode(ids, skip_special_tokens=True)

    engine = ReplayEngine(script, enc, (tok.token_to_id("<|im_end|>"),))
    policy = ModelPolicy(engine, PromptBuilder(enc), dec, HistoryConfig("window", 10, 2))
    turns = (await run_episode(CountingEnv(), TASK, policy)).turns
    windows = prompt_windows((u.prompt_text, u.prompt_continued, u.response_text) for u in turns)
    for u, w in zip(turns, windows, strict=True):
        raw = tok.decode(list(u.prompt_ids), skip_special_tokens=False)
        assert raw.replace("<|im_end|><|im_start|>user", "<|im_start|>user") == w


async def test_visible_ids_action_space_sends_each_screen_s_regex():
    """``action_space.visible_ids``: every step's request carries the regex of that step's screen (its one
    element ``b<step>``); without it, requests carry none."""
    import re

    from maigym_ray.harness.action_space import ActionSpaceConfig

    class Recording(ReplayEngine):
        def __init__(self) -> None:
            super().__init__(
                lambda _e, step: f'click(id="b{step}")' if step < 2 else 'answer(text="42")', encode
            )
            self.regexes: list[str] = []

        async def generate(self, prompt_ids, images, sampling, episode_id):
            self.regexes.append(sampling.regex)
            return await super().generate(prompt_ids, images, sampling, episode_id)

    builder = PromptBuilder(encode, PromptConfig(actions=["click", "answer"]))
    engine = Recording()
    policy = ModelPolicy(engine, builder, decode, action_space=ActionSpaceConfig(visible_ids=True))
    traj = await run_episode(CountingEnv(), TASK, policy)
    assert traj.reward.success and len(engine.regexes) == 3
    for step, regex in enumerate(engine.regexes):
        assert re.fullmatch(regex, f'click(id="b{step}")') and re.fullmatch(regex, 'answer(text="42")')
        assert not re.fullmatch(regex, f'click(id="b{step + 1}")') and not re.fullmatch(
            regex, "navigate_back()"
        )
    free = Recording()
    await run_episode(CountingEnv(), TASK, ModelPolicy(free, builder, decode))
    assert free.regexes == ["", "", ""]


class ReadingGolden:
    """A scripted solver (as MiniWoB++'s): reads the button off the screen, answers at step 3."""

    def __init__(self) -> None:
        self.ended: list[str] = []

    async def act(self, task: TaskSpec, observation: Observation, step: int, episode_id: str = "") -> str:
        if step == 3:
            return 'answer(text="42")'
        return f'click(id="{observation.a11y[1:].split("]")[0]}")'

    def end_episode(self, episode_id: str) -> None:
        self.ended.append(episode_id)


async def test_demonstrations_replay_a_golden_policy_that_reads_each_screen():
    from maigym_ray.harness.demonstration import DemonstrationPolicy

    golden = ReadingGolden()
    demo = DemonstrationPolicy(
        PromptBuilder(encode), encode, decode, tuple(encode("<|im_end|>")), golden=golden
    )
    traj = await run_episode(CountingEnv(), TASK, demo, episode_id="e1")
    assert [t.action.to_text() for t in traj.turns] == [
        'click(id="b0")',
        'click(id="b1")',
        'click(id="b2")',
        'answer(text="42")',
    ]
    assert traj.reward.success
    # the replayed reply is model tokens: the action text, closed by the end-of-turn ids
    assert decode(list(traj.turns[0].response_ids)) == 'click(id="b0")'
    assert golden.ended == ["e1"]


async def test_demonstrations_default_to_the_tasks_golden_list():
    from dataclasses import replace

    from maigym_ray.harness.demonstration import DemonstrationPolicy

    task = replace(TASK, golden=('click(id="b0")', 'answer(text="42")'))
    demo = DemonstrationPolicy(PromptBuilder(encode), encode, decode, tuple(encode("<|im_end|>")))
    traj = await run_episode(CountingEnv(), task, demo)
    assert [t.action.to_text() for t in traj.turns] == list(task.golden)
    assert traj.reward.success
