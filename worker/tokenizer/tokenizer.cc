#include "worker/tokenizer/tokenizer.h"

#include <utility>

#include "worker/tokenizer/bpe_encoder.h"
#include "worker/tokenizer/spm_encoder.h"
#include "worker/tokenizer/strings.h"
#include "worker/tokenizer/text_encoder.h"
#include "worker/tokenizer/vocab.h"

namespace ripplekv::worker {

using tokenizer_internal::Cat;

namespace {

class VocabTokenizer final : public Tokenizer {
 public:
  VocabTokenizer(Vocab vocab, VocabKind kind, bool add_space_prefix, std::string chat_template)
      : vocab_(std::move(vocab)),
        kind_(kind),
        add_space_prefix_(add_space_prefix),
        chat_template_(std::move(chat_template)) {}
  VocabTokenizer(const VocabTokenizer&) = delete;  // encoder_ points into vocab_
  VocabTokenizer& operator=(const VocabTokenizer&) = delete;

  const Vocab* vocab() const { return &vocab_; }
  void set_encoder(std::unique_ptr<TextEncoder> encoder) { encoder_ = std::move(encoder); }

  std::string TokenToPiece(int32_t id) const override {
    return vocab_.Contains(id) ? vocab_.piece(id) : std::string();
  }
  int32_t bos_id() const override { return vocab_.bos_id(); }
  int32_t eos_id() const override { return vocab_.eos_id(); }
  bool add_bos() const override { return vocab_.add_bos(); }
  bool add_eos() const override { return vocab_.add_eos(); }
  int vocab_size() const override { return vocab_.size(); }
  bool IsEog(int32_t id) const override { return vocab_.IsEog(id); }
  const std::string& chat_template() const override { return chat_template_; }

 private:
  std::vector<int32_t> DoEncode(std::string_view text,
                                const EncodeOptions& options) const override {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    const bool add_special = options.add_special;
    if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos_id());
    bool after_special = true;
    for (const Vocab::Fragment& f : vocab_.PartitionSpecial(text, options.parse_special)) {
      if (f.token >= 0) {
        out.push_back(f.token);
        after_special = true;
      } else {
        encoder_->Encode(text.substr(f.begin, f.end - f.begin), after_special, &out);
        after_special = false;
      }
    }
    if (add_special && vocab_.add_eos()) out.push_back(vocab_.eos_id());
    return out;
  }

  std::string DoDecode(std::span<const int32_t> ids, const DecodeOptions& options) const override {
    std::string out;
    // SentencePiece: Encode put a space before raw text at the start and after special tokens.
    bool strip_space = kind_ == VocabKind::kSentencePiece && add_space_prefix_;
    const bool spm_prefix = strip_space;
    for (int32_t id : ids) {
      if (!vocab_.Contains(id)) continue;
      const uint32_t attr = vocab_.attr(id);
      const bool special = (attr & (kAttrControl | kAttrUnknown)) != 0;
      if (!(options.skip_special && special)) {
        std::string_view piece = vocab_.piece(id);
        if (strip_space && (attr & kAttrNormal) && !piece.empty() && piece[0] == ' ' &&
            (attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) == 0) {
          piece.remove_prefix(1);
        }
        out.append(piece);
      }
      strip_space = spm_prefix && (attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) != 0;
    }
    return out;
  }

  Vocab vocab_;
  VocabKind kind_;
  bool add_space_prefix_;
  std::string chat_template_;
  std::unique_ptr<TextEncoder> encoder_;
};

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> CreateTokenizer(TokenizerSpec spec) {
  VocabKind kind;
  if (spec.model == "gpt2") {
    kind = VocabKind::kByteLevelBpe;
  } else if (spec.model == "llama") {
    kind = VocabKind::kSentencePiece;
  } else {
    return absl::InvalidArgumentError(
        Cat("tokenizer model '", spec.model, "' is not supported (supported: gpt2, llama)"));
  }
  ASSIGN_OR_RETURN(Vocab vocab, Vocab::Create(spec, kind));
  auto tokenizer = std::make_unique<VocabTokenizer>(std::move(vocab), kind, spec.add_space_prefix,
                                                    std::move(spec.chat_template));
  if (kind == VocabKind::kByteLevelBpe) {
    ASSIGN_OR_RETURN(std::unique_ptr<BpeEncoder> encoder,
                     BpeEncoder::Create(tokenizer->vocab(), spec));
    tokenizer->set_encoder(std::move(encoder));
  } else {
    tokenizer->set_encoder(
        std::make_unique<SpmEncoder>(tokenizer->vocab(), spec.add_space_prefix, spec.unk_id));
  }
  return tokenizer;
}

}  // namespace ripplekv::worker
