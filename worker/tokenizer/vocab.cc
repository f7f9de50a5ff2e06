#include "worker/tokenizer/vocab.h"

#include <algorithm>
#include <limits>
#include <span>

#include "fmt/format.h"
#include "worker/tokenizer/strings.h"
#include "worker/tokenizer/utf8.h"

namespace ripplekv::worker {

using tokenizer_internal::Append;
using tokenizer_internal::Cat;

namespace {

// Largest vocabulary we accept; far above any real model (Gemma: 262k).
constexpr size_t kMaxVocabSize = size_t{1} << 24;

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

uint32_t AttrFromType(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kNormal:
      return kAttrNormal;
    case TokenType::kUnknown:
      return kAttrUnknown;
    case TokenType::kControl:
      return kAttrControl;
    case TokenType::kUserDefined:
      return kAttrUserDefined;
    case TokenType::kUnused:
      return kAttrUnused;
    case TokenType::kByte:
      return kAttrByte;
    case TokenType::kUndefined:
      break;
  }
  return 0;  // undefined (llama.cpp maps unknown type numbers there too)
}

// Value of the two hex digits at text[3..4] of "<0xNN>", read as llama.cpp's strtol does
// (stops at the first non-hex character).
uint8_t ByteOfByteToken(std::string_view text) {
  uint32_t value = 0;
  for (size_t i = 3; i < 5 && i < text.size(); ++i) {
    const char c = text[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      break;
    }
    value = value * 16 + digit;
  }
  return static_cast<uint8_t>(value);
}

// Inverse of the GPT-2 byte mapping for a whole token text (llama.cpp's llama_decode_text).
std::string DecodeByteLevel(std::string_view text) {
  std::string out;
  for (uint32_t cpt : DecodeUtf8Lenient(text)) {
    const int byte = UnicodeToByte(cpt);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    std::string utf8;
    AppendUtf8(cpt, &utf8);
    Append(&out, "[UNK_BYTE_0x");
    for (unsigned char c : utf8) Append(&out, fmt::format("{:02x}", c));
    Append(&out, text, "]");
  }
  return out;
}

std::string UnescapeSpmSpaces(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
      out.push_back(' ');
      i += kSpmSpace.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

bool TextIsOneOf(std::string_view text, std::span<const std::string_view> list) {
  return std::find(list.begin(), list.end(), text) != list.end();
}

// Texts llama.cpp recognises when the GGUF does not name the token (llama-vocab.cpp).
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",        "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",   "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>"};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPreTexts[] = {"<|fim_prefix|>",  "<fim-prefix>", "<fim_prefix>",
                                             "<｜fim▁begin｜>", "<PRE>",        "▁<PRE>",
                                             "<|code_prefix|>", "<|prefix|>"};
constexpr std::string_view kFimSufTexts[] = {"<|fim_suffix|>",  "<fim-suffix>", "<fim_suffix>",
                                             "<｜fim▁hole｜>",  "<SUF>",        "▁<SUF>",
                                             "<|code_suffix|>", "<|suffix|>"};
constexpr std::string_view kFimMidTexts[] = {"<|fim_middle|>",  "<fim-middle>", "<fim_middle>",
                                             "<｜fim▁end｜>",   "<MID>",        "▁<MID>",
                                             "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                             "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                             "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
constexpr std::string_view kEogTexts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<|return|>",
                                          "<|call|>",
                                          "<|flush|>",
                                          "<|calls|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "</s>",
                                          "<|eom_id|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "[EOS]",
                                          "<|end_of_text|>",
                                          "<end_of_utterance>",
                                          "<eos>",
                                          "<turn|>",
                                          "<|tool_response>",
                                          "<｜end▁of▁sentence｜>",
                                          "[e~["};
constexpr std::string_view kAlwaysRenderedTexts[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                     "<|constrain|>"};

}  // namespace

StatusOr<Vocab> Vocab::Create(const TokenizerSpec& spec, VocabKind kind) {
  const size_t n = spec.tokens.size();
  if (n == 0) return absl::InvalidArgumentError("tokenizer vocabulary is empty");
  if (n > kMaxVocabSize) {
    return absl::InvalidArgumentError(
        Cat("tokenizer vocabulary has ", n, " tokens; at most ", kMaxVocabSize));
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return absl::InvalidArgumentError(
        Cat("tokenizer scores: ", spec.scores.size(), " values for ", n, " tokens"));
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return absl::InvalidArgumentError(
        Cat("tokenizer token_types: ", spec.token_types.size(), " values for ", n, " tokens"));
  }

  Vocab v;
  v.texts_.reserve(n);
  v.attrs_.resize(n);
  v.scores_.assign(n, 0.0f);
  v.text_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    // llama.cpp renames empty tokens so that none matches the empty string.
    std::string text = spec.tokens[i].empty() ? Cat("[EMPTY_", i, "]") : spec.tokens[i];
    const auto [it, inserted] = v.text_to_id_.emplace(text, id);
    if (!inserted) {
      return absl::InvalidArgumentError(
          Cat("tokenizer tokens: duplicate token '", text, "' at ids ", it->second, " and ", i));
    }
    v.texts_.push_back(std::move(text));
    v.attrs_[i] = spec.token_types.empty() ? kAttrNormal : AttrFromType(spec.token_types[i]);
    if (!spec.scores.empty()) v.scores_[i] = spec.scores[i];
  }

  struct NamedId {
    const char* name;
    int32_t id;
  };
  for (const NamedId& s : {NamedId{"bos_id", spec.bos_id}, NamedId{"eos_id", spec.eos_id},
                           NamedId{"eot_id", spec.eot_id}, NamedId{"eom_id", spec.eom_id},
                           NamedId{"unk_id", spec.unk_id}, NamedId{"pad_id", spec.pad_id}}) {
    if (s.id < -1 || s.id >= static_cast<int64_t>(n)) {
      return absl::InvalidArgumentError(
          Cat("tokenizer ", s.name, " = ", s.id, " is out of range for ", n, " tokens"));
    }
  }
  if (spec.add_bos && spec.bos_id < 0) {
    return absl::InvalidArgumentError("tokenizer add_bos is set but there is no bos_id");
  }
  if (spec.add_eos && spec.eos_id < 0) {
    return absl::InvalidArgumentError("tokenizer add_eos is set but there is no eos_id");
  }
  v.bos_id_ = spec.bos_id;
  v.eos_id_ = spec.eos_id;
  v.add_bos_ = spec.add_bos;
  v.add_eos_ = spec.add_eos;

  // Special ids found by text, as llama.cpp does for GGUFs that do not name them. Where llama.cpp
  // takes the first match in hash order we take the lowest id; this only picks which token is
  // "the" EOT, and every match is an EOG token either way.
  auto mark_control = [&v](int32_t id) { v.attrs_[id] |= kAttrControl; };
  auto find_first = [&v, n](std::span<const std::string_view> texts) {
    for (size_t i = 0; i < n; ++i) {
      if (TextIsOneOf(v.texts_[i], texts)) return static_cast<int32_t>(i);
    }
    return int32_t{-1};
  };
  auto detect = [&](int32_t given, std::span<const std::string_view> texts) {
    if (given >= 0) return given;
    const int32_t found = find_first(texts);
    if (found >= 0) mark_control(found);
    return found;
  };
  const int32_t eot_id = detect(spec.eot_id, kEotTexts);
  const int32_t eom_id = detect(spec.eom_id, kEomTexts);
  detect(-1, kFimPreTexts);
  detect(-1, kFimSufTexts);
  detect(-1, kFimMidTexts);
  const int32_t fim_pad = detect(-1, kFimPadTexts);
  const int32_t fim_rep = detect(-1, kFimRepTexts);
  const int32_t fim_sep = detect(-1, kFimSepTexts);

  for (int32_t id : {fim_pad, fim_rep, fim_sep}) {
    if (id >= 0) v.eog_ids_.insert(id);
  }
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (TextIsOneOf(v.texts_[i], kEogTexts)) {
      v.eog_ids_.insert(id);
      mark_control(id);
    }
    // llama.cpp renders these gpt-oss markers always.
    if (TextIsOneOf(v.texts_[i], kAlwaysRenderedTexts)) {
      v.attrs_[i] = kAttrUserDefined;
    }
  }
  for (int32_t id : {spec.eos_id, eot_id, eom_id}) {
    if (id >= 0) v.eog_ids_.insert(id);
  }
  // gpt-oss / solar-open: <|end|> ends a message, not the generation.
  {
    bool has_return = false, has_call = false, has_flush = false;
    int32_t end_id = -1;
    for (int32_t id : v.eog_ids_) {
      const std::string& t = v.texts_[id];
      has_return |= t == "<|return|>";
      has_call |= t == "<|call|>" || t == "<|calls|>";
      has_flush |= t == "<|flush|>";
      if (t == "<|end|>") end_id = id;
    }
    if (end_id >= 0 && has_call && (has_return || has_flush)) {
      v.eog_ids_.erase(end_id);
      v.attrs_[end_id] = kAttrUserDefined;
    }
  }
  // gemma4 / paddleocr: </s> is not an end of generation when <|tool_response> exists.
  {
    bool has_tool_response = false;
    int32_t s_id = -1;
    for (int32_t id : v.eog_ids_) {
      if (v.texts_[id] == "<|tool_response>") has_tool_response = true;
      if (v.texts_[id] == "</s>") s_id = id;
    }
    if (has_tool_response && s_id >= 0) {
      v.eog_ids_.erase(s_id);
      v.attrs_[s_id] = kAttrNormal;
    }
  }

  for (size_t i = 0; i < n; ++i) {
    if (v.attrs_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      v.special_tokens_.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(v.special_tokens_.begin(), v.special_tokens_.end(),
                   [&v](int32_t a, int32_t b) { return v.texts_[a].size() > v.texts_[b].size(); });

  for (int b = 0; b < 256; ++b) {
    if (kind == VocabKind::kSentencePiece) {
      int32_t id = v.Find(fmt::format("<0x{:02X}>", b));
      if (id < 0) id = v.Find(std::string(1, static_cast<char>(b)));
      v.byte_tokens_[b] = id;
    } else {
      v.byte_tokens_[b] = v.Find(ByteToUnicode(static_cast<uint8_t>(b)));
    }
  }

  v.pieces_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t attr = v.attrs_[i];
    const std::string& text = v.texts_[i];
    if (attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
      v.pieces_[i] = text;
    } else if (attr & kAttrNormal) {
      v.pieces_[i] =
          kind == VocabKind::kSentencePiece ? UnescapeSpmSpaces(text) : DecodeByteLevel(text);
    } else if (attr & kAttrByte) {
      v.pieces_[i] = std::string(1, static_cast<char>(ByteOfByteToken(text)));
    }
  }
  return v;
}

std::vector<Vocab::Fragment> Vocab::PartitionSpecial(std::string_view text,
                                                     bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : special_tokens_) {
    if (!parse_special && (attrs_[id] & (kAttrControl | kAttrUnknown))) continue;
    const std::string& token = texts_[id];
    next.clear();
    bool changed = false;
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view window = text.substr(0, f.end);
      size_t pos = f.begin;
      for (size_t match = window.find(token, pos); match != std::string_view::npos;
           match = window.find(token, pos)) {
        if (match > pos) next.push_back({-1, pos, match});
        next.push_back({id, match, match + token.size()});
        pos = match + token.size();
        changed = true;
      }
      if (pos < f.end) next.push_back({-1, pos, f.end});
    }
    if (changed) fragments.swap(next);
  }
  return fragments;
}

}  // namespace ripplekv::worker
