"""The soak's memory figure (benchmarks/soak.py): the slope fit, the accounting of the process set, and the
env actors' remote class built once (a growth the soak found).

No Ray is started: these are the pure functions that turn samples into the JSON's figures."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def soak(load_file):
    return load_file("benchmarks/soak.py")


def test_slope_has_one_intercept_per_policy(soak) -> None:
    # 2 MB/min of growth, and the samples after engine batches sit 30 MB below those after golden batches; the
    # engine batches are denser late in the run, so a single intercept reads the offset as a falling trend.
    times = [0, 30, 60, 90, 120, 150, 170, 190, 210, 230, 250, 270]
    groups = ["golden"] * 6 + ["engine", "golden", "engine", "engine", "engine", "engine"]
    points = [
        (t, 1000 + 2 * t / 60 - (30 if g == "engine" else 0)) for t, g in zip(times, groups, strict=True)
    ]
    slope, stderr = soak.slope_per_min(points, groups)
    assert slope == pytest.approx(2.0)
    assert stderr == pytest.approx(0.0, abs=1e-9)
    assert soak.slope_per_min(points)[0] < 0  # what one intercept makes of it
    assert soak.slope_per_min(points[:2], groups[:2]) == (0.0, 0.0)  # too few samples


def test_stderr_grows_with_noise(soak) -> None:
    noise = [0, 8, -6, 5, -9, 7, -4, 6, -8, 3]
    points = [(60.0 * i, 500 + 1.0 * i + n) for i, n in enumerate(noise)]
    slope, stderr = soak.slope_per_min(points)
    assert abs(slope - 1.0) < 2 * stderr
    assert 0.3 < stderr < 3


def test_process_set_changes_are_reported(soak) -> None:
    # rows: [pid, kind, RSS MB, anonymous MB, open files, start time]
    samples = [
        {
            "t": 0.0,
            "procs": [
                [1, "raylet", 30, 20, 9, 0],
                [2, "ray::EnvActor", 90, 50, 9, 0],
                [3, "ray::IDLE", 100, 60, 9, 0],
            ],
        },
        {
            "t": 10.0,
            "procs": [
                [1, "raylet", 31, 21, 9, 0],
                [4, "ray::EnvActor", 80, 40, 9, 5],
                [3, "ray::Engine", 110, 70, 9, 0],
            ],
        },
        {
            "t": 20.0,
            "procs": [
                [1, "raylet", 32, 22, 9, 0],
                [4, "ray::EnvActor", 85, 45, 9, 5],
                [3, "ray::Engine", 111, 71, 9, 0],
            ],
        },
    ]
    changes = soak.process_changes(samples)
    assert len(changes) == 1  # nothing changed between the last two samples
    assert changes[0]["t"] == 10.0
    assert changes[0]["started"] == {"ray::EnvActor": 1}
    assert changes[0]["ended"] == {"ray::EnvActor": 1}
    assert changes[0]["became"] == {"ray::IDLE -> ray::Engine": 1}
    # only pids 1 and 3 were there at every sample
    assert soak.lived_through(samples) == [(0.0, 130), (10.0, 141), (20.0, 143)]
    assert soak.breakdown(samples[1]["procs"])["ray::EnvActor"] == [1, 80.0, 9]


def _grown_under(fn, calls: int, where: str) -> int:
    """Bytes still held after ``calls`` calls of ``fn``, counting only allocations whose stack passes through
    ``where``: other threads of the process (Ray's, a live session's under pytest-xdist) allocate meanwhile."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start(60)
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(calls):
            fn()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    only = [tracemalloc.Filter(True, where, all_frames=True)]
    return sum(
        d.size_diff for d in after.filter_traces(only).compare_to(before.filter_traces(only), "filename")
    )


def test_env_actor_classes_are_built_once() -> None:
    # Ray keeps ~18 KB for every ray.remote(cls) call; the manager starts an env actor per recycle, kill and
    # replacement, so building the remote class per start made it grow for as long as it ran.
    import maigym_ray  # noqa: F401  (before ray)
    from maigym_ray.envs import manager
    from maigym_ray.envs.actor import EnvActor

    def start() -> None:
        manager.remote_class(EnvActor).options(num_cpus=0, max_concurrency=8)

    # What the first starts build once (lazy imports and caches; 296 KB in an xdist worker, twice) is not
    # growth: a first window warms up, the second is measured. A leak grows in every window.
    _grown_under(start, 50, __file__)
    grown = _grown_under(start, 50, __file__)
    assert grown < 50 * 1024  # 50 starts
    # the same measure sees the leak it guards against: the uncached class, built per start
    built = _grown_under(lambda: manager.remote_class.__wrapped__(EnvActor), 50, __file__)
    assert built > 10 * grown and built > 200 * 1024
