#!/usr/bin/env sh
# Runs the Python client's unittest suite (python/tests) with the interpreter of
# scripts/python-client, named by RIPPLEKV_PYTHON_CLIENT; exits 77 (ctest: skipped) without it.
# The suite's directory is its own top level, so `import ripplekv` finds the installed package
# (with its generated stubs), not the source tree.
# Usage: python_client_test.sh SUITE_DIR
set -eu
if [ -z "${RIPPLEKV_PYTHON_CLIENT:-}" ]; then
  echo "python_client: RIPPLEKV_PYTHON_CLIENT is not set (scripts/python-client installs the" \
    "client and prints the interpreter; scripts/test sets it): skipped"
  exit 77
fi
exec "$RIPPLEKV_PYTHON_CLIENT" -m unittest discover -v -s "$1" -t "$1"
