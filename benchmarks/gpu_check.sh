#!/usr/bin/env bash
# GPU check on a lent machine (torch + transformers only; no venv, vLLM or Ray needed):
#   OUT=/some/dir bash benchmarks/gpu_check.sh [extra gpu_check.py flags, e.g. --token-budget 16384]
#   OUT=/tmp/x PATH=.venv/bin:$PATH PLACEMENT_ARGS=--dry-run bash benchmarks/gpu_check.sh --device cpu --size tiny
#                                                                                           # CPU smoke test
# Runs from the repo root. Writes $OUT/gpu_check.json (after each part, so a cut-short run keeps what it
# measured) and $OUT/gpu_check.log. Budget: the Python part is killed after 450 s; it plans for ~4-5 min.
set -euo pipefail

cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}"
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
PY="$(command -v python3 || command -v python)"
# The repo's modules load from the tree itself: maigym_ray/__init__.py only sets environment defaults, and
# the modules used (types, harness.history, rl.packing/losses/trainer/weight_sync) import nothing but torch.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

{
    echo "== gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) in $PWD, OUT=$OUT"
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.max.sm,power.limit \
        --format=csv || echo "nvidia-smi unavailable"
    "$PY" --version
    "$PY" -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda,
"available", torch.cuda.is_available(), "| transformers", transformers.__version__)'
} 2>&1 | tee "$LOG"

rc=0
timeout 450 "$PY" -u benchmarks/gpu_check.py --device cuda --size "${GPU_CHECK_SIZE:-smollm2}" --json "$OUT/gpu_check.json" "$@" \
    2>&1 | tee -a "$LOG" || rc=$?
echo "== gpu_check.py exit status $rc (124: killed at 450 s; the JSON holds the parts that finished)" \
    | tee -a "$LOG"
# The trainer group on CUDA through the placement code, and a bucketed broadcast from it (needs ray; without
# it the script writes {"skipped": ...}). Writes $OUT/gpu_placement.json.
rc2=0
# PLACEMENT_ARGS=--dry-run runs it on the CPU with a tiny model (what tests/integration/test_gpu_placement_dry.py
# runs in CI).
# shellcheck disable=SC2086
timeout 240 "$PY" -u benchmarks/gpu_placement_check.py --json "$OUT/gpu_placement.json" ${PLACEMENT_ARGS:-} \
    2>&1 | tee -a "$LOG" || rc2=$?
echo "== gpu_placement_check.py exit status $rc2" | tee -a "$LOG"
[ "$rc" = 0 ] || exit "$rc"
exit "$rc2"
