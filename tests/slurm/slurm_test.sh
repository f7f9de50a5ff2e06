#!/usr/bin/env bash
# Runs tests/slurm/test_slurm.py against a real Slurm cluster on this machine: starts one with
# tests/slurm/slurm-cluster in a private directory, runs the suite with the Python client's
# interpreter (RIPPLEKV_PYTHON_CLIENT, from scripts/python-client), and stops the cluster on exit.
# Exits 77 (ctest: skipped), saying why, without the interpreter or the model, or where the
# machine cannot host a cluster (not root, Slurm not installed, no mknod).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ -z "${RIPPLEKV_PYTHON_CLIENT:-}" ]]; then
  echo "slurm: RIPPLEKV_PYTHON_CLIENT is not set (scripts/python-client; scripts/test sets it):" \
    "skipped"
  exit 77
fi
if [[ -z "${RIPPLEKV_SMOLLM2_GGUF:-}" ]]; then
  echo "slurm: RIPPLEKV_SMOLLM2_GGUF is not set (the default model): skipped"
  exit 77
fi
dir="$(mktemp -d "${TMPDIR:-/tmp}/ripplekv-slurm-cluster.XXXXXX")"
trap '"$here/slurm-cluster" stop "$dir"; rm -rf "$dir"' EXIT
status=0
"$here/slurm-cluster" start "$dir" || status=$?
if ((status == 3)); then
  echo "slurm: skipped (the message above says why)"
  exit 77
fi
((status == 0)) || exit "$status"
echo "slurm: a cluster of $(SLURM_CONF="$dir/slurm.conf" sinfo -h -N -o %N | paste -sd, -) is up" \
  "($dir)"
SLURM_CLUSTER_DIR="$dir" OMP_NUM_THREADS=1 \
  "$RIPPLEKV_PYTHON_CLIENT" -m unittest discover -v -s "$here" -p "test_*.py" 2>&1 || status=$?
exit "$status"
