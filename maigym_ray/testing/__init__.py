"""Fakes that ship with the package, for fast tests and fault drills: no device, no browser, no model.

- :class:`FakeBackend`: a scripted :class:`~maigym_ray.envs.backend.Backend` with injectable failures.
- :class:`ScriptedEngine`: speaks the engine actor's ``generate`` API (token ids in, ids + logprobs out) and
  can die or hang.
- :mod:`maigym_ray.testing.fake_android` (its names also in :mod:`maigym_ray.testing.fake_device`) and
  :mod:`maigym_ray.testing.standin`: the Android fake adb device and its stand-in container image.
- :mod:`maigym_ray.testing.sim_clock`, :mod:`maigym_ray.testing.sim_backend` and
  :mod:`maigym_ray.testing.scale_sim`: a discrete-event clock, simulated instances on simulated hosts, and the
  sharded control plane driven by simulated callers (benchmarks/scale_sim.py).
"""

from maigym_ray.testing.fake_backend import FAULT_KINDS, FAULT_OPS, FakeBackend, fake_task, plant_fault
from maigym_ray.testing.scripted_engine import ScriptedEngine

__all__ = ["FAULT_KINDS", "FAULT_OPS", "FakeBackend", "ScriptedEngine", "fake_task", "plant_fault"]
