#!/usr/bin/env bash
# scripts/device-check --preflight: nvcc found off PATH, and the driver's three cases (none, too
# old for CUDA 13, new enough), each reported on its own line before anything is built. The
# driver is a stand-in nvidia-smi printing a version; skips (77) where no CUDA toolkit is at
# /usr/local/cuda.
# Usage: device_check_preflight_test.sh REPO_ROOT
set -euo pipefail
root="$1"
[[ -x /usr/local/cuda/bin/nvcc ]] || { echo "no CUDA toolkit at /usr/local/cuda: skipped"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# $1: driver version the stand-in reports ("" = no nvidia-smi). Prints stderr, returns the status.
preflight() {
  rm -rf "${tmp:?}/bin"
  mkdir -p "$tmp/bin"
  if [[ -n "$1" ]]; then
    printf '#!/bin/sh\necho %s\n' "$1" >"$tmp/bin/nvidia-smi"
    chmod +x "$tmp/bin/nvidia-smi"
  fi
  env -u CUDACXX -u CUDA_HOME PATH="$tmp/bin:/usr/bin:/bin" \
    "$root/scripts/device-check" --preflight 2>&1
}

out="$(preflight "")" && fail "no driver: exit 0"
grep -q "nvcc: /usr/local/cuda/bin/nvcc (" <<<"$out" || fail "nvcc off PATH not found: $out"
grep -q "driver: no NVIDIA driver answers" <<<"$out" || fail "no driver line: $out"
grep -q "nothing to check here" <<<"$out" || fail "no closing line: $out"

status=0
out="$(preflight "570.86.10")" || status=$?
((status == 2)) || fail "old driver: exit $status"
grep -q "driver: 570.86.10 is older than the 580" <<<"$out" || fail "old driver line: $out"

status=0
out="$(preflight "580.65.06")" || status=$?
((status == 0)) || fail "new driver: exit $status: $out"
grep -q "driver: 580.65.06$" <<<"$out" || fail "driver line: $out"
echo "device-check preflight: nvcc off PATH found; no, old and new drivers reported"
