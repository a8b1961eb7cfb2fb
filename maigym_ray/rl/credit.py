"""Which steps of an episode share its advantage (pure functions, CPU-testable).

GRPO gives an episode one advantage, and every step of it is trained with that number. A success that took a
wasted step (a click that changed nothing) then pushes that step up as much as the steps that solved the
task, and over rounds the policy learns to waste steps: on MiniWoB++, RL after SFT made held-out episodes
longer (1.44 -> 2.28 steps) and ran enter-text into its page's time limit
(docs/experiments/2026-12-06-miniwob-smollm2.md).

``grpo.credit=effective`` withholds a success's credit from its idle steps: a step is idle when the screen the
next step saw lists the same elements, in the same states, as the screen it acted on (page text outside the
elements is ignored: it may change by itself, like a countdown). Such a step earns no positive advantage; a
negative one still applies, so a failure's wasted steps are pushed down as before. The last step is never
idle: nothing after it shows what it did, and it is the step that ended the episode.
"""

from __future__ import annotations

from maigym_ray.harness.action_space import element_lines
from maigym_ray.types import Trajectory

#: ``grpo.credit`` choices: every step shares the episode's advantage, or idle steps get no positive share.
CREDITS = ("episode", "effective")


def idle_steps(traj: Trajectory) -> frozenset[int]:
    """The indices (``Turn.index``) of ``traj``'s steps after which the screen's elements did not change.

    Consecutive turns are compared: turn k+1's observation is the screen turn k's action left. A turn with no
    accessibility text (a screenshot-only screen) is never judged idle: there is nothing to compare."""
    idle = set()
    for now, after in zip(traj.turns, traj.turns[1:], strict=False):
        if now.a11y and after.a11y and element_lines(now.a11y) == element_lines(after.a11y):
            idle.add(now.index)
    return frozenset(idle)


def uncredited_steps(traj: Trajectory, advantage: float, credit: str) -> frozenset[int]:
    """The steps of ``traj`` to leave out of the loss when it trains with ``advantage`` under ``credit``."""
    if credit not in CREDITS:
        raise ValueError(f"credit={credit!r}: choose one of {CREDITS}")
    if credit == "episode" or advantage <= 0:
        return frozenset()
    return idle_steps(traj)
