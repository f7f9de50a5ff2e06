#!/usr/bin/env bash
# scripts/check-layout on a small tree with one planted violation in every folder docs/DESIGN.md §4
# governs (a header of a folder it may not depend on; cli/, which may include anything, a raw
# memory copy), gRPC headers outside the network edge ("" and <>), and folders with sources but no
# rule: it must name each of them, pass the allowed includes and copies (kernels/ may copy memory,
# tests/ and bench/ anything, build trees and hidden folders are not sources), and exit 1. A rule
# whose folder has no row in docs/DESIGN.md §4 fails too. On the repository itself it must pass.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
plant() {  # plant FILE LINE...: FILE in the tree, one line per argument
  mkdir -p "$(dirname "$tree/$1")"
  local file="$1"; shift
  printf '%s\n' "$@" > "$tree/$file"
}
mkdir -p "$tree/docs"
cp "$root/docs/DESIGN.md" "$tree/docs/DESIGN.md"

# One violation per governed folder (RULES of scripts/check-layout), each on line 2 or 1.
plant base/kb.h '#include "base/status.h"' '#include "kernels/tensor/tensor.h"'
plant kernels/tensor/kt.h '#include "base/status.h"' '#include "kernels/ops/gather.h"'
plant kernels/ops/ko.cc '#include "kernels/tensor/tensor.h"' '#include "method/apportion.h"'
plant telemetry/te.cc '#include "base/status.h"' '#include "method/profile.h"'
plant method/a.h '#include "worker/engine/transformer.h"' '#include "base/status.h"'
plant store/st.cc '#include "method/profile.h"' '#include "scheduler/core/scheduler.h"'
plant proto/client_channel.cc '#include "proto/x.h"' '#include "method/profile.h"'
plant proto/budget_params.cc '#include "method/budget_map.h"' '#include "store/store.h"'
plant proto/calibration_params.cc '#include "method/calibration_params.h"' '#include "worker/calibration/calibration_run.h"'
plant proto/profile.cc '#include "method/profile.h"' '#include "scheduler/core/scheduler.h"'
plant worker/model/mo.cc '#include "kernels/ops/gather.h"' '#include "method/profile.h"'
plant worker/tokenizer/e.cc '#include "worker/model/gguf_reader.h"' '#include "worker/model/model_loader.h"'
plant worker/engine/en.cc '#include "worker/model/model_loader.h"' '#include "worker/tokenizer/bpe.h"'
plant worker/data/da.cc '#include "worker/tokenizer/bpe.h"' '#include "worker/engine/transformer.h"'
plant worker/calibration/ca.cc '#include "worker/data/corpora.h"' '#include "eval/compress/selection.h"'
plant eval/compress/co.cc '#include "worker/engine/transformer.h"' '#include "worker/calibration/trials.h"'
plant eval/d.cc '#include "worker/calibration/calibration_run.h"' '#include "worker/data/corpora.h"'
plant worker/engine/open_engine.cc '#include "worker/tokenizer/tokenizer.h"' '#include "worker/data/corpora.h"'
plant worker/service/ws.cc '#include "proto/client_channel.h"' '#include "scheduler/core/scheduler.h"'
plant scheduler/core/b.cc '#include "grpcpp/grpcpp.h"' '#include "store/store.h"' '#include "worker/engine/transformer.h"'
plant scheduler/rollout/ro.cc '#include "store/store.h"' '#include "ripplekv/v1/rollout.pb.h"' '#include "scheduler/core/scheduler.h"'
plant scheduler/service/c.cc '#include "grpcpp/grpcpp.h"' '#include "scheduler/core/scheduler.h"' '#include "worker/service/task_runner.h"'
plant agent/ag.cc '#include <grpcpp/grpcpp.h>' '#include "store/store.h"'
plant cli/cl.cc '#include "store/store.h"' 'void h() { memcpy(a, b, 4); }'
# Across the board: <> includes of gRPC, memory moves, headers of tests/.
plant store/rpc.h '#include <grpcpp/grpcpp.h>'
plant store/legacy/lg.cc '#include <google/protobuf/message.h>' '#include "ripplekv/v1/rollout.pb.h"'
plant store/mv.cc '// memmove( in a comment is fine' 'void m() { std::memmove(a, b, 4); }'
plant telemetry/tt.h '#include "tests/common/fixtures.h"'
plant worker/engine/f.cc '// std::memcpy( in a comment is fine' 'void f() { std::memcpy(a, b, 4); }'
# Allowed: kernels/ copies memory; tests/ and bench/ may do anything; build trees and hidden
# folders are not the project's sources.
plant kernels/ops/g.cc 'void g() { std::memcpy(a, b, 4); }'
plant tests/t.cc '#include <grpcpp/grpcpp.h>' '#include "store/store.h"' 'void t() { memset(a, 0, 4); }'
plant bench/be.cc '#include "grpcpp/grpcpp.h"' '#include "worker/engine/transformer.h"' 'void b() { memcpy(a, b, 4); }'
plant build-x/CMakeCache.txt '# a CMake build tree'
plant build-x/gen/x.cc '#include "worker/engine/transformer.h"' '#include <grpcpp/grpcpp.h>'
plant .cache/y.cc '#include "worker/engine/transformer.h"'
# Sources in folders no rule governs: a new top-level folder, a new part of worker/, the root.
plant newpart/n.cc '#include "base/status.h"'
plant worker/extra/x.h '// new'
plant stray.cc '// new'

if out="$("$root/scripts/check-layout" "$tree" 2>&1)"; then
  echo "FAIL: check-layout passed a tree with violations"; exit 1
fi
expected=("base/kb.h:2: includes kernels/tensor/tensor.h"
          "kernels/tensor/kt.h:2: includes kernels/ops/gather.h"
          "kernels/ops/ko.cc:2: includes method/apportion.h"
          "telemetry/te.cc:2: includes method/profile.h"
          "method/a.h:1: includes worker/engine/transformer.h"
          "store/st.cc:2: includes scheduler/core/scheduler.h"
          "proto/client_channel.cc:2: includes method/profile.h"
          "proto/budget_params.cc:2: includes store/store.h"
          "proto/calibration_params.cc:2: includes worker/calibration/calibration_run.h"
          "proto/profile.cc:2: includes scheduler/core/scheduler.h"
          "worker/model/mo.cc:2: includes method/profile.h"
          "worker/tokenizer/e.cc:2: includes worker/model/model_loader.h"
          "worker/engine/en.cc:2: includes worker/tokenizer/bpe.h"
          "worker/data/da.cc:2: includes worker/engine/transformer.h"
          "worker/calibration/ca.cc:2: includes eval/compress/selection.h"
          "eval/compress/co.cc:2: includes worker/calibration/trials.h"
          "eval/d.cc:1: includes worker/calibration/calibration_run.h"
          "worker/engine/open_engine.cc:2: includes worker/data/corpora.h"
          "scheduler/rollout/ro.cc:2: includes ripplekv/v1/rollout.pb.h"
          "scheduler/rollout/ro.cc:3: includes scheduler/core/scheduler.h"
          "worker/service/ws.cc:2: includes scheduler/core/scheduler.h"
          "scheduler/core/b.cc:1: includes grpcpp/grpcpp.h"
          "scheduler/core/b.cc:3: includes worker/engine/transformer.h"
          "scheduler/service/c.cc:3: includes worker/service/task_runner.h"
          "agent/ag.cc:2: includes store/store.h"
          "cli/cl.cc:2: calls memcpy"
          "store/rpc.h:1: includes grpcpp/grpcpp.h"
          "store/legacy/lg.cc:2: includes ripplekv/v1/rollout.pb.h"
          "store/mv.cc:2: calls memmove"
          "telemetry/tt.h:1: includes tests/common/fixtures.h"
          "worker/engine/f.cc:2: calls memcpy"
          "newpart/n.cc: folder newpart/ holds sources but has no rule in docs/DESIGN.md"
          "worker/extra/x.h: folder worker/extra/ holds sources but has no rule in docs/DESIGN.md"
          "stray.cc: folder ./ holds sources but has no rule in docs/DESIGN.md"
          "check-layout: 34 violation(s)")
for line in "${expected[@]}"; do
  grep -qF "$line" <<< "$out" || { echo "FAIL: missing \"$line\" in:"; echo "$out"; exit 1; }
done

# A folder with a rule but no row in the table of docs/DESIGN.md §4.
rm -rf "$tree"/*
mkdir -p "$tree/docs" "$tree/telemetry"
grep -v '^| `telemetry/`' "$root/docs/DESIGN.md" > "$tree/docs/DESIGN.md"
if out="$("$root/scripts/check-layout" "$tree" 2>&1)"; then
  echo "FAIL: check-layout passed rules without their rows in docs/DESIGN.md"; exit 1
fi
for line in "telemetry/ has a rule here but no row in the table of docs/DESIGN.md §4" \
            "check-layout: 1 violation(s)"; do
  grep -qF "$line" <<< "$out" || { echo "FAIL: missing \"$line\" in:"; echo "$out"; exit 1; }
done

"$root/scripts/check-layout" "$root"
echo "check-layout: 34 of 34 planted violations found (every governed folder), the table's rows" \
     "checked, repository clean"
