#include "eval/longbench.h"

#include <array>
#include <utility>

#include "base/file_io.h"
#include "base/strings.h"
#include "eval/prompt_format.h"
#include "method/jsonl.h"
#include "nlohmann/json.hpp"

namespace ripplekv::eval {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxJsonlFileBytes = uint64_t{1} << 30;      // bytes (1 GiB), read whole
constexpr uint64_t kMaxTemplateFileBytes = uint64_t{16} << 20;  // bytes (16 MiB), read whole
constexpr size_t kMaxLineBytes = size_t{64} << 20;
constexpr int kMaxNewTokensLimit = 65536;
constexpr int kUnknownDatasetMaxNewTokens = 64;

// LongBench eval.py dataset2metric, config/dataset2maxlen.json, the first-line list of eval.py
// and the no-chat list of pred.py.
constexpr std::array<LongBenchDataset, 21> kDatasets = {{
    {"narrativeqa", MetricKind::kQaF1, 128, false, true},
    {"qasper", MetricKind::kQaF1, 128, false, true},
    {"multifieldqa_en", MetricKind::kQaF1, 64, false, true},
    {"multifieldqa_zh", MetricKind::kQaF1Zh, 64, false, true},
    {"hotpotqa", MetricKind::kQaF1, 32, false, true},
    {"2wikimqa", MetricKind::kQaF1, 32, false, true},
    {"musique", MetricKind::kQaF1, 32, false, true},
    {"dureader", MetricKind::kRougeLZh, 128, false, true},
    {"gov_report", MetricKind::kRougeL, 512, false, true},
    {"qmsum", MetricKind::kRougeL, 512, false, true},
    {"multi_news", MetricKind::kRougeL, 512, false, true},
    {"vcsum", MetricKind::kRougeLZh, 512, false, true},
    {"trec", MetricKind::kClassification, 64, true, false},
    {"triviaqa", MetricKind::kQaF1, 32, true, false},
    {"samsum", MetricKind::kRougeL, 128, true, false},
    {"lsht", MetricKind::kClassification, 64, true, false},
    {"passage_retrieval_en", MetricKind::kRetrieval, 32, false, true},
    {"passage_count", MetricKind::kCount, 32, false, true},
    {"passage_retrieval_zh", MetricKind::kRetrievalZh, 32, false, true},
    {"lcc", MetricKind::kCodeSim, 64, false, false},
    {"repobench-p", MetricKind::kCodeSim, 64, false, false},
}};

// The whole file (at most `cap` bytes), with `what` before ReadFileBounded's messages.
StatusOr<std::string> ReadFileCapped(const std::string& path, uint64_t cap, std::string_view what) {
  StatusOr<std::string> bytes = ReadFileBounded(path, cap);
  if (!bytes.ok()) {
    return Status(bytes.status().code(), Cat(what, " ", std::string(bytes.status().message())));
  }
  return bytes;
}

// nlohmann throws on malformed input; converted here, at the edge.
StatusOr<Json> ParseJson(std::string_view text, std::string_view where) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(
        Cat(where, ": invalid JSON at byte ", e.byte, ": ", e.what()));
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(Cat(where, ": invalid JSON: ", e.what()));
  }
}

Status FieldError(std::string_view where, std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(Cat(where, ": field \"", field, "\" ", what));
}

StatusOr<std::string> StringField(const Json& obj, std::string_view where, const char* field) {
  const auto it = obj.find(field);
  if (it == obj.end()) return FieldError(where, field, "is missing");
  if (!it->is_string())
    return FieldError(where, field, Cat("must be a string, got ", it->type_name()));
  return it->get<std::string>();
}

// An array of strings; `null_ok`: null (or absent) gives an empty list.
StatusOr<std::vector<std::string>> StringArrayField(const Json& obj, std::string_view where,
                                                    const char* field, bool null_ok) {
  const auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) {
    if (null_ok) return std::vector<std::string>();
    return FieldError(where, field, it == obj.end() ? "is missing" : "is null");
  }
  if (!it->is_array()) {
    return FieldError(where, field, Cat("must be an array of strings, got ", it->type_name()));
  }
  std::vector<std::string> out;
  out.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& e = (*it)[i];
    if (!e.is_string()) {
      return FieldError(where, field, Cat("element ", i, " must be a string, got ", e.type_name()));
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

// The record of one JSONL line's object `j`. Errors name `where` ("file:line").
StatusOr<LongBenchRecord> RecordFromLine(const Json& j, const std::string& where) {
  LongBenchRecord r;
  r.source = where;
  ASSIGN_OR_RETURN(r.input, StringField(j, where, "input"));
  ASSIGN_OR_RETURN(r.context, StringField(j, where, "context"));
  ASSIGN_OR_RETURN(r.dataset, StringField(j, where, "dataset"));
  ASSIGN_OR_RETURN(r.answers, StringArrayField(j, where, "answers", /*null_ok=*/false));
  if (r.answers.empty()) return FieldError(where, "answers", "is empty");
  ASSIGN_OR_RETURN(r.all_classes, StringArrayField(j, where, "all_classes", /*null_ok=*/true));
  const LongBenchDataset* known = FindLongBenchDataset(r.dataset);
  if (known != nullptr && known->metric == MetricKind::kClassification && r.all_classes.empty()) {
    return FieldError(where, "all_classes",
                      Cat("must list the classes for classification dataset ", r.dataset));
  }
  if (const auto it = j.find("length"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) {
      return FieldError(where, "length", Cat("must be an integer, got ", it->type_name()));
    }
    if (it->is_number_unsigned()) {
      const uint64_t v = it->get<uint64_t>();
      if (v > static_cast<uint64_t>(INT64_MAX)) return FieldError(where, "length", "is too large");
      r.length = static_cast<int64_t>(v);
    } else {
      r.length = it->get<int64_t>();
      if (r.length < 0) return FieldError(where, "length", Cat("is negative (", r.length, ")"));
    }
  }
  if (const auto it = j.find("_id"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) {
      return FieldError(where, "_id", Cat("must be a string, got ", it->type_name()));
    }
    r.id = it->get<std::string>();
  }
  return r;
}

// Walks `text` as Python's str.format would with keyword fields context and input; appends to
// `out` when it is not null. Errors name the byte offset in the template.
Status FormatTemplate(std::string_view text, const LongBenchRecord* record, std::string* out) {
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {
      if (out != nullptr) out->push_back('{');
      i += 2;
    } else if (c == '}' && i + 1 < text.size() && text[i + 1] == '}') {
      if (out != nullptr) out->push_back('}');
      i += 2;
    } else if (c == '}') {
      return absl::InvalidArgumentError(Cat("template: single '}' at byte ", i));
    } else if (c == '{') {
      const size_t close = text.find_first_of("{}", i + 1);
      if (close == std::string_view::npos || text[close] != '}') {
        return absl::InvalidArgumentError(Cat("template: unclosed '{' at byte ", i));
      }
      const std::string_view field = text.substr(i + 1, close - i - 1);
      if (field != "context" && field != "input") {
        return absl::InvalidArgumentError(Cat("template: unknown placeholder {", field,
                                              "} at byte ", i, "; use {context} and {input}"));
      }
      if (out != nullptr && record != nullptr) {
        out->append(field == "context" ? record->context : record->input);
      }
      i = close + 1;
    } else {
      if (out != nullptr) out->push_back(c);
      ++i;
    }
  }
  return absl::OkStatus();
}

StatusOr<LongBenchTemplate> TemplateFromJson(const Json& value, std::string_view where) {
  LongBenchTemplate t;
  if (value.is_string()) {
    t.text = value.get<std::string>();
  } else if (value.is_object()) {
    for (const auto& [key, v] : value.items()) {
      if (key == "template") {
        if (!v.is_string())
          return FieldError(where, key, Cat("must be a string, got ", v.type_name()));
        t.text = v.get<std::string>();
      } else if (key == "max_new_tokens") {
        const bool in_range =
            v.is_number_unsigned()
                ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= kMaxNewTokensLimit
                : v.is_number_integer() && v.get<int64_t>() >= 1 &&
                      v.get<int64_t>() <= kMaxNewTokensLimit;
        if (!in_range) {
          return FieldError(where, key, Cat("must be an integer in 1..", kMaxNewTokensLimit));
        }
        t.max_new_tokens = static_cast<int>(v.get<int64_t>());
      } else if (key == "metric") {
        if (!v.is_string())
          return FieldError(where, key, Cat("must be a string, got ", v.type_name()));
        const std::optional<MetricKind> metric = ParseMetricKind(v.get<std::string>());
        if (!metric.has_value() || *metric == MetricKind::kFidelity) {
          return FieldError(where, key,
                            Cat("names no text metric: \"", v.get<std::string>(), "\""));
        }
        t.metric = metric;
      } else if (key == "chat" || key == "first_line") {
        if (!v.is_boolean())
          return FieldError(where, key, Cat("must be true or false, got ", v.type_name()));
        (key == "chat" ? t.chat : t.first_line) = v.get<bool>();
      } else {
        return FieldError(where, key,
                          "is not a template setting (template, max_new_tokens, "
                          "metric, chat, first_line)");
      }
    }
    if (!value.contains("template")) return FieldError(where, "template", "is missing");
  } else {
    return absl::InvalidArgumentError(
        Cat(where, ": must be a template string or an object, got ", value.type_name()));
  }
  if (Status s = FormatTemplate(t.text, nullptr, nullptr); !s.ok()) {
    return absl::InvalidArgumentError(Cat(where, ": ", std::string(s.message())));
  }
  return t;
}

}  // namespace

StatusOr<std::vector<LongBenchRecord>> ParseLongBenchJsonl(std::string_view bytes,
                                                           std::string_view source_name,
                                                           const LongBenchReadOptions& options) {
  if (options.max_records < 0) {
    return absl::InvalidArgumentError(Cat("max_records is negative (", options.max_records, ")"));
  }
  std::vector<LongBenchRecord> records;
  // Blank: only JSON whitespace (space, \t, \r, \n).
  RETURN_IF_ERROR(method::ForEachJsonlLine(
      bytes, source_name, {.max_line_bytes = kMaxLineBytes, .blank_chars = " \t\r\n"},
      [&](const method::JsonlLine& line) -> StatusOr<method::JsonlNext> {
        ASSIGN_OR_RETURN(LongBenchRecord record, RecordFromLine(line.value, line.where));
        records.push_back(std::move(record));
        return options.max_records > 0 &&
                       static_cast<int64_t>(records.size()) >= options.max_records
                   ? method::JsonlNext::kStop
                   : method::JsonlNext::kMore;
      }));
  if (records.empty()) {
    return absl::InvalidArgumentError(Cat("LongBench data ", source_name, ": no records"));
  }
  return records;
}

StatusOr<std::vector<LongBenchRecord>> ReadLongBenchJsonl(const std::string& path,
                                                          const LongBenchReadOptions& options) {
  ASSIGN_OR_RETURN(const std::string bytes,
                   ReadFileCapped(path, kMaxJsonlFileBytes, "LongBench data"));
  return ParseLongBenchJsonl(bytes, path, options);
}

const LongBenchDataset* FindLongBenchDataset(std::string_view name) {
  for (int pass = 0; pass < 2; ++pass) {
    for (const LongBenchDataset& d : kDatasets) {
      if (d.name == name) return &d;
    }
    if (!name.ends_with("_e")) break;
    name.remove_suffix(2);
  }
  return nullptr;
}

StatusOr<LongBenchTemplates> ParseLongBenchTemplates(std::string_view json,
                                                     std::string_view source_name) {
  ASSIGN_OR_RETURN(const Json j, ParseJson(json, source_name));
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        Cat(source_name, ": expected a JSON object of dataset templates, got ", j.type_name()));
  }
  LongBenchTemplates out;
  for (const auto& [dataset, value] : j.items()) {
    ASSIGN_OR_RETURN(LongBenchTemplate t,
                     TemplateFromJson(value, Cat(source_name, ": dataset \"", dataset, "\"")));
    out.emplace(dataset, std::move(t));
  }
  return out;
}

StatusOr<LongBenchTemplates> ReadLongBenchTemplates(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes,
                   ReadFileCapped(path, kMaxTemplateFileBytes, "LongBench templates"));
  return ParseLongBenchTemplates(bytes, path);
}

StatusOr<std::string> ExpandLongBenchTemplate(std::string_view text,
                                              const LongBenchRecord& record) {
  std::string out;
  out.reserve(text.size() + record.context.size() + record.input.size());
  RETURN_IF_ERROR(FormatTemplate(text, &record, &out));
  return out;
}

StatusOr<std::vector<EvalExample>> MakeLongBenchExamples(std::span<const LongBenchRecord> records,
                                                         const LongBenchTemplates& templates,
                                                         const worker::Tokenizer& tokenizer,
                                                         const LongBenchOptions& options) {
  if (options.max_prompt_tokens < 0 || options.max_per_dataset < 0) {
    return absl::InvalidArgumentError(Cat("LongBench options: max_prompt_tokens (",
                                          options.max_prompt_tokens, ") and max_per_dataset (",
                                          options.max_per_dataset, ") must be >= 0"));
  }
  ASSIGN_OR_RETURN(const PromptFrame plain, BuildPromptFrame(tokenizer, /*chat=*/false, {}));
  std::optional<PromptFrame> chat;
  std::map<std::string, int, std::less<>> taken;
  std::vector<EvalExample> out;
  for (const LongBenchRecord& r : records) {
    int& count = taken[r.dataset];
    if (options.max_per_dataset > 0 && count >= options.max_per_dataset) continue;
    ++count;
    const LongBenchDataset* known = FindLongBenchDataset(r.dataset);
    auto it = templates.find(r.dataset);
    if (it == templates.end()) it = templates.find("*");
    const LongBenchTemplate* t = it == templates.end() ? nullptr : &it->second;

    EvalExample ex;
    ex.task = r.dataset;
    ex.id = r.id.empty() ? r.source : r.id;
    ex.source = r.source;
    ex.answers = r.answers;
    ex.all_classes = r.all_classes;
    if (t != nullptr && t->metric.has_value()) {
      ex.metric = *t->metric;
    } else if (known != nullptr) {
      ex.metric = known->metric;
    } else {
      return absl::InvalidArgumentError(
          Cat(r.source, ": dataset \"", r.dataset,
              "\" is not a LongBench dataset; give its template a \"metric\""));
    }
    if (ex.metric == MetricKind::kClassification && ex.all_classes.empty()) {
      return FieldError(r.source, "all_classes", "is needed by the classification metric");
    }
    ex.max_new_tokens = t != nullptr && t->max_new_tokens.has_value() ? *t->max_new_tokens
                        : known != nullptr                            ? known->max_new_tokens
                                                                      : kUnknownDatasetMaxNewTokens;
    ex.first_line_only = t != nullptr && t->first_line.has_value() ? *t->first_line
                         : known != nullptr                        ? known->first_line_only
                                                                   : false;
    const bool use_chat = options.chat && (t != nullptr && t->chat.has_value() ? *t->chat
                                           : known != nullptr                  ? known->chat
                                                                               : true);
    StatusOr<std::string> text = ExpandLongBenchTemplate(
        t != nullptr ? std::string_view(t->text) : kDefaultLongBenchTemplate, r);
    if (!text.ok())
      return absl::InvalidArgumentError(Cat(r.source, ": ", std::string(text.status().message())));
    std::vector<int32_t> body =
        tokenizer.Encode(*text, {.add_special = false, .parse_special = false});
    const int64_t max = options.max_prompt_tokens;
    if (max > 0 && static_cast<int64_t>(body.size()) > max) {
      const int64_t half = max / 2;
      body.erase(body.begin() + half, body.end() - half);
    }
    if (use_chat && !chat.has_value()) {
      ASSIGN_OR_RETURN(chat, BuildPromptFrame(tokenizer, /*chat=*/true, {}));
    }
    ex.prompt = (use_chat ? *chat : plain).Wrap(body);
    out.push_back(std::move(ex));
  }
  return out;
}

}  // namespace ripplekv::eval
