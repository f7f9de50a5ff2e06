#include "method/jsonl.h"

#include "base/strings.h"
#include "nlohmann/json.hpp"

namespace ripplekv::method {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kBom = "\xEF\xBB\xBF";

// nlohmann throws on malformed input; converted here, at the edge.
StatusOr<Json> ParseLine(std::string_view line, const std::string& where) {
  try {
    return Json::parse(line.begin(), line.end());
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(
        Cat(where, ": invalid JSON at byte ", e.byte, ": ", e.what()));
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(Cat(where, ": invalid JSON: ", e.what()));
  }
}

}  // namespace

Status ForEachJsonlLine(std::string_view text, std::string_view name, const JsonlOptions& options,
                        const std::function<StatusOr<JsonlNext>(const JsonlLine&)>& visit) {
  int64_t line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(pos, end - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_number;
    const std::string where = Cat(name, ":", line_number);
    if (options.max_line_bytes > 0 && line.size() > options.max_line_bytes) {
      return absl::InvalidArgumentError(
          Cat(where, ": line longer than ", options.max_line_bytes, " bytes"));
    }
    if (line_number == 1 && line.starts_with(kBom)) line.remove_prefix(kBom.size());
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.find_first_not_of(options.blank_chars) == std::string_view::npos) continue;
    ASSIGN_OR_RETURN(const Json value, ParseLine(line, where));
    if (!value.is_object()) {
      return absl::InvalidArgumentError(
          Cat(where, ": expected ", options.object_description, ", got ", value.type_name()));
    }
    ASSIGN_OR_RETURN(const JsonlNext next,
                     visit(JsonlLine{.number = line_number, .where = where, .value = value}));
    if (next == JsonlNext::kStop) break;
  }
  return absl::OkStatus();
}

}  // namespace ripplekv::method
