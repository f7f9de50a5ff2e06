#pragma once
// `ripplekv submit --data F`: the client reads F and sends its content inline in the job
// (docs/DATA.md, "Remote jobs"), so workers never open a path a client names. F is JSONL when
// worker::IsJsonlPath says so (".jsonl", ".ndjson", ".json", any case; the rule of
// DataFormat::kAuto), else plain text. Thread-safe; no state.

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace ripplekv::cli {

// The scheduler's limit on a job's inline data, bytes (32 MiB; kMaxInlineDataBytes of
// scheduler/service/convert.h, docs/API.md); a test keeps the two equal.
inline constexpr uint64_t kMaxInlineDataBytes = uint64_t{32} << 20;

struct InlineData {
  bool jsonl = false;
  std::string text;                // !jsonl: the file's bytes
  std::vector<std::string> lines;  // jsonl: the file's lines, without '\n' or a trailing '\r'
  // What the scheduler counts against its limit: the text's bytes, or each line's plus its '\n'.
  uint64_t inline_bytes = 0;
};

// Reads `path` for inline submission. Errors (each names the file): those of ReadFileBounded
// (NotFound, PermissionDenied, InvalidArgument for a directory, ...), ResourceExhausted when the
// file or its inline form exceeds `max_bytes` (stating both sizes), InvalidArgument for an empty
// file (or only blank lines, JSONL) and for bytes that are not UTF-8 (the offset named): the
// scheduler stores only UTF-8.
[[nodiscard]] StatusOr<InlineData> ReadInlineData(const std::string& path,
                                                  uint64_t max_bytes = kMaxInlineDataBytes);

}  // namespace ripplekv::cli
