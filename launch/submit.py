"""Submits a maigym_ray entry point to a running Ray cluster as a Ray job (``ray.job_submission``).

    launch/submit.py [--address URL] [--remote] [--no-wait] [--env K=V ...] MODULE [hydra overrides...]
    launch/submit.sh ...                                  # the same, through the checkout's venv

The checkout is uploaded as the job's working directory (minus .venv, .git, outputs, ...), and the job runs
``PYTHON -m MODULE ray.address=auto OVERRIDES`` on the head node, where PYTHON is:

- ``$MAIGYM_PYTHON`` when set: the cluster's interpreter, a path on the head node;
- for a head on this machine (a loopback address, unless --remote), this interpreter (``sys.executable``):
  a job's ``python`` is looked up on the PATH of whoever ran ``ray start``, and ``.venv/bin/ray start``
  without an activated venv leaves the venv's python off that PATH (checked with Ray 2.60);
- otherwise ``python`` on the head's PATH (``launch/cluster.yaml`` starts Ray with the venv's bin on PATH).

Exit status: 0 when the job succeeded (or was only submitted, with --no-wait), 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ADDRESS = "http://127.0.0.1:8265"
#: never uploaded: the environment, VCS data, run outputs and caches (Ray's size limit is 512 MiB).
EXCLUDES = [
    ".venv",
    ".git",
    "outputs",
    "multirun",
    "runs",
    "wandb",
    "**/__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    ".cache",
    "*.egg-info",
]
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
#: Hydra's command-line flags that take a value (hydra/_internal/utils.py); ``--info`` takes an optional one.
HYDRA_VALUE_FLAGS = {
    "--cfg",
    "-c",
    "--package",
    "-p",
    "--config-path",
    "-cp",
    "--config-name",
    "-cn",
    "--config-dir",
    "-cd",
    "--experimental-rerun",
}
INFO_CHOICES = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}


def resolve_address(cli_address: str | None = None) -> str:
    """The job server address: --address, else ``RAY_API_SERVER_ADDRESS`` or ``RAY_ADDRESS`` (the order
    ``ray job submit`` uses), else the local default."""
    return (
        cli_address
        or os.environ.get("RAY_API_SERVER_ADDRESS")
        or os.environ.get("RAY_ADDRESS")
        or DEFAULT_ADDRESS
    )


def is_local_address(address: str) -> bool:
    """Whether ``address`` (``http://host:port``, ``host:port`` or ``auto``) names a head on this machine."""
    if address in ("auto", "local"):
        return True
    host = urlparse(address if "://" in address else f"//{address}").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_env() -> dict[str, str]:
    """The settings that keep a local Ray on 127.0.0.1 (see maigym_ray/__init__.py)."""
    if str(ROOT) not in sys.path:  # run as a script, the checkout is not necessarily importable
        sys.path.insert(0, str(ROOT))
    from maigym_ray import LOOPBACK_ENV

    return dict(LOOPBACK_ENV)


def build_runtime_env(local: bool, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """The job's runtime env: the checkout as working dir, offline wandb and, for a head on this machine, the
    loopback settings. A multi-node cluster keeps its own network settings: ``GLOO_SOCKET_IFNAME=lo`` would
    cut its collectives off from the other nodes."""
    env_vars = {"WANDB_MODE": os.environ.get("WANDB_MODE", "offline")}
    if local:
        env_vars.update({k: os.environ.get(k, v) for k, v in loopback_env().items()})
    env_vars.update(extra_env or {})
    return {"working_dir": str(ROOT), "excludes": list(EXCLUDES), "env_vars": env_vars}


def resolve_python(local: bool) -> str:
    """The interpreter the job runs on the head node (see the module docstring)."""
    if os.environ.get("MAIGYM_PYTHON"):
        return os.environ["MAIGYM_PYTHON"]
    return sys.executable if local else "python"


def with_ray_address(args: list[str]) -> list[str]:
    """``args`` with ``ray.address=auto`` added (unless given) before the first override, after any leading
    Hydra flags: Hydra's parser takes the overrides as one run of positionals, so
    ``ray.address=auto -m a=1,2`` would be an error ("unrecognized arguments") while
    ``-m ray.address=auto a=1,2`` is what was meant."""
    if any(a.lstrip("+").startswith("ray.address=") for a in args):
        return list(args)
    i = 0
    while i < len(args) and args[i].startswith("-"):
        flag = args[i]
        i += 1
        if flag in HYDRA_VALUE_FLAGS or (
            flag in ("--info", "-i") and i < len(args) and args[i] in INFO_CHOICES
        ):
            i += 1  # the flag's value
    return [*args[:i], "ray.address=auto", *args[i:]]


def build_entrypoint(module: str, overrides: list[str], python: str) -> str:
    """The shell command the head runs; every word is quoted (overrides like ``tasks.apps=[a,b]``)."""
    return shlex.join([python, "-m", module, *with_ray_address(overrides)])


def submit_with_retry(client: Any, retry_s: float = 60.0, **job: Any) -> str:
    """``client.submit_job(**job)``, retried while the head has no job agent yet: a freshly started head
    answers its dashboard before its agent registers, and refuses jobs until then."""
    deadline = time.monotonic() + retry_s
    while True:
        try:
            return client.submit_job(**job)
        except RuntimeError as e:
            if "No available agent" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def wait_for(client: Any, submission_id: str, poll_s: float = 1.0, follow_logs: bool = True) -> str:
    """Streams the job's logs to stdout until it ends and returns its final status."""
    if follow_logs:

        async def tail() -> None:
            async for lines in client.tail_job_logs(submission_id):
                print(lines, end="", flush=True)

        try:
            asyncio.run(tail())
        except Exception as e:  # a dropped log stream must not lose the job's result: poll instead
            print(f"[submit] log stream ended early ({e!r}); polling the status", file=sys.stderr)
    while (status := str(client.get_job_status(submission_id).value)) not in TERMINAL:
        time.sleep(poll_s)
    return status


def _env_pair(kv: str) -> tuple[str, str]:
    key, sep, value = kv.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected K=V, got {kv!r}")
    return key, value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options; everything after MODULE is passed to the entry point unchanged."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--address", help=f"job server (default: $RAY_ADDRESS or {DEFAULT_ADDRESS})")
    p.add_argument(
        "--remote",
        action="store_true",
        help="the head is elsewhere although the address is loopback (an SSH tunnel: `ray dashboard`)",
    )
    p.add_argument("--no-wait", action="store_true", help="submit and return without following the job")
    p.add_argument("--submission-id", help="the job's id (default: generated)")
    p.add_argument(
        "--env", action="append", default=[], type=_env_pair, metavar="K=V", help="extra env var (repeatable)"
    )
    p.add_argument("module", help="entry point module, e.g. maigym_ray.cli.eval")
    p.add_argument("overrides", nargs=argparse.REMAINDER, help="Hydra overrides")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Submits the job and, unless --no-wait, follows it. Returns the process exit status."""
    args = parse_args(argv)
    # Ray's default is token auth; the client then sends the token from $RAY_AUTH_TOKEN,
    # $RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token. Set before ray is imported: Ray reads it once.
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    import maigym_ray  # noqa: F401  (a local Ray, if any, stays on loopback)

    # isort: split
    from ray.job_submission import JobSubmissionClient

    address = resolve_address(args.address)
    local = is_local_address(address) and not args.remote
    extra_env = dict(args.env)
    client = JobSubmissionClient(address)
    submission_id = submit_with_retry(
        client,
        entrypoint=build_entrypoint(args.module, args.overrides, resolve_python(local)),
        runtime_env=build_runtime_env(local, extra_env),
        submission_id=args.submission_id,
    )
    print(f"[submit] {submission_id} submitted to {address}", flush=True)
    if args.no_wait:
        return 0
    try:
        status = wait_for(client, submission_id)
    except KeyboardInterrupt:
        print(
            f"\n[submit] detached; {submission_id} keeps running (ray job stop {submission_id})", flush=True
        )
        return 130
    print(f"[submit] {submission_id} {status}", flush=True)
    return 0 if status == "SUCCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main())
