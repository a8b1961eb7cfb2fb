"""History strategies: the prefix property at every step of long synthetic episodes, and window bookkeeping."""

from __future__ import annotations

import random

import pytest

from maigym_ray.errors import ConfigError
from maigym_ray.harness.history import (
    HistoryConfig,
    context_steps,
    prompt_ids,
    prompt_images,
    prompt_windows,
    reusable_prefix,
    window_of,
    window_start,
)

pytestmark = pytest.mark.unit


def synthetic_episode(steps: int, seed: int) -> tuple[list[int], list[list[int]], list[list[int]]]:
    rng = random.Random(seed)
    header = [rng.randrange(1000) for _ in range(50)]
    obs = [[rng.randrange(1000) for _ in range(rng.randint(20, 80))] for _ in range(steps)]
    resp = [[rng.randrange(1000) for _ in range(rng.randint(3, 15))] for _ in range(steps)]
    return header, obs, resp


def extends(prev_prompt: list[int], prev_resp: list[int], prompt: list[int]) -> bool:
    head = prev_prompt + prev_resp
    return prompt[: len(head)] == head


@pytest.mark.parametrize(("k", "o"), [(10, 2), (4, 1), (5, 0), (3, 2)])
def test_window_prefix_changes_only_at_window_boundaries(k, o):
    cfg = HistoryConfig("window", window_steps=k, window_overlap=o)
    header, obs, resp = synthetic_episode(60, seed=k * 10 + o)
    prompts = [prompt_ids(header, obs, resp, t, cfg) for t in range(60)]
    changes = []
    for t in range(1, 60):
        same_window = window_of(t, k, o) == window_of(t - 1, k, o)
        assert extends(prompts[t - 1], resp[t - 1], prompts[t]) == same_window, t
        assert prompts[t][: len(header)] == header  # the header is always shared
        if not same_window:
            changes.append(t)
    # window 0 acts for K steps, each later window for K-O steps
    assert changes == list(range(k, 60, k - o))


@pytest.mark.parametrize("last_k", [1, 5])
def test_step_wise_prefix_changes_every_step_past_k(last_k):
    cfg = HistoryConfig("step", last_k=last_k)
    header, obs, resp = synthetic_episode(30, seed=last_k)
    prompts = [prompt_ids(header, obs, resp, t, cfg) for t in range(30)]
    for t in range(1, 30):
        assert extends(prompts[t - 1], resp[t - 1], prompts[t]) == (t <= last_k), t


def test_window_bookkeeping_each_step_acts_once_and_overlap_is_context():
    k, o = 10, 2
    acting: dict[int, list[int]] = {}
    for t in range(100):
        acting.setdefault(window_of(t, k, o), []).append(t)
    assert acting[0] == list(range(0, 10))
    assert acting[1] == list(range(10, 18))
    for w, steps in acting.items():
        if w:
            start = window_start(w, k, o)
            assert steps[0] == start + o  # the window's first O steps are context from window w-1
            assert list(context_steps(HistoryConfig(), steps[0])) == list(range(start, start + o))
    assert sorted(t for ts in acting.values() for t in ts) == list(range(100))


def test_prompt_contents_and_images_follow_the_context():
    cfg = HistoryConfig("window", window_steps=4, window_overlap=1)
    header, obs, resp = [0], [[10 + t] for t in range(8)], [[100 + t] for t in range(8)]
    # step 5 is acted by window 1 (steps 3..6, acting from 4): context steps 3 and 4
    assert prompt_ids(header, obs, resp, 5, cfg) == [0, 13, 103, 14, 104, 15]
    images = [[bytes([t])] for t in range(8)]
    assert prompt_images(images, 5, cfg) == [b"\x03", b"\x04", b"\x05"]
    assert list(context_steps(HistoryConfig("step", last_k=2), 1)) == [0]


def test_reusable_prefix_and_physical_limit_of_window_history():
    cfg = HistoryConfig("window", window_steps=10, window_overlap=2)
    header, obs, resp = synthetic_episode(40, seed=7)
    earlier: list[list[int]] = []
    reusable = total = 0
    for t in range(40):
        p = prompt_ids(header, obs, resp, t, cfg)
        reusable += reusable_prefix(p, earlier)
        total += len(p)
        earlier.append(p + resp[t])
    assert 0.5 < reusable / total < 1.0
    assert reusable_prefix([1, 2, 3], [[1, 2, 9], [1, 2, 3, 4]]) == 3
    assert reusable_prefix([5], []) == 0


def test_bad_configs_are_rejected():
    with pytest.raises(ConfigError):
        HistoryConfig("window", window_steps=3, window_overlap=3)
    with pytest.raises(ConfigError):
        HistoryConfig("lastk")


def test_prompt_windows_rebuild_continued_steps_and_say_none_where_unrecorded():
    steps = [("H|o0|", False, "r0|"), ("o1|", True, "r1|"), ("H|o1|r1|o2|", False, "r2|"), ("o3|", True, "")]
    assert prompt_windows(steps) == ["H|o0|", "H|o0|r0|o1|", "H|o1|r1|o2|", "H|o1|r1|o2|r2|o3|"]
    assert prompt_windows([(None, None, None), ("o1|", True, "r1|")]) == [None, None]  # older store
    assert prompt_windows([("", False, "click()"), ("", False, "wait()")]) == ["", ""]  # no prompt read
