#!/usr/bin/env bash
# Submits a maigym_ray entry point to a running Ray cluster with `ray job submit`.
#   RAY_ADDRESS=http://HEAD:8265 launch/submit.sh maigym_ray.cli.eval experiment=debug
# The working directory travels with the job; the cluster's nodes need the set-up of scripts/setup.sh.
# Ray's token auth is on by default: the client reads the token from ~/.ray (RAY_AUTH_MODE=token).
set -euo pipefail
cd "$(dirname "$0")/.."
module=${1:?usage: launch/submit.sh MODULE [hydra overrides...]}
shift
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-token}
exec .venv/bin/ray job submit --working-dir . \
  --runtime-env-json '{"env_vars": {"WANDB_MODE": "offline"}, "excludes": [".venv", "outputs", "multirun", "wandb"]}' \
  -- python -m "$module" "ray.address=auto" "$@"
