#!/usr/bin/env bash
# scripts/check-layout on a small tree with known violations: it must name each of them, pass the
# allowed includes and copies (kernels/ may copy memory), and exit 1; on the repository itself it
# must pass.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{method,scheduler/core,scheduler/service,worker/eval,worker/tokenizer}
printf '#include "worker/engine/transformer.h"\n#include "kernels/base/status.h"\n' > "$tree/method/a.h"
printf '#include "grpcpp/grpcpp.h"\n#include "store/store.h"\n' > "$tree/scheduler/core/b.cc"
printf '#include "grpcpp/grpcpp.h"\n#include "scheduler/core/scheduler.h"\n' > "$tree/scheduler/service/c.cc"
printf '#include "worker/calibration/calibration_run.h"\n#include "worker/data/corpora.h"\n' > "$tree/worker/eval/d.cc"
printf '#include "worker/model/gguf_reader.h"\n#include "worker/model/model_loader.h"\n' > "$tree/worker/tokenizer/e.cc"
mkdir -p "$tree/worker/engine" "$tree/kernels/ops"
printf '// std::memcpy( in a comment is fine\nvoid f() { std::memcpy(a, b, 4); }\n' > "$tree/worker/engine/f.cc"
printf 'void g() { std::memcpy(a, b, 4); }\n' > "$tree/kernels/ops/g.cc"
if out="$("$root/scripts/check-layout" "$tree" 2>&1)"; then
  echo "FAIL: check-layout passed a tree with violations"; exit 1
fi
expected=("method/a.h:1: includes worker/engine/transformer.h"
          "scheduler/core/b.cc:1: includes grpcpp/grpcpp.h"
          "worker/eval/d.cc:1: includes worker/calibration/calibration_run.h"
          "worker/tokenizer/e.cc:2: includes worker/model/model_loader.h"
          "worker/engine/f.cc:2: calls memcpy"
          "check-layout: 5 violation(s)")
for line in "${expected[@]}"; do
  grep -qF "$line" <<< "$out" || { echo "FAIL: missing \"$line\" in:"; echo "$out"; exit 1; }
done
"$root/scripts/check-layout" "$root"
echo "check-layout: 5 of 5 planted violations found, repository clean"
