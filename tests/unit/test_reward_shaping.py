"""Reward shaping in the driver's GRPO round.

- ``driver.grpo.step_penalty``: among a group's successes the shorter gets the positive advantage; failures of
  different lengths still carry no gradient; the task sampler sees the verifier's reward, not the shaped one.
- ``driver.grpo.invalid_action_penalty``: an attempt with more malformed steps gets the lower advantage, by the
  penalty and never more (it is not scaled up by the group's std), also in a group whose attempts all fail.
- ``driver.grpo.credit=effective``: a success's idle steps are packed with no loss; a failure's are not.

The driver runs without Ray: rollouts, packing and the trainer are stand-ins."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from maigym_ray.errors import ConfigError
from maigym_ray.rl import driver as driver_module
from maigym_ray.rl.driver import Driver
from maigym_ray.rl.driver_config import DriverConfig, GRPOConfig, JobConfig, TaskSplit
from maigym_ray.rl.roles import Roles
from maigym_ray.rl.sampler import SamplerConfig
from maigym_ray.rollout import Finished
from maigym_ray.testing import fake_task

pytestmark = pytest.mark.unit


class _Trainer:
    def update(self, seqs: list[Any], objective: str = "grpo") -> dict[str, float]:
        return {"loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "tokens": 1.0}

    def set_lr(self, lr: float) -> None:
        pass

    async def _send(self) -> None:
        pass

    def send_weights(self, layout: Any, group: str) -> Any:
        return self._send()


def _traj(success: bool, steps: int, invalid: int = 0, idle: int = 0) -> Any:
    """An episode of ``steps`` steps whose first ``invalid`` actions did not parse (``action`` None) and whose
    first ``idle`` steps left the screen's elements as they were."""
    screens = ['[e1] button "Next"'] * (idle + 1) + [f'[e{i + 2}] button "Done"' for i in range(steps)]
    return SimpleNamespace(
        reward=SimpleNamespace(value=float(success), success=success),
        infra_failed=False,
        turns=tuple(
            SimpleNamespace(index=i, a11y=screens[i], action=None if i < invalid else object())
            for i in range(steps)
        ),
    )


def _round(
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    penalty: float,
    outcomes: list[tuple[bool, int]] | list[tuple[bool, int, int]],
    invalid_penalty: float = 0.0,
    credit: str = "episode",
    skips: list[frozenset[int]] | None = None,
):
    grpo = GRPOConfig(
        groups_per_round=1,
        updates_per_round=1,
        step_penalty=penalty,
        invalid_action_penalty=invalid_penalty,
        credit=credit,
    )
    job = JobConfig(
        driver=DriverConfig(grpo=grpo),
        sampler=SamplerConfig(group_size=len(outcomes)),
        run_dir=str(tmp_path),
        wandb_mode="disabled",
    )
    d = Driver(job, TaskSplit(train=[fake_task("t0")], heldout=[]), Roles(engines=[], colocated=False))
    d.trainer = _Trainer()  # type: ignore[assignment]
    d._store = lambda name, trajs: None  # type: ignore[method-assign]
    seen: list[list[float]] = []
    d.sampler.update = lambda tid, rewards: seen.append(list(rewards))  # type: ignore[method-assign]

    async def rollouts(work: list[Any], policy: Any, what: str) -> list[Finished]:
        return [Finished(item, t, p, _traj(*outcomes[j]), 0, 0.1) for j, (item, t, p) in enumerate(work)]

    d._rollouts = rollouts  # type: ignore[method-assign]
    advantages: list[float] = []
    kept_skips = [] if skips is None else skips
    monkeypatch.setattr(
        driver_module,
        "pack",
        lambda t, h, a, skip: (
            advantages.append(a) or kept_skips.append(skip) or [SimpleNamespace(episode_id=id(t))]
        ),
    )
    metrics = asyncio.run(d.grpo_round(0))
    return metrics, advantages, seen


def test_two_successes_of_different_length_train_only_with_a_step_penalty(tmp_path, monkeypatch):
    metrics, advantages, _ = _round(tmp_path, monkeypatch, 0.0, [(True, 3), (True, 5)])
    assert metrics["sequences"] == 0 and advantages == []  # equal rewards: no gradient
    assert metrics["zero_var_share"] == 1.0
    metrics, advantages, seen = _round(tmp_path, monkeypatch, 0.02, [(True, 3), (True, 5)])
    assert metrics["sequences"] == 2
    assert metrics["zero_var_share"] == 0.0  # the share is taken over the shaped rewards
    assert advantages[0] > 0 > advantages[1]  # the 3-step success is the one reinforced
    assert seen == [[1.0, 1.0]]  # the sampler sees the verifier's rewards


def test_failures_of_different_length_still_carry_no_gradient(tmp_path, monkeypatch):
    metrics, advantages, _ = _round(tmp_path, monkeypatch, 0.02, [(False, 1), (False, 5)])
    assert metrics["sequences"] == 0 and advantages == []


def test_a_negative_step_penalty_is_refused():
    with pytest.raises(ConfigError, match="step_penalty"):
        GRPOConfig(step_penalty=-0.01)
    with pytest.raises(ConfigError, match="invalid_action_penalty"):
        GRPOConfig(invalid_action_penalty=-0.1)


def test_failures_with_more_malformed_steps_get_the_lower_advantage_by_the_penalty(tmp_path, monkeypatch):
    outcomes = [(False, 5, 3), (False, 3, 0), (False, 5, 2), (False, 3, 0)]
    metrics, advantages, _ = _round(tmp_path, monkeypatch, 0.0, outcomes)
    assert metrics["sequences"] == 0 and advantages == []  # off: an all-fail group carries no gradient
    metrics, advantages, seen = _round(tmp_path, monkeypatch, 0.0, outcomes, invalid_penalty=0.1)
    assert metrics["sequences"] == 4
    assert metrics["zero_var_share"] == 1.0  # the verifier's rewards are still all equal
    # centred counts (3, 0, 2, 0) - 1.25, times -0.1: not divided by the (zero) reward std
    assert advantages == pytest.approx([-0.175, 0.125, -0.075, 0.125])
    assert seen == [[0.0, 0.0, 0.0, 0.0]]


def test_the_verifier_term_dominates_the_invalid_action_term(tmp_path, monkeypatch):
    # a success with one malformed step still outranks a clean failure
    outcomes = [(True, 4, 1), (False, 3, 0)]
    _, advantages, _ = _round(tmp_path, monkeypatch, 0.0, outcomes, invalid_penalty=0.1)
    assert advantages[0] == pytest.approx(1.0 - 0.05, abs=1e-4)
    assert advantages[1] == pytest.approx(-1.0 + 0.05, abs=1e-4)


def test_effective_credit_keeps_a_successes_idle_steps_out_of_the_loss_and_not_a_failures(
    tmp_path, monkeypatch
):
    # a 3-step success whose first step changed nothing on screen, and a 2-step failure with an idle first step
    outcomes = [(True, 3, 0, 1), (False, 2, 0, 1)]
    skips: list[frozenset[int]] = []
    _, advantages, _ = _round(tmp_path, monkeypatch, 0.0, outcomes, credit="effective", skips=skips)
    assert advantages[0] > 0 > advantages[1]
    assert skips == [frozenset({0}), frozenset()]  # the failure's idle step keeps its negative advantage
    skips.clear()
    _round(tmp_path, monkeypatch, 0.0, outcomes, skips=skips)
    assert skips == [frozenset(), frozenset()]  # credit=episode: every step shares the advantage
