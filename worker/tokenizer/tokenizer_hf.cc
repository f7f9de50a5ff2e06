// TokenizerFromHfJson: Hugging Face tokenizer.json (+ tokenizer_config.json) -> TokenizerSpec.
// Only byte-level BPE is read. The pre-tokenizer steps become llama.cpp-style regexes applied in
// sequence: ByteLevel(use_regex) -> the GPT-2 regex, Split(regex, Isolated) -> that regex,
// Digits -> \p{N} (individual) or \p{N}+. Normalizers other than NFC are refused; NFC is ignored,
// as llama.cpp ignores it. BOS/EOS come from tokenizer_config.json (bos_token, add_bos_token, ...)
// or, when it does not say, from a TemplateProcessing post-processor that starts / ends with a
// special token.

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "base/file_io.h"
#include "nlohmann/json.hpp"
#include "worker/tokenizer/strings.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {

using tokenizer_internal::Cat;

namespace {

using Json = nlohmann::json;

// The largest tokenizer.json we parse: real ones are a few MiB (a 256k vocabulary ~ 20 MiB).
constexpr uint64_t kMaxJsonBytes = uint64_t{1} << 30;  // bytes (1 GiB)
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

// ByteLevel's own regex (tokenizers' pre_tokenizers/byte_level.rs).
constexpr std::string_view kByteLevelRegex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

Status Invalid(std::string_view path, std::string_view field, std::string_view problem) {
  return absl::InvalidArgumentError(Cat(path, ": ", field, ": ", problem));
}

StatusOr<Json> ReadJsonFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string content, ReadFileBounded(path, kMaxJsonBytes));
  try {
    return Json::parse(content);
  } catch (const Json::exception& e) {  // third-party throw, converted at the edge
    return absl::InvalidArgumentError(Cat(path, ": not valid JSON: ", e.what()));
  }
}

// Rewrites tokenizers' case-insensitive contraction group as llama.cpp's ASCII-only version, so
// that PCRE2's Unicode case folding (which would also match U+017F for 's') does not apply.
std::string AdaptRegex(std::string regex) {
  constexpr std::string_view kFrom = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
  constexpr std::string_view kTo = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
  for (size_t at = regex.find(kFrom); at != std::string::npos; at = regex.find(kFrom, at)) {
    regex.replace(at, kFrom.size(), kTo);
    at += kTo.size();
  }
  return regex;
}

// PCRE2 pattern matching `literal` as is.
std::string QuoteLiteral(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/").find(c) != std::string_view::npos)
      out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

struct PreTokenizerSteps {
  std::vector<std::string> regexes;
  bool byte_level = false;
};

Status ReadPreTokenizer(const Json& pt, std::string_view path, const std::string& field,
                        PreTokenizerSteps* steps) {
  if (!pt.is_object() || !pt.contains("type") || !pt["type"].is_string()) {
    return Invalid(path, field, "expected an object with a string \"type\"");
  }
  const std::string type = pt["type"].get<std::string>();
  if (type == "Sequence") {
    const auto it = pt.find("pretokenizers");
    if (it == pt.end() || !it->is_array()) return Invalid(path, field, "Sequence without array");
    for (size_t i = 0; i < it->size(); ++i) {
      RETURN_IF_ERROR(
          ReadPreTokenizer((*it)[i], path, Cat(field, ".pretokenizers[", i, "]"), steps));
    }
    return absl::OkStatus();
  }
  if (type == "ByteLevel") {
    if (pt.value("add_prefix_space", false)) {
      return absl::UnimplementedError(
          Cat(path, ": ", field, ": ByteLevel with add_prefix_space is not supported"));
    }
    steps->byte_level = true;
    if (pt.value("use_regex", true)) steps->regexes.emplace_back(kByteLevelRegex);
    return absl::OkStatus();
  }
  if (type == "Digits") {
    steps->regexes.emplace_back(pt.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+");
    return absl::OkStatus();
  }
  if (type == "Split") {
    const auto pattern = pt.find("pattern");
    if (pattern == pt.end() || !pattern->is_object()) {
      return Invalid(path, field, "Split without a pattern object");
    }
    std::string regex;
    if (pattern->contains("Regex") && (*pattern)["Regex"].is_string()) {
      regex = AdaptRegex((*pattern)["Regex"].get<std::string>());
    } else if (pattern->contains("String") && (*pattern)["String"].is_string()) {
      regex = QuoteLiteral((*pattern)["String"].get<std::string>());
    } else {
      return Invalid(path, field,
                     "Split pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
    }
    const std::string behavior = pt.contains("behavior") && pt["behavior"].is_string()
                                     ? pt["behavior"].get<std::string>()
                                     : "";
    if (behavior != "Isolated" || pt.value("invert", false)) {
      return absl::UnimplementedError(Cat(path, ": ", field, ": Split with behavior '", behavior,
                                          "' (or invert) is not supported; only Isolated"));
    }
    steps->regexes.push_back(std::move(regex));
    return absl::OkStatus();
  }
  return absl::UnimplementedError(
      Cat(path, ": ", field, ": pre-tokenizer type '", type, "' is not supported"));
}

// Text of a token given as "text" or {"content": "text"}; empty when null or absent.
StatusOr<std::string> TokenText(const Json& object, std::string_view key, std::string_view path) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return Invalid(path, key, "expected a string or {\"content\": string}");
}

// Special tokens a TemplateProcessing post-processor puts before / after a single sequence.
struct TemplateSpecials {
  std::string first;
  std::string last;
};

TemplateSpecials ReadTemplateSpecials(const Json& root) {
  TemplateSpecials out;
  const auto pp = root.find("post_processor");
  if (pp == root.end() || !pp->is_object()) return out;
  const Json* tp = nullptr;
  if (pp->value("type", "") == "TemplateProcessing") {
    tp = &*pp;
  } else if (pp->value("type", "") == "Sequence" && pp->contains("processors") &&
             (*pp)["processors"].is_array()) {
    for (const Json& p : (*pp)["processors"]) {
      if (p.is_object() && p.value("type", "") == "TemplateProcessing") tp = &p;
    }
  }
  if (tp == nullptr || !tp->contains("single") || !(*tp)["single"].is_array()) return out;
  const Json& single = (*tp)["single"];
  auto special_id = [](const Json& item) -> std::string {
    if (!item.is_object() || !item.contains("SpecialToken")) return {};
    const Json& st = item["SpecialToken"];
    return st.is_object() && st.contains("id") && st["id"].is_string() ? st["id"].get<std::string>()
                                                                       : std::string();
  };
  if (!single.empty()) {
    out.first = special_id(single.front());
    if (single.size() > 1) out.last = special_id(single.back());
  }
  return out;
}

StatusOr<TokenizerSpec> SpecFromJson(const Json& root, const std::string& path) {
  if (!root.is_object()) return Invalid(path, "(root)", "expected an object");
  const auto model_it = root.find("model");
  if (model_it == root.end() || !model_it->is_object()) {
    return Invalid(path, "model", "missing or not an object");
  }
  const Json& model = *model_it;
  const std::string type = model.contains("type") && model["type"].is_string()
                               ? model["type"].get<std::string>()
                               : "BPE";
  if (type != "BPE") {
    return absl::UnimplementedError(
        Cat(path, ": model.type '", type, "' is not supported; only BPE"));
  }
  if (model.value("byte_fallback", false)) {
    return absl::UnimplementedError(Cat(path, ": model.byte_fallback is not supported"));
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      return absl::UnimplementedError(Cat(path, ": model.", key, " is not supported"));
    }
  }

  // Normalizer: none, or NFC (ignored, as llama.cpp does).
  if (const auto norm = root.find("normalizer"); norm != root.end() && !norm->is_null()) {
    const std::string norm_type = norm->is_object() ? norm->value("type", "") : "";
    if (norm_type != "NFC") {
      return absl::UnimplementedError(Cat(path, ": normalizer '", norm_type, "' is not supported"));
    }
  }

  PreTokenizerSteps steps;
  {
    const auto pt = root.find("pre_tokenizer");
    if (pt == root.end() || pt->is_null()) {
      return absl::UnimplementedError(
          Cat(path, ": no pre_tokenizer; only byte-level BPE is supported"));
    }
    RETURN_IF_ERROR(ReadPreTokenizer(*pt, path, "pre_tokenizer", &steps));
    if (!steps.byte_level) {
      return absl::UnimplementedError(
          Cat(path, ": pre_tokenizer has no ByteLevel step; only byte-level BPE is supported"));
    }
  }

  // Vocabulary: model.vocab plus added_tokens; ids must form a range without many holes.
  std::vector<std::pair<std::string, int64_t>> entries;
  const auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object()) {
    return Invalid(path, "model.vocab", "missing or not an object");
  }
  for (const auto& [text, id] : vocab_it->items()) {
    if (!id.is_number_integer()) return Invalid(path, "model.vocab", "ids must be integers");
    entries.emplace_back(text, id.get<int64_t>());
  }
  struct Added {
    int64_t id;
    std::string content;
    bool special;
  };
  std::vector<Added> added;
  if (const auto at = root.find("added_tokens"); at != root.end() && !at->is_null()) {
    if (!at->is_array()) return Invalid(path, "added_tokens", "expected an array");
    for (size_t i = 0; i < at->size(); ++i) {
      const Json& t = (*at)[i];
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string()) {
        return Invalid(path, Cat("added_tokens[", i, "]"),
                       "expected {\"id\": integer, \"content\": string, ...}");
      }
      added.push_back(
          {t["id"].get<int64_t>(), t["content"].get<std::string>(), t.value("special", false)});
    }
  }
  int64_t max_id = -1;
  for (const auto& [text, id] : entries) max_id = std::max(max_id, id);
  for (const Added& a : added) max_id = std::max(max_id, a.id);
  const size_t defined = entries.size() + added.size();
  if (max_id < 0) return Invalid(path, "model.vocab", "empty vocabulary");
  if (max_id > kMaxTokenId || static_cast<size_t>(max_id) + 1 > 2 * defined) {
    return Invalid(path, "model.vocab",
                   Cat("token ids reach ", max_id, " for only ", defined, " tokens"));
  }

  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = "tokenizer.json";
  spec.pre_regexes = std::move(steps.regexes);
  spec.ignore_merges = model.value("ignore_merges", false);
  const size_t n = static_cast<size_t>(max_id) + 1;
  spec.tokens.assign(n, "");
  spec.token_types.assign(n, static_cast<int32_t>(TokenType::kUnused));
  std::vector<bool> set(n, false);
  for (const auto& [text, id] : entries) {
    if (id < 0) return Invalid(path, "model.vocab", Cat("negative id for '", text, "'"));
    if (set[id]) return Invalid(path, "model.vocab", Cat("id ", id, " used twice"));
    spec.tokens[id] = text;
    spec.token_types[id] = static_cast<int32_t>(TokenType::kNormal);
    set[id] = true;
  }
  for (const Added& a : added) {
    if (a.id < 0) return Invalid(path, "added_tokens", Cat("negative id ", a.id));
    if (set[a.id] && spec.tokens[a.id] != a.content) {
      return Invalid(
          path, "added_tokens",
          Cat("id ", a.id, " is '", a.content, "' but model.vocab has '", spec.tokens[a.id], "'"));
    }
    spec.tokens[a.id] = a.content;
    spec.token_types[a.id] =
        static_cast<int32_t>(a.special ? TokenType::kControl : TokenType::kUserDefined);
    set[a.id] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!set[i]) spec.tokens[i] = Cat("[PAD", i, "]");  // as convert_hf_to_gguf.py
  }

  const auto merges_it = model.find("merges");
  if (merges_it != model.end() && !merges_it->is_null()) {
    if (!merges_it->is_array()) return Invalid(path, "model.merges", "expected an array");
    spec.merges.reserve(merges_it->size());
    for (size_t i = 0; i < merges_it->size(); ++i) {
      const Json& m = (*merges_it)[i];
      if (m.is_string()) {
        const std::string line = m.get<std::string>();
        const size_t space = line.find(' ', 1);
        if (space == std::string::npos) {
          return Invalid(path, Cat("model.merges[", i, "]"), "no space in '" + line + "'");
        }
        spec.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        return Invalid(path, Cat("model.merges[", i, "]"), "expected \"a b\" or [\"a\", \"b\"]");
      }
    }
  }
  return spec;
}

// Applies tokenizer_config.json (bos/eos tokens, add flags, chat template) and the post-processor.
Status ApplyConfig(const Json& root, const Json* config, const std::string& config_path,
                   TokenizerSpec* spec) {
  absl::flat_hash_map<absl::string_view, int32_t> ids;
  for (size_t i = 0; i < spec->tokens.size(); ++i) {
    ids.emplace(tokenizer_internal::ToAbsl(spec->tokens[i]), static_cast<int32_t>(i));
  }
  auto find_id = [&](const std::string& text, std::string_view field) -> StatusOr<int32_t> {
    if (text.empty()) return -1;
    const auto it = ids.find(tokenizer_internal::ToAbsl(text));
    if (it == ids.end()) {
      return Invalid(config_path, field, Cat("'", text, "' is not a token"));
    }
    return it->second;
  };

  const TemplateSpecials specials = ReadTemplateSpecials(root);
  std::string bos_text, eos_text;
  if (config != nullptr) {
    if (!config->is_object()) return Invalid(config_path, "(root)", "expected an object");
    ASSIGN_OR_RETURN(bos_text, TokenText(*config, "bos_token", config_path));
    ASSIGN_OR_RETURN(eos_text, TokenText(*config, "eos_token", config_path));
  }
  if (bos_text.empty()) bos_text = specials.first;
  if (eos_text.empty()) eos_text = specials.last;
  ASSIGN_OR_RETURN(spec->bos_id, find_id(bos_text, "bos_token"));
  ASSIGN_OR_RETURN(spec->eos_id, find_id(eos_text, "eos_token"));

  auto flag = [&](const char* key, bool fallback) -> StatusOr<bool> {
    if (config == nullptr || !config->contains(key) || (*config)[key].is_null()) return fallback;
    if (!(*config)[key].is_boolean()) return Invalid(config_path, key, "expected a boolean");
    return (*config)[key].get<bool>();
  };
  ASSIGN_OR_RETURN(spec->add_bos,
                   flag("add_bos_token", !specials.first.empty() && specials.first == bos_text));
  ASSIGN_OR_RETURN(spec->add_eos,
                   flag("add_eos_token", !specials.last.empty() && specials.last == eos_text));

  if (config != nullptr && config->contains("chat_template")) {
    const Json& t = (*config)["chat_template"];
    if (t.is_string()) {
      spec->chat_template = t.get<std::string>();
    } else if (t.is_array()) {  // [{"name": ..., "template": ...}]: the "default" one
      for (const Json& named : t) {
        if (named.is_object() && named.value("name", "") == "default" &&
            named.contains("template") && named["template"].is_string()) {
          spec->chat_template = named["template"].get<std::string>();
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromHfJson(const std::string& tokenizer_json,
                                                         const std::string& tokenizer_config_json) {
  ASSIGN_OR_RETURN(const Json root, ReadJsonFile(tokenizer_json));
  std::optional<Json> config;
  if (!tokenizer_config_json.empty()) {
    StatusOr<Json> read = ReadJsonFile(tokenizer_config_json);
    if (read.ok()) {
      config = *std::move(read);
    } else if (!absl::IsNotFound(read.status())) {
      return read.status();
    }
  }
  try {  // nlohmann throws on type mismatches we did not foresee; report them as bad input
    ASSIGN_OR_RETURN(TokenizerSpec spec, SpecFromJson(root, tokenizer_json));
    RETURN_IF_ERROR(ApplyConfig(root, config ? &*config : nullptr, tokenizer_config_json, &spec));
    StatusOr<std::unique_ptr<Tokenizer>> tokenizer = CreateTokenizer(std::move(spec));
    if (!tokenizer.ok()) {
      return Status(tokenizer.status().code(),
                    Cat(tokenizer_json, ": ", tokenizer.status().message()));
    }
    return tokenizer;
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(Cat(tokenizer_json, ": ", e.what()));
  }
}

}  // namespace ripplekv::worker
