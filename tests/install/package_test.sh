#!/usr/bin/env bash
# The Debian packages of this build: scripts/package --build-dir BUILD makes them, their control
# fields are checked (names, shlibdeps-computed Depends), `dpkg -i` installs them into this
# machine's root, the installed /usr/bin/ripplekv answers --version and `info` on the model, the
# worker --version, the files are where the docs say, and `dpkg --purge` removes everything again.
# Needs root and dpkg (exit 77 otherwise, and when a ripplekv package is already installed: the
# test never replaces or removes what an operator installed).
# Usage: package_test.sh SOURCE_DIR BUILD_DIR   (env: RIPPLEKV_SMOLLM2_GGUF)
set -euo pipefail
source_dir="$1"
build="$(cd "$2" && pwd)"
model="${RIPPLEKV_SMOLLM2_GGUF:-}"
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || skip "installing a package needs root"
command -v dpkg >/dev/null || skip "no dpkg"
[[ -n "$model" && -f "$model" ]] || skip "RIPPLEKV_SMOLLM2_GGUF is not set (scripts/fetch-model)"
for p in ripplekv ripplekv-worker ripplekv-cuda ripplekv-worker-cuda; do
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == *"install ok installed"* ]]; then
    skip "$p is already installed on this machine"
  fi
done

out="$(mktemp -d)"
installed=()
cleanup() {
  if ((${#installed[@]} > 0)); then dpkg --purge "${installed[@]}" >/dev/null 2>&1 || true; fi
  rm -rf "$out"
}
trap cleanup EXIT
mapfile -t debs < <("$source_dir/scripts/package" --build-dir "$build" --out "$out" 2>"$out/package.log") ||
  fail "scripts/package failed: $(tail -20 "$out/package.log")"
((${#debs[@]} == 2)) || fail "expected 2 packages, got: ${debs[*]}"

for deb in "${debs[@]}"; do
  name="$(dpkg-deb -f "$deb" Package)"
  depends="$(dpkg-deb -f "$deb" Depends)"
  case "$name" in
    ripplekv | ripplekv-cuda) main="$name"
      [[ "$depends" == *libgrpc++* && "$depends" == *librocksdb* ]] ||
        fail "$name Depends lacks gRPC or RocksDB (dpkg-shlibdeps): $depends" ;;
    ripplekv-worker | ripplekv-worker-cuda) worker="$name"
      [[ "$depends" == *libopenblas* && "$depends" == *libgrpc++* ]] ||
        fail "$name Depends lacks OpenBLAS or gRPC: $depends" ;;
    *) fail "unexpected package $name" ;;
  esac
  echo "$name $(dpkg-deb -f "$deb" Version): Depends: $depends"
done

installed=("$main" "$worker")  # from here on, the cleanup removes them whatever happens
dpkg -i "${debs[@]}" >"$out/dpkg.log" 2>&1 || fail "dpkg -i failed: $(cat "$out/dpkg.log")"
# Outputs are captured before they are matched: under pipefail, `cmd | grep -q` fails whenever grep
# stops reading early and cmd dies of SIGPIPE.
version="$(/usr/bin/ripplekv --version)" || fail "/usr/bin/ripplekv --version failed"
[[ "$version" == "ripplekv "* ]] || fail "/usr/bin/ripplekv --version printed: $version"
info="$(/usr/bin/ripplekv info "$model")" || fail "/usr/bin/ripplekv info failed"
[[ "$info" == *layers* ]] || fail "/usr/bin/ripplekv info printed no layer count: $info"
version="$(/usr/bin/ripplekv-worker --version)" || fail "/usr/bin/ripplekv-worker --version failed"
[[ "$version" == "ripplekv-worker "* ]] || fail "/usr/bin/ripplekv-worker --version printed: $version"
for f in /usr/bin/ripplekv-scheduler /usr/bin/ripplekv-agent /usr/share/doc/ripplekv/README.md \
         /usr/share/bash-completion/completions/ripplekv; do
  [[ -e "$f" ]] || fail "$f is not installed by the package"
done
listed="$(dpkg -L "$main")"
grep -qx /usr/bin/ripplekv <<<"$listed" || fail "dpkg -L $main does not list /usr/bin/ripplekv"

[[ -f /etc/ripplekv/scheduler.env ]] || fail "/etc/ripplekv/scheduler.env is not installed"
getent passwd ripplekv >/dev/null || fail "the postinst did not create the ripplekv user"
dpkg --purge "$main" "$worker" >"$out/remove.log" 2>&1 ||
  fail "dpkg --purge failed: $(cat "$out/remove.log")"
installed=()
[[ ! -e /usr/bin/ripplekv && ! -e /usr/bin/ripplekv-worker ]] || fail "dpkg --purge left the binaries"
[[ ! -e /etc/ripplekv/scheduler.env ]] || fail "dpkg --purge left /etc/ripplekv/scheduler.env"
echo "ok: ${debs[*]##*/} installed, ran, removed"
