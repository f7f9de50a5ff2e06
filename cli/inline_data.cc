#include "cli/inline_data.h"

#include <sys/stat.h>

#include <string>
#include <string_view>
#include <utility>

#include "cli/utf8.h"
#include "base/file_io.h"
#include "base/strings.h"
#include "worker/data/calibration_data.h"

namespace ripplekv::cli {
namespace {

constexpr std::string_view kElsewhere =
    "; put it in a data directory of the workers and pass --data-on-workers";

Status TooLarge(const std::string& path, uint64_t bytes, uint64_t max_bytes) {
  return absl::ResourceExhaustedError(Cat("--data ", path, ": ", bytes,
                                          " bytes, more than the scheduler's inline data limit of ",
                                          max_bytes, " bytes", kElsewhere));
}

bool Blank(std::string_view s) { return s.find_first_not_of(" \t\r\n\f\v") == s.npos; }

}  // namespace

StatusOr<InlineData> ReadInlineData(const std::string& path, uint64_t max_bytes) {
  StatusOr<std::string> bytes = ReadFileBounded(path, max_bytes);
  if (!bytes.ok()) {
    struct stat st = {};
    if (absl::IsResourceExhausted(bytes.status()) && ::stat(path.c_str(), &st) == 0) {
      return TooLarge(path, static_cast<uint64_t>(st.st_size), max_bytes);
    }
    return Status(bytes.status().code(), Cat("--data ", std::string(bytes.status().message())));
  }
  if (const size_t bad = FirstInvalidUtf8(*bytes); bad != std::string_view::npos) {
    return absl::InvalidArgumentError(Cat("--data ", path, ": byte ", bad,
                                          " is not valid UTF-8; inline data must be UTF-8",
                                          kElsewhere));
  }
  InlineData out;
  out.jsonl = worker::IsJsonlPath(path);
  if (!out.jsonl) {
    if (Blank(*bytes)) return absl::InvalidArgumentError(Cat("--data ", path, ": no text"));
    out.inline_bytes = bytes->size();
    out.text = *std::move(bytes);
    return out;
  }
  std::string_view rest = *bytes;
  bool any = false;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == rest.npos ? std::string_view() : rest.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    any = any || !Blank(line);
    out.inline_bytes += line.size() + 1;
    out.lines.emplace_back(line);
  }
  if (!any) return absl::InvalidArgumentError(Cat("--data ", path, ": no JSON lines"));
  if (out.inline_bytes > max_bytes) return TooLarge(path, out.inline_bytes, max_bytes);
  return out;
}

}  // namespace ripplekv::cli
