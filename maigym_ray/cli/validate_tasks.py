"""``python -m maigym_ray.cli.validate_tasks FILE [FILE ...]``: check hand-written tasks on live instances.

For each task: loads (a malformed file is an error naming the file, the line and the field), then on a leased
web instance the verifier gives 0 on the initial state, 1 after the golden solution, and a reset restores the
initial state. Prints one verdict per task; exits 1 when any task fails, 2 when a file does not load. The checks
live in :mod:`maigym_ray.runtime.task_check`; this is its command line.
"""

from __future__ import annotations

import argparse
import sys

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)
from maigym_ray.config import RayConfig
from maigym_ray.errors import TaskError
from maigym_ray.runtime.schema import SynthConfig
from maigym_ray.runtime.task_check import check_file, format_report


def main(argv: list[str] | None = None) -> int:
    """Parses the arguments, checks every file, prints the verdicts; returns the exit status."""
    p = argparse.ArgumentParser(
        prog="python -m maigym_ray.cli.validate_tasks", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "files", nargs="+", metavar="FILE", help="task files (.jsonl, .parquet) or folders of them"
    )
    p.add_argument("--concurrency", type=int, default=2, help="instances validating at once")
    p.add_argument("--num-cpus", type=int, default=0, help="CPUs a local Ray advertises (0 = all cores)")
    p.add_argument("--ray-address", default="", help='join this Ray cluster ("" = start a local one)')
    args = p.parse_args(argv)
    status = 0
    for path in args.files:
        cfg = SynthConfig(ray=RayConfig(address=args.ray_address, num_cpus=args.num_cpus))
        cfg.concurrency = args.concurrency
        cfg.env.pools["web"].target_size = cfg.env.pools["web"].max_size = args.concurrency
        print(f"== {path}", flush=True)
        try:
            report = check_file(path, cfg)
        except TaskError as exc:
            print(f"ERROR  {exc}", flush=True)
            status = max(status, 2)
            continue
        print(format_report(report), flush=True)
        if not report.ok:
            status = max(status, 1)
    return status


if __name__ == "__main__":
    sys.exit(main())
