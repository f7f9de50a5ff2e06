#!/usr/bin/env bash
# `ripplekv completion bash`: the script is valid bash, passes shellcheck (when installed), and
# completes what the command defines: subcommands at two levels, a subcommand's flags, the fixed
# choices of a flag, file names for other values. Usage: completion_test.sh RIPPLEKV
set -euo pipefail
cli="$1"
script="$(mktemp)"
trap 'rm -f "$script"' EXIT
"$cli" completion bash >"$script"
bash -n "$script"
if command -v shellcheck >/dev/null; then shellcheck -s bash "$script"; fi

# Completes the words "$@" (the last one the word being typed) and prints COMPREPLY, sorted.
complete_words() {
  bash -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    _ripplekv_complete
    printf "%s\n" "${COMPREPLY[@]}" | sort' _ "$script" "$@"
}
expect() {  # expect "WANTED" WORDS...: WANTED is one of the completions
  local want="$1"; shift
  local got; got="$(complete_words "$@")"  # captured: under pipefail an early-exiting grep -q fails
  if ! grep -qx -- "$want" <<<"$got"; then
    echo "FAIL: completing '$*' does not offer '$want'; got: $(tr '\n' ' ' <<<"$got")"
    exit 1
  fi
}
refuse() {  # refuse "UNWANTED" WORDS...
  local unwanted="$1"; shift
  local got; got="$(complete_words "$@")"
  if grep -qx -- "$unwanted" <<<"$got"; then
    echo "FAIL: completing '$*' offers '$unwanted'"
    exit 1
  fi
}
expect rollout ripplekv rol
expect calibrate ripplekv ""
expect start ripplekv rollout st
expect --model ripplekv calibrate --mo
refuse --model ripplekv budgets --mo          # budgets has no --model
expect --avg-budget ripplekv budgets --profile p.json --avg
expect stored ripplekv calibrate --weights ""  # CLI::IsMember choices
refuse calibrate ripplekv calibrate --weights ""
expect bash ripplekv completion ba
dir="$(mktemp -d)"
touch "$dir/model.gguf"
expect "$dir/model.gguf" ripplekv calibrate --model "$dir/mod"
rm -rf "$dir"
echo "ok: completion of $(grep -c '") echo' "$script") commands' words"
