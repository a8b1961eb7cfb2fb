"""A Gymnasium adapter: one leased environment instance of an EnvManager as a ``gymnasium.Env``.

``gymnasium.make("maigym/miniwob.click-button")`` (after ``import maigym_ray.suites.gym_env``, or as
``gymnasium.make("maigym_ray.suites.gym_env:maigym/miniwob.click-button")``) gives a MiniWoB++ task; any
TaskSpec works through :class:`MaigymEnv` directly. The env holds one lease for its lifetime and talks to the
manager (the control plane) with blocking ``ray.get`` calls, since Gymnasium's API is synchronous.

- Observation: ``{"a11y": the accessibility text}`` plus ``"screenshot"`` (H x W x 3 uint8) when enabled.
- Action: one action of the grammar as text; a malformed one is an agent mistake (``info["error"]``), not an
  exception, exactly as in ``run_episode``.
- ``reset(seed=s)``: a seeded task comes from ``task_for_seed(s)`` (MiniWoB++: the page's seed); without a
  seed the next one is drawn from the env's seeded RNG, so ``reset(seed=1); reset()`` repeats.
- ``terminated``: the episode ended (``terminate``, or the page ended it); ``truncated``: the step limit. The
  reward is the task's verifier (MiniWoB++: the page's reward), paid on the last step; earlier steps pay 0.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

import maigym_ray  # noqa: F401  (loopback Ray settings before anything imports ray)
from maigym_ray.actions import MAX_ACTION_CHARS
from maigym_ray.types import Observation, TaskSpec

#: Every character an accessibility text or an action may hold: the Basic Multilingual Plane without control
#: characters and surrogates, plus newline (page text is Unicode: MiniWoB++'s unicode-test has "ÖK", "ヘルプ").
CHARSET = "\n" + "".join(chr(c) for c in range(32, 0x10000) if not (0x7F <= c < 0xA0 or 0xD800 <= c < 0xE000))
_OUTSIDE_CHARSET = re.compile("[^\n\x20-\x7e\xa0-\ud7ff\ue000-\uffff]")
#: The longest accessibility text the observation space admits (longer text is cut at this length).
MAX_A11Y_CHARS = 32768


class MaigymEnv(gymnasium.Env):
    """``task_for_seed(seed) -> TaskSpec`` run on one instance of ``manager`` (an EnvManager actor handle)."""

    metadata = {"render_modes": []}  # noqa: RUF012  (Gymnasium's class attribute)

    def __init__(
        self,
        manager: Any,
        task_for_seed: Callable[[int], TaskSpec],
        platform: str = "web",
        screenshot: bool = False,
        size: tuple[int, int] = (380, 220),
    ) -> None:
        import ray

        self._ray = ray
        self.manager = manager
        self.task_for_seed = task_for_seed
        self.screenshot = screenshot
        self.width, self.height = size
        obs_spaces: dict[str, spaces.Space[Any]] = {"a11y": spaces.Text(MAX_A11Y_CHARS, charset=CHARSET)}
        if screenshot:
            obs_spaces["screenshot"] = spaces.Box(0, 255, (self.height, self.width, 3), np.uint8)
        self.observation_space = spaces.Dict(obs_spaces)
        self.action_space = spaces.Text(MAX_ACTION_CHARS, min_length=1, charset=CHARSET)
        (self.lease,) = ray.get(manager.request.remote(1, platform))
        self.task: TaskSpec | None = None
        self._closed = False

    def _obs(self, obs: Observation) -> dict[str, Any]:
        # characters beyond the space's charset (emoji app icons are outside the BMP) read as U+FFFD
        out: dict[str, Any] = {"a11y": _OUTSIDE_CHARSET.sub("\ufffd", obs.a11y[:MAX_A11Y_CHARS])}
        if self.screenshot:
            from PIL import Image

            img = Image.open(io.BytesIO(obs.screenshot)).convert("RGB")
            if img.size != (self.width, self.height):
                img = img.resize((self.width, self.height))
            out["screenshot"] = np.asarray(img, dtype=np.uint8)
        return out

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        task_seed = seed if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        self.task = self.task_for_seed(task_seed)
        obs = self._ray.get(self.manager.reset.remote(self.lease, self.task))
        return self._obs(obs), {"task_id": self.task.id, "seed": task_seed}

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        result = self._ray.get(self.manager.step.remote(self.lease, action))
        truncated = bool(result.info.get("truncated"))
        terminated = bool(result.done) and not truncated
        info = {"error": result.info.get("error", ""), "steps": result.info.get("steps", 0)}
        reward = 0.0
        if result.done:
            verdict = self._ray.get(self.manager.evaluate.remote(self.lease))
            reward, info["success"], info["reason"] = float(verdict.value), verdict.success, verdict.reason
        return self._obs(result.observation), reward, terminated, truncated, info

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._ray.get(self.manager.release.remote(self.lease))


class MiniwobGymEnv(MaigymEnv):
    """One MiniWoB++ task; ``manager`` defaults to one started here (a local Ray and a one-instance pool)."""

    def __init__(self, task: str, manager: Any = None, screenshot: bool = False, max_steps: int = 15) -> None:
        from maigym_ray.suites.miniwob import miniwob_task

        manager = manager if manager is not None else _default_manager()
        super().__init__(manager, lambda seed: miniwob_task(task, seed, max_steps), screenshot=screenshot)


_MANAGER: Any = None


def _default_manager() -> Any:
    """A local loopback Ray and an EnvManager with a MiniWoB++ pool, started once per process."""
    global _MANAGER
    if _MANAGER is None:
        import ray

        from maigym_ray.config import RayConfig
        from maigym_ray.envs.manager import EnvManager
        from maigym_ray.runtime.placement import Placement
        from maigym_ray.runtime.ray_init import init_ray
        from maigym_ray.runtime.topology import TopologyConfig
        from maigym_ray.suites.miniwob import manager_config

        if not ray.is_initialized():
            init_ray(RayConfig())
        cfg = manager_config(1)
        # placed as the local topology places a run's manager (runtime/placement.py)
        _MANAGER = ray.remote(EnvManager).options(**Placement(TopologyConfig()).env_manager()).remote(cfg)
        ray.get(_MANAGER.start.remote(wait=True))
    return _MANAGER


def register_envs() -> list[str]:
    """Registers ``maigym/miniwob.<task>`` for every shipped MiniWoB++ task; returns the ids."""
    from maigym_ray.suites.miniwob import task_names

    ids = []
    for name in task_names():
        env_id = f"maigym/miniwob.{name}"
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=MiniwobGymEnv, kwargs={"task": name})
        ids.append(env_id)
    return ids


register_envs()
