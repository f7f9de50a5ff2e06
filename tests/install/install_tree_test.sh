#!/usr/bin/env bash
# `cmake --install BUILD --prefix DIR` gives a tree that runs from anywhere: install into a
# temporary prefix, check its layout (binaries, docs, examples, completion, units, config),
# check no installed file names the build tree, move the tree elsewhere and run the moved
# `ripplekv info` and a small calibration on the model from there.
# Usage: install_tree_test.sh BUILD_DIR   (env: RIPPLEKV_SMOLLM2_GGUF; exit 77 without it)
set -euo pipefail
build="$(cd "$1" && pwd)"
model="${RIPPLEKV_SMOLLM2_GGUF:-}"
if [[ -z "$model" || ! -f "$model" ]]; then
  echo "SKIP: RIPPLEKV_SMOLLM2_GGUF is not set (scripts/fetch-model)"
  exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$work/first" >"$work/install.log"
for f in bin/ripplekv bin/ripplekv-scheduler bin/ripplekv-worker bin/ripplekv-agent; do
  [[ -x "$work/first/$f" ]] || fail "$f is not installed"
done
for f in share/doc/ripplekv/README.md share/doc/ripplekv/docs/INSTALL.md \
         share/doc/ripplekv/examples/helm/ripplekv/Chart.yaml \
         share/bash-completion/completions/ripplekv; do
  [[ -f "$work/first/$f" ]] || fail "$f is not installed"
done
# Everything lands in the documented places, nothing else.
unexpected="$(cd "$work/first" && find . -type f | { grep -Ev '^\./(bin|share/doc/ripplekv|share/doc/ripplekv-worker|share/bash-completion/completions|lib/systemd/system|etc/ripplekv)/' || true; })"
[[ -z "$unexpected" ]] || fail "files outside the documented places: $unexpected"
# No installed file refers to the build tree (an RPATH, a data path).
if grep -rlF "$build" "$work/first" >"$work/hits"; then
  fail "installed files name the build tree $build: $(tr '\n' ' ' <"$work/hits")"
fi

mv "$work/first" "$work/moved"
bin="$work/moved/bin"
version="$("$bin/ripplekv" --version)" || fail "the moved ripplekv --version failed"
[[ "$version" == "ripplekv "* ]] || fail "the moved ripplekv --version printed: $version"
"$bin/ripplekv" info "$model" >"$work/info.txt" || fail "the moved ripplekv info failed"
grep -q 'layers' "$work/info.txt" || fail "ripplekv info printed no layer count: $(cat "$work/info.txt")"
OMP_NUM_THREADS=1 "$bin/ripplekv" calibrate --model "$model" --samples 1 --layers 0,1 --trials 1 \
  --context-len 64 --probe 8 --threads 1 --out "$work/profile.json" >"$work/calibrate.log" 2>&1 ||
  fail "the moved ripplekv calibrate failed: $(tail -5 "$work/calibrate.log")"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["layers"], p' \
  "$work/profile.json" || fail "the calibration wrote no profile"
"$bin/ripplekv-worker" --version >/dev/null || fail "the moved ripplekv-worker --version"
echo "ok: installed, moved, ran info and a calibration from $work/moved"
