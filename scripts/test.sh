#!/usr/bin/env bash
# Sets everything up (idempotent) and runs the checks CI runs: lint, format, then every test tier.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
