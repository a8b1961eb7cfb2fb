"""Helpers for fault drills (tests/faults, benchmarks/soak.py): a fake-backend EnvManager config, the work
list of a batch, scripted-engine policies, and the accounting every drill checks (no episode lost)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig
from maigym_ray.policy.config import EngineConfig
from maigym_ray.runtime.placement import Placement
from maigym_ray.runtime.topology import TopologyConfig
from maigym_ray.types import TaskSpec

#: The rollout task's Ray options under the default (local) topology, for drills that call run_rollouts
#: directly rather than through a session.
ROLLOUT_TASK = Placement(TopologyConfig()).rollout_task()


def fake_manager_config(
    faults_dir: str = "", platforms: Sequence[str] = ("web",), delay_s: float = 0.0, **manager: Any
) -> EnvManagerConfig:
    """An EnvManager config with one fake pool per platform (2 warm, at most 4) and short time limits."""
    limits: dict[str, Any] = {
        "reset_timeout_s": 2.0,
        "step_timeout_s": 2.0,
        "observe_timeout_s": 2.0,
        "evaluate_timeout_s": 5.0,
        "request_timeout_s": 20.0,
        "health_interval_s": 0.5,
    }
    limits.update(manager)
    pools = {
        p: PoolConfig(
            platform=p,
            backend="fake",
            target_size=2,
            max_size=4,
            options={"faults_dir": faults_dir, "delay_s": delay_s},
        )
        for p in platforms
    }
    return EnvManagerConfig(pools=pools, apps=["notes"], **limits)


def scripted_policy(generate_timeout_s: float = 2.0) -> PolicyConfig:
    """An engine policy over the tiny text model's tokenizer, for ScriptedEngine actors."""
    return PolicyConfig(
        kind="engine", engine=EngineConfig(model="tiny-text"), generate_timeout_s=generate_timeout_s
    )


def scripted_replies(answer: str = "42") -> list[list[int]]:
    """Token ids of the replies that solve a fake task: answer, then terminate."""
    from maigym_ray.policy.engine import resolve_model
    from maigym_ray.rollout import load_tokenizer

    tok = load_tokenizer(resolve_model("tiny-text"))
    texts = [f'Action: answer(text="{answer}")', 'Action: terminate(status="success")']
    return [tok.encode(t, add_special_tokens=False).ids for t in texts]


def lost(work: Sequence[tuple[Any, TaskSpec, str]], done: Sequence[Any]) -> int:
    """Work items with no recorded episode (must be 0), or recorded more than once."""
    seen: dict[Any, int] = {}
    for f in done:
        seen[f.item] = seen.get(f.item, 0) + 1
    return sum(1 for item, _, _ in work if seen.get(item, 0) != 1) + sum(1 for n in seen.values() if n > 1)
