#pragma once
// The validated vocabulary shared by both tokenizer algorithms: token texts, attributes and
// scores, text -> id lookup, the special-token partition of raw text, end-of-generation ids and
// the rendered piece of every token. Built once by Vocab::Create; immutable and thread-safe.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "base/status.h"
#include "worker/tokenizer/strings.h"
#include "worker/tokenizer/tokenizer_spec.h"

namespace ripplekv::worker {

// Token attribute bits, as llama.cpp's llama_token_attr. A token may carry several (llama.cpp
// adds kAttrControl to end-of-turn tokens stored as normal ones).
enum TokenAttr : uint32_t {
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

enum class VocabKind {
  kByteLevelBpe,   // spec.model "gpt2"
  kSentencePiece,  // spec.model "llama"
};

class Vocab {
 public:
  // A piece of input text after special-token partition: either a special token or raw bytes.
  struct Fragment {
    int32_t token = -1;  // >= 0: this special token; -1: the raw bytes [begin, end) of the input
    size_t begin = 0;
    size_t end = 0;
  };

  // Validates the vocabulary part of `spec` (tokens, scores, token_types, special ids,
  // add_bos/add_eos) and derives attributes, EOG ids and pieces as llama.cpp's llama_vocab::load.
  // Errors: InvalidArgument naming the field and index.
  [[nodiscard]] static StatusOr<Vocab> Create(const TokenizerSpec& spec, VocabKind kind);

  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  bool Contains(int32_t id) const { return id >= 0 && id < size(); }
  const std::string& text(int32_t id) const { return texts_[id]; }
  uint32_t attr(int32_t id) const { return attrs_[id]; }
  float score(int32_t id) const { return scores_[id]; }
  // Rendered bytes of a token (llama.cpp token_to_piece with special = true).
  const std::string& piece(int32_t id) const { return pieces_[id]; }

  // Id of the token whose text is `text`, or -1.
  int32_t Find(std::string_view text) const {
    const auto it = text_to_id_.find(tokenizer_internal::ToAbsl(text));
    return it == text_to_id_.end() ? -1 : it->second;
  }
  // Token for one raw byte, or -1: "<0xNN>" (else the one-byte text) for SentencePiece, the
  // byte-level character for byte-level BPE.
  int32_t ByteToken(uint8_t byte) const { return byte_tokens_[byte]; }

  bool IsEog(int32_t id) const { return eog_ids_.contains(id); }

  // Cuts the special tokens out of `text`, longest token first, each token's occurrences left to
  // right (llama.cpp's tokenizer_st_partition). User-defined tokens are always cut; control and
  // unknown ones only with `parse_special`. Never returns empty raw fragments.
  std::vector<Fragment> PartitionSpecial(std::string_view text, bool parse_special) const;

  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }

 private:
  Vocab() = default;

  std::vector<std::string> texts_;
  std::vector<uint32_t> attrs_;
  std::vector<float> scores_;
  std::vector<std::string> pieces_;
  absl::flat_hash_map<std::string, int32_t> text_to_id_;
  std::vector<int32_t> special_tokens_;  // control/user-defined/unknown, longest text first
  absl::flat_hash_set<int32_t> eog_ids_;
  std::array<int32_t, 256> byte_tokens_{};
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
};

}  // namespace ripplekv::worker
