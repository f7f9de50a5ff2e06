#!/usr/bin/env sh
# Runs the kvpress suite (python/kvpress_tests: RippleKV's maps applied inside kvpress) with the
# interpreter of scripts/python-kvpress, named by RIPPLEKV_PYTHON_KVPRESS. Exits 77 (ctest:
# skipped), saying why, without it, without the default model, or when torch, transformers or
# kvpress do not import on this machine.
# Usage: kvpress_test.sh SUITE_DIR
set -eu
if [ -z "${RIPPLEKV_PYTHON_KVPRESS:-}" ]; then
  echo "python_kvpress: RIPPLEKV_PYTHON_KVPRESS is not set (scripts/python-kvpress installs" \
    "torch, transformers and kvpress and prints the interpreter; scripts/test sets it): skipped"
  exit 77
fi
if [ -z "${RIPPLEKV_SMOLLM2_GGUF:-}" ]; then
  echo "python_kvpress: RIPPLEKV_SMOLLM2_GGUF is not set (the default model): skipped"
  exit 77
fi
if ! why=$("$RIPPLEKV_PYTHON_KVPRESS" -c "import torch, transformers, kvpress" 2>&1); then
  echo "python_kvpress: torch, transformers or kvpress does not import here: skipped"
  echo "$why" | tail -n 1
  exit 77
fi
exec "$RIPPLEKV_PYTHON_KVPRESS" -m unittest discover -v -s "$1" -t "$1"
