#!/usr/bin/env bash
# Submits a maigym_ray entry point to a running Ray cluster as a Ray job; a thin entry to launch/submit.py.
#   launch/submit.sh maigym_ray.cli.eval experiment=debug                     # head on this machine (:8265)
#   RAY_ADDRESS=http://HEAD:8265 launch/submit.sh maigym_ray.cli.train experiment=debug
#   launch/submit.sh --no-wait --env HF_HOME=/data/hf maigym_ray.cli.eval ...  # options go before MODULE
# Works from any directory. The checkout is uploaded as the job's working dir; the job runs
# `PYTHON -m MODULE ray.address=auto ...` on the head (PYTHON: $MAIGYM_PYTHON, see launch/README.md).
# Token auth is Ray's default: the client sends $RAY_AUTH_TOKEN, $RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The client needs `ray` importable: this checkout's venv, else $MAIGYM_CLIENT_PYTHON or python3.
if [ -n "${MAIGYM_CLIENT_PYTHON:-}" ]; then py=$MAIGYM_CLIENT_PYTHON
elif [ -x "$root/.venv/bin/python" ]; then py=$root/.venv/bin/python
else py=python3; fi
exec "$py" "$root/launch/submit.py" "$@"
