"""``python -m maigym_ray.cli.view RUN_DIR [RUN_DIR ...]``: a local web UI for runs and their trajectories.

Pages: Runs (config, phases, curves from metrics.jsonl, held-out success; polled while the run goes on),
Episodes (filters, sorting, paging), one episode step by step, and Compare two runs. It binds to 127.0.0.1
only: trajectories hold model output and page text, which stay on this machine (reach it from elsewhere
through an SSH tunnel).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from aiohttp import web

from maigym_ray.errors import ConfigError
from maigym_ray.viewer.server import make_app

HOST = "127.0.0.1"


def main(argv: list[str] | None = None) -> None:
    """Parses the arguments and serves until interrupted."""
    p = argparse.ArgumentParser(prog="python -m maigym_ray.cli.view", description=__doc__.splitlines()[0])
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories of eval, collect or train")
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0 = any free port)")
    args = p.parse_args(argv)
    for d in args.run_dirs:
        if not Path(d).is_dir():
            raise ConfigError(f"not a run directory: {d}")
    web.run_app(
        make_app(args.run_dirs),
        host=HOST,
        port=args.port,
        print=lambda _: print(f"viewer on http://{HOST}:{args.port}/ (Ctrl-C stops it)", flush=True),
    )


if __name__ == "__main__":
    main()
