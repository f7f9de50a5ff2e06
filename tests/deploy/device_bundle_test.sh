#!/usr/bin/env bash
# scripts/device-bundle from the test's build directory (nothing is built: --no-build), then the
# bundle's runner on a machine without a GPU: it exits 2 within seconds, says "no device" on
# stderr and in OUT_DIR/summary.{md,json}, with nvidia-smi absent and with a stand-in nvidia-smi
# that finds no GPU. The bundle is self-contained: with an empty LD_LIBRARY_PATH every binary
# resolves each library that is not the C library's or the CUDA runtime's from the bundle's lib/,
# a bundled program runs, and the whole folder is at most 60 MiB. With a stand-in nvidia-smi that
# reports a GPU, the runner's preflight finds the CUDA toolkit's libraries as the runtime and every
# program loads, from this bundle and from one whose largest library travels gzipped. Skips (77)
# where the build has no CUDA backend or NCCL header. The scripts pass shellcheck where it is
# installed.
# Usage: device_bundle_test.sh REPO_ROOT BUILD_DIR
set -euo pipefail
root="$1" build="$2"
grep -q '^CMAKE_CUDA_COMPILER:[A-Z]*=.*nvcc$' "$build/CMakeCache.txt" ||
  { echo "the build has no CUDA backend: skipped"; exit 77; }
grep -q '^RIPPLEKV_NCCL_INCLUDE_DIR:PATH=/' "$build/CMakeCache.txt" ||
  { echo "the build found no nccl.h: skipped"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if command -v shellcheck >/dev/null; then
  shellcheck "$root/scripts/device-bundle" "$root/deploy/device-bundle/run" "$0" ||
    fail "shellcheck findings above"
fi

bundle="$tmp/bundle"
"$root/scripts/device-bundle" --build "$build" --out "$bundle" --no-build >"$tmp/bundle.txt" ||
  fail "device-bundle: exit $?: $(cat "$tmp/bundle.txt")"
cat "$tmp/bundle.txt"
for b in backend_ops_test device_engine_test nccl_threads_test tp_threads_device_test \
    ripplekv-make-model ripplekv-device-calibration-bench; do
  [[ -x "$bundle/bin/$b" ]] || fail "bin/$b missing"
done
[[ -x "$bundle/run" && -f "$bundle/bundle.env" ]] || fail "run or bundle.env missing"
bytes=$(du -sb "$bundle" | cut -f1)
((bytes <= 60 * 1024 * 1024)) || fail "the bundle is $bytes bytes, over 60 MiB"
grep -q "^total .* MiB (limit 60 MiB)" "$tmp/bundle.txt" || fail "no size line"

# Self-contained: only the C library and the CUDA runtime may come from elsewhere.
provided='^(linux-vdso|(/[^ ]*/)?ld-linux[-a-z0-9_]*|libc|libm|libmvec|libpthread|libdl|librt'
provided+='|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so'
for b in "$bundle"/bin/*; do
  while read -r name arrow path _; do
    [[ "$name" =~ $provided ]] && continue
    [[ "$arrow" == "=>" ]] || fail "$(basename "$b"): unexpected ldd line: $name $arrow $path"
    [[ "$(realpath "$path")" == "$(realpath "$bundle/lib")/"* ]] ||
      fail "$(basename "$b"): $name resolves to $path, not the bundle's lib/"
  done < <(env -u LD_LIBRARY_PATH ldd "$b" | sed 's/^[[:space:]]*//')
done
# A bundled program runs on the bundled libraries alone (it needs no CUDA library).
env -u LD_LIBRARY_PATH "$bundle/bin/ripplekv-make-model" --shape smollm2-135m --layers 1 \
  --vocab 512 --type q8_0 --out "$tmp/tiny.gguf" >/dev/null 2>&1 ||
  fail "the bundled ripplekv-make-model does not run"
[[ -s "$tmp/tiny.gguf" ]] || fail "ripplekv-make-model wrote nothing"

# $1: a folder to put first on PATH ("" for none). Runs the runner with a clean environment.
run_no_device() {
  local path="/usr/bin:/bin" status=0
  [[ -n "$1" ]] && path="$1:$path"
  rm -rf "$tmp/out"
  SECONDS=0
  env -i PATH="$path" HOME="$tmp" "$bundle/run" "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr" ||
    status=$?
  ((status == 2)) || fail "no device: exit $status: $(cat "$tmp/stderr")"
  ((SECONDS <= 20)) || fail "no device: took $SECONDS s"
  grep -q "^run: no device: " "$tmp/stderr" || fail "no verdict line: $(cat "$tmp/stderr")"
  grep -q '^\*\*no device\*\*: ' "$tmp/out/summary.md" ||
    fail "summary.md: $(cat "$tmp/out/summary.md")"
  grep -q '"status": "no device"' "$tmp/out/summary.json" || fail "summary.json"
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/out/summary.json" ||
    fail "summary.json is not JSON"
}
[[ ! -x /usr/bin/nvidia-smi ]] || { echo "this machine has nvidia-smi: skipped"; exit 77; }
run_no_device ""
grep -q "nvidia-smi not found" "$tmp/stderr" || fail "no-driver reason: $(cat "$tmp/stderr")"
mkdir -p "$tmp/bin"
printf '#!/bin/sh\necho "No devices were found"\nexit 6\n' >"$tmp/bin/nvidia-smi"
chmod +x "$tmp/bin/nvidia-smi"
run_no_device "$tmp/bin"
grep -q "nvidia-smi finds no GPU (No devices were found)" "$tmp/stderr" ||
  fail "no-GPU reason: $(cat "$tmp/stderr")"

# With a stand-in nvidia-smi that reports a GPU and the CUDA toolkit's libraries as the runtime,
# the preflight finds everything and every program loads; also from a bundle whose largest
# library travels gzipped.
if [[ -e /usr/local/cuda/lib64/libcudart.so.13 ]]; then
  printf '#!/bin/sh\necho "0, NVIDIA H100 80GB HBM3, 81559 MiB, 580.65.06"\n' >"$tmp/bin/nvidia-smi"
  RIPPLEKV_BUNDLE_LIMIT_MIB=40 "$root/scripts/device-bundle" --build "$build" \
    --out "$tmp/small-bundle" --no-build >"$tmp/small.txt" ||
    fail "gzipped bundle: $(cat "$tmp/small.txt")"
  ls "$tmp/small-bundle"/lib/*.gz >/dev/null 2>&1 ||
    fail "no gzipped library: $(cat "$tmp/small.txt")"
  for b in "$bundle" "$tmp/small-bundle"; do
    status=0
    env -i PATH="$tmp/bin:/usr/bin:/bin" HOME="$tmp" CUDA_HOME=/usr/local/cuda \
      "$b/run" --preflight "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr" || status=$?
    ((status == 0)) || fail "preflight: exit $status: $(cat "$tmp/stderr")"
    grep -q "^run: ready: 1 GPU(s), driver 580.65.06" "$tmp/stderr" ||
      fail "preflight: $(cat "$tmp/stderr")"
    if grep -q "cannot load" "$tmp/stderr"; then fail "preflight: $(cat "$tmp/stderr")"; fi
    grep -q "CUDA runtime: /usr/local/cuda/" "$tmp/out/summary.md" ||
      fail "summary: $(cat "$tmp/out/summary.md")"
  done
fi
echo "device bundle: $((bytes / 1048576)) MiB, self-contained; the runner exits 2 without a device"
