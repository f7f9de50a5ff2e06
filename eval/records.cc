#include "eval/records.h"

#include <cmath>
#include <limits>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

#include "base/file_io.h"
#include "base/strings.h"
#include "eval/example_lines.h"
#include "method/jsonl.h"
#include "nlohmann/json.hpp"

namespace ripplekv::eval {
namespace {

using Json = nlohmann::json;

Status FieldError(std::string_view where, std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(Cat(where, ": field \"", field, "\" ", what));
}

StatusOr<std::string> NonEmptyString(const Json& object, std::string_view where,
                                     const char* field) {
  const auto it = object.find(field);
  if (it == object.end()) return FieldError(where, field, "is missing");
  if (!it->is_string()) {
    return FieldError(where, field, Cat("must be a string, got ", it->type_name()));
  }
  std::string value = it->get<std::string>();
  if (value.empty()) return FieldError(where, field, "is empty");
  return value;
}

// The record of one line's object `j`. Errors name `where` ("file:line").
StatusOr<ScoreRecord> ParseRecord(const Json& j, std::string_view where) {
  ScoreRecord r;
  ASSIGN_OR_RETURN(r.method, NonEmptyString(j, where, "method"));
  ASSIGN_OR_RETURN(r.task, NonEmptyString(j, where, "task"));
  ASSIGN_OR_RETURN(r.example_id, NonEmptyString(j, where, "example"));
  const auto budget = j.find("budget");
  if (budget == j.end()) return FieldError(where, "budget", "is missing");
  if (!budget->is_number_integer()) {
    return FieldError(where, "budget", Cat("must be an integer, got ", budget->type_name()));
  }
  const bool in_range =
      budget->is_number_unsigned()
          ? budget->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int>::max())
          : budget->get<int64_t>() >= 0 &&
                budget->get<int64_t>() <= std::numeric_limits<int>::max();
  if (!in_range) return FieldError(where, "budget", Cat("is out of range: ", budget->dump()));
  r.budget = budget->get<int>();
  const auto score = j.find("score");
  if (score == j.end()) return FieldError(where, "score", "is missing");
  if (!score->is_number()) {
    return FieldError(where, "score", Cat("must be a number, got ", score->type_name()));
  }
  r.score = score->get<double>();
  if (!std::isfinite(r.score)) return FieldError(where, "score", "is not finite");
  return r;
}

}  // namespace

std::string RecordLine(const ScoreRecord& record, const EvalExample& example,
                       const std::string* prediction) {
  Json line = {{"method", record.method},
               {"budget", record.budget},
               {"task", record.task},
               {"example", record.example_id},
               {"score", record.score}};
  if (prediction != nullptr) line["prediction"] = *prediction;
  AddSplitAudit(example, line);  // for an audit of the split: the region and the text's tokens
  std::string text = line.dump(-1, ' ', false, Json::error_handler_t::replace);
  text += '\n';
  return text;
}

StatusOr<std::vector<ScoreRecord>> ReadRecordsFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFileBounded(path, kMaxRecordsFileBytes));
  std::vector<ScoreRecord> records;
  std::map<std::tuple<std::string, int, std::string, std::string>, int64_t> first_line;
  // Blank: only spaces and tabs; no line limit (the file cap bounds lines).
  RETURN_IF_ERROR(method::ForEachJsonlLine(
      bytes, path, {.blank_chars = " \t"},
      [&](const method::JsonlLine& line) -> StatusOr<method::JsonlNext> {
        ASSIGN_OR_RETURN(ScoreRecord r, ParseRecord(line.value, line.where));
        const auto [it, inserted] =
            first_line.try_emplace({r.method, r.budget, r.task, r.example_id}, line.number);
        if (!inserted) {
          return absl::InvalidArgumentError(
              Cat(line.where, ": field \"example\" repeats ", r.example_id, " of method ", r.method,
                  ", budget ", r.budget, ", task ", r.task, " (first at line ", it->second, ")"));
        }
        records.push_back(std::move(r));
        return method::JsonlNext::kMore;
      }));
  if (records.empty()) return absl::InvalidArgumentError(Cat(path, ": no records"));
  return records;
}

}  // namespace ripplekv::eval
