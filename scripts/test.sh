#!/usr/bin/env bash
# Sets everything up (idempotent) and runs the checks CI runs: lint, format, then every test tier; with no
# arguments, the numeric tests again on each other CPU kernel path torch can pick (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] set-up took ${SECONDS} s"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
fi
# Two pytest-xdist workers, one per core: a single process left a core idle a third of the time (tests wait on
# subprocesses, Chromium and Ray start-up). Each file runs whole on one worker, and the files that train share
# one worker in turn (HEAVY_FILES in tests/conftest.py), so no two trainings contend for the cores or memory.
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 -m "not multinode and not bench" --durations=25
# The later tiers collect only the files that name their marker (a mark lives in its file's text: pytestmark or a
# decorator, tests/unit/test_tiers.py): collecting all 2,000-odd tests imports torch, vLLM and Ray in every
# worker, about 20 s a run, for a tier of a few files.
marked() { grep -rlE "mark\.$1\b" tests --include='test_*.py' | sort; }
# Every benchmark at its smallest size, its JSON keys checked (tests/bench/); each one's seconds in the log.
echo "[test] benchmark smoke tier"
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 -m "bench and not multinode" --durations=0 -rs $(marked bench)
# A multi-node cluster replaces the test process's Ray connection (and the session's shared Ray actors with it):
# those tests get a process of their own.
echo "[test] multi-node tests (a loopback cluster of three nodes)"
.venv/bin/python -m pytest -q -p no:cacheprovider -m multinode $(marked multinode)
# A float32 result depends on the kernels torch picks (SIMD width sets the summation order), and CI machines
# differ: a tolerance that holds on this CPU's kernels must hold on the others too.
native=$(.venv/bin/python -c "import torch; print(torch.backends.cpu.get_cpu_capability().lower())")
for cap in default avx2 avx512; do
  [ "$cap" = "$native" ] && continue
  [ "$cap" = avx512 ] && ! grep -qw avx512f /proc/cpuinfo && continue
  echo "[test] tests marked numeric with ATEN_CPU_CAPABILITY=$cap (this CPU's own: $native)"
  ATEN_CPU_CAPABILITY=$cap .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 -m numeric $(marked numeric)
done
