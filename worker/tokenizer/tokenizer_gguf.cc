// TokenizerFromGguf: tokenizer.ggml.* keys -> TokenizerSpec -> CreateTokenizer, and
// TokenizerFactsFromGguf: the few of those keys a description needs, read by the same code.
// Absent keys take llama.cpp's defaults (llama_vocab::impl::load):
//   model "llama": bos 1, eos 2, unk 0, add_bos true, add_space_prefix true;
//   model "gpt2":  bos 11, eos 11 (sic), add_bos as the pre-tokenizer type says (true for
//                  llama3), add_space_prefix false; a missing tokenizer.ggml.pre means "default";
// and a default id outside the vocabulary means none.

#include "worker/tokenizer/tokenizer_gguf.h"

#include <limits>
#include <memory>

#include "worker/tokenizer/pre_tokenizer.h"
#include "worker/tokenizer/strings.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {

using tokenizer_internal::Cat;

namespace {

Status Annotate(const GgufFile& file, std::string_view key, const Status& status) {
  return Status(status.code(), Cat(file.path(), ": ", key, ": ", status.message()));
}

// Reads an optional key: value, or `fallback` when the key is absent; other errors pass through.
template <typename T, typename Getter>
StatusOr<T> Optional(const GgufFile& file, std::string_view key, T fallback, Getter get) {
  StatusOr<T> value = get(key);
  if (value.ok()) return value;
  if (absl::IsNotFound(value.status())) return fallback;
  return Annotate(file, key, value.status());
}

StatusOr<int32_t> OptionalTokenId(const GgufFile& file, std::string_view key, int32_t fallback,
                                  size_t n_tokens) {
  if (fallback >= 0 && static_cast<size_t>(fallback) >= n_tokens) fallback = -1;
  ASSIGN_OR_RETURN(
      const int64_t id,
      Optional<int64_t>(file, key, fallback, [&](std::string_view k) { return file.GetInt(k); }));
  if (id < 0) return fallback;  // a negative id stored as "none"
  if (static_cast<uint64_t>(id) >= n_tokens) {
    return absl::InvalidArgumentError(
        Cat(file.path(), ": ", key, " = ", id, " is out of range for ", n_tokens, " tokens"));
  }
  return static_cast<int32_t>(id);
}

constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";

// The length of tokenizer.ggml.tokens, without copying its strings. Errors are
// GgufFile::GetStringArray's (missing key, not an array of strings), annotated with the key.
StatusOr<size_t> TokenCount(const GgufFile& file) {
  const GgufValue* value = file.Find(kTokensKey);
  if (value != nullptr && value->type == GgufValueType::kArray) {
    const GgufArray& array = *std::get<std::shared_ptr<GgufArray>>(value->value);
    if (array.element_type == GgufValueType::kString) return array.elements.size();
  }
  // Not an array of strings: the reader's own error, which it returns before copying anything.
  Status status = file.GetStringArray(kTokensKey).status();
  if (status.ok()) status = absl::InternalError("expected an error for a non-string array");
  return Annotate(file, kTokensKey, status);
}

// The keys both TokenizerFromGguf and TokenizerFactsFromGguf read, with their defaults and checks.
struct Header {
  std::string model;  // "gpt2" (byte-level BPE) or "llama" (SentencePiece-style)
  std::string pre;    // pre-tokenizer type for "gpt2" ("default" when absent); empty for "llama"
  size_t n_tokens = 0;
  TokenizerFacts facts;
  bool bpe() const { return model == "gpt2"; }
};

StatusOr<Header> ReadHeader(const GgufFile& file) {
  Header header;
  {
    StatusOr<std::string> model = file.GetString("tokenizer.ggml.model");
    if (!model.ok()) {
      return Annotate(file, "tokenizer.ggml.model",
                      absl::IsNotFound(model.status())
                          ? absl::InvalidArgumentError("missing: the file has no tokenizer")
                          : model.status());
    }
    if (*model != "gpt2" && *model != "llama") {
      return absl::UnimplementedError(Cat(file.path(), ": tokenizer.ggml.model '", *model,
                                          "' is not supported (supported: gpt2, llama)"));
    }
    header.model = *std::move(model);
  }
  const bool bpe = header.bpe();

  ASSIGN_OR_RETURN(header.n_tokens, TokenCount(file));
  const size_t n = header.n_tokens;
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(
        Cat(file.path(), ": ", kTokensKey, ": ", n, " tokens do not fit 32-bit ids"));
  }
  header.facts.vocab_size = static_cast<int32_t>(n);

  bool default_add_bos = !bpe;
  if (bpe) {
    ASSIGN_OR_RETURN(std::string pre,
                     Optional<std::string>(file, "tokenizer.ggml.pre", "default",
                                           [&](std::string_view k) { return file.GetString(k); }));
    if (pre.empty()) pre = "default";
    StatusOr<PreTokenizerType> type = LookupPreTokenizer(pre);
    if (!type.ok()) return Annotate(file, "tokenizer.ggml.pre", type.status());
    default_add_bos = type->add_bos;
    header.pre = std::move(pre);
  }

  ASSIGN_OR_RETURN(header.facts.bos_id,
                   OptionalTokenId(file, "tokenizer.ggml.bos_token_id", bpe ? 11 : 1, n));
  ASSIGN_OR_RETURN(header.facts.eos_id,
                   OptionalTokenId(file, "tokenizer.ggml.eos_token_id", bpe ? 11 : 2, n));
  ASSIGN_OR_RETURN(header.facts.add_bos,
                   Optional<bool>(file, "tokenizer.ggml.add_bos_token", default_add_bos,
                                  [&](std::string_view k) { return file.GetBool(k); }));
  return header;
}

}  // namespace

StatusOr<TokenizerFacts> TokenizerFactsFromGguf(const GgufFile& file) {
  ASSIGN_OR_RETURN(Header header, ReadHeader(file));
  return header.facts;
}

StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromGguf(const GgufFile& file) {
  auto get_string = [&](std::string_view k) { return file.GetString(k); };
  auto get_bool = [&](std::string_view k) { return file.GetBool(k); };

  ASSIGN_OR_RETURN(Header header, ReadHeader(file));
  const bool bpe = header.bpe();
  const size_t n = header.n_tokens;
  TokenizerSpec spec;
  spec.model = std::move(header.model);
  spec.pre = std::move(header.pre);
  spec.bos_id = header.facts.bos_id;
  spec.eos_id = header.facts.eos_id;
  spec.add_bos = header.facts.add_bos;
  {
    StatusOr<std::vector<std::string>> tokens = file.GetStringArray(kTokensKey);
    if (!tokens.ok()) return Annotate(file, kTokensKey, tokens.status());
    spec.tokens = *std::move(tokens);
  }

  {
    ASSIGN_OR_RETURN(
        const std::vector<double> scores,
        Optional<std::vector<double>>(file, "tokenizer.ggml.scores", {},
                                      [&](std::string_view k) { return file.GetFloatArray(k); }));
    spec.scores.assign(scores.begin(), scores.end());
  }
  {
    ASSIGN_OR_RETURN(
        const std::vector<int64_t> types,
        Optional<std::vector<int64_t>>(file, "tokenizer.ggml.token_type", {},
                                       [&](std::string_view k) { return file.GetIntArray(k); }));
    spec.token_types.reserve(types.size());
    for (int64_t t : types) {
      const bool fits =
          t >= std::numeric_limits<int32_t>::min() && t <= std::numeric_limits<int32_t>::max();
      spec.token_types.push_back(fits ? static_cast<int32_t>(t) : 0);
    }
  }

  if (bpe) {
    StatusOr<std::vector<std::string>> merges = file.GetStringArray("tokenizer.ggml.merges");
    if (!merges.ok()) return Annotate(file, "tokenizer.ggml.merges", merges.status());
    spec.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      // llama.cpp splits at the first space after the first byte (a side may start with one).
      const std::string& line = (*merges)[i];
      const size_t space = line.find(' ', 1);
      if (space == std::string::npos) {
        return absl::InvalidArgumentError(
            Cat(file.path(), ": tokenizer.ggml.merges[", i, "] = '", line, "' has no space"));
      }
      spec.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    }
  }

  ASSIGN_OR_RETURN(spec.eot_id, OptionalTokenId(file, "tokenizer.ggml.eot_token_id", -1, n));
  ASSIGN_OR_RETURN(spec.eom_id, OptionalTokenId(file, "tokenizer.ggml.eom_token_id", -1, n));
  ASSIGN_OR_RETURN(spec.unk_id,
                   OptionalTokenId(file, "tokenizer.ggml.unknown_token_id", bpe ? -1 : 0, n));
  ASSIGN_OR_RETURN(spec.pad_id, OptionalTokenId(file, "tokenizer.ggml.padding_token_id", -1, n));
  ASSIGN_OR_RETURN(spec.add_eos,
                   Optional<bool>(file, "tokenizer.ggml.add_eos_token", false, get_bool));
  ASSIGN_OR_RETURN(spec.add_space_prefix,
                   Optional<bool>(file, "tokenizer.ggml.add_space_prefix", !bpe, get_bool));
  ASSIGN_OR_RETURN(spec.chat_template,
                   Optional<std::string>(file, "tokenizer.chat_template", "", get_string));

  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = CreateTokenizer(std::move(spec));
  if (!tokenizer.ok()) {
    return Status(tokenizer.status().code(), Cat(file.path(), ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

}  // namespace ripplekv::worker
