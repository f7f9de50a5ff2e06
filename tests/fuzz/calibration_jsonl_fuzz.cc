// libFuzzer target for calibration data (worker/data/calibration_data.h): JSONL files and
// plain text, tokenized by a tiny byte-level tokenizer. Any bytes must give a Status or a set of
// exactly DataOptions::samples samples of exactly C context and W probe tokens, each a valid id;
// the same bytes must give the same set again. A broken property traps.
//
// Input: byte 0 chooses the path (bit 0: JSONL from a file, checked against the same bytes in
// memory, else plain text; bit 1: plain text through a file rather than in memory; bit 2: strict),
// the rest is the data. The file is one scratch file per process, rewritten every run.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "tests/fuzz/scratch_file.h"
#include "tests/worker/tokenizer/test_vocab.h"
#include "worker/data/calibration_data.h"
#include "worker/tokenizer/tokenizer.h"

namespace {

using ripplekv::worker::CalibrationSet;
using ripplekv::worker::DataFormat;
using ripplekv::worker::DataOptions;
using ripplekv::worker::Tokenizer;

void Require(bool property) {
  if (!property) __builtin_trap();
}

// 256 byte tokens, a few merges and one user-defined token (always matched in raw text).
const Tokenizer& TinyTokenizer() {
  static const Tokenizer* const tokenizer = [] {
    ripplekv::worker::TokenizerSpec spec = ripplekv::worker::testing::ByteLevelSpec(
        {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"a", "b"}, {"\n", "\n"}, {"1", "2"}});
    ripplekv::worker::testing::AddToken(&spec, "<tool>", ripplekv::worker::TokenType::kUserDefined);
    auto created = ripplekv::worker::CreateTokenizer(std::move(spec));
    if (!created.ok()) std::abort();
    return created->release();
  }();
  return *tokenizer;
}

void CheckSet(const CalibrationSet& set, const DataOptions& options, const Tokenizer& tokenizer) {
  Require(static_cast<int>(set.samples.size()) == options.samples);
  for (size_t k = 0; k < set.samples.size(); ++k) {
    const auto& s = set.samples[k];
    Require(s.index == static_cast<int>(k));
    Require(static_cast<int>(s.context.size()) == options.context_len);
    Require(static_cast<int>(s.probe.size()) == options.probe_len);
    for (int32_t id : s.context) Require(id >= 0 && id < tokenizer.vocab_size());
    for (int32_t id : s.probe) Require(id >= 0 && id < tokenizer.vocab_size());
    Require(!s.source.empty());
  }
  Require(!options.strict || set.skipped.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const Tokenizer& tokenizer = TinyTokenizer();

  DataOptions options;
  options.samples = 2;
  options.context_len = 4;
  options.probe_len = 2;
  options.strict = (mode & 4) != 0;

  static ripplekv::fuzz::ScratchFile* const file = new ripplekv::fuzz::ScratchFile();
  auto load = [&]() -> ripplekv::StatusOr<CalibrationSet> {
    if (mode & 1) {
      options.format = DataFormat::kJsonl;
      return ripplekv::worker::LoadCalibrationData(file->path(), tokenizer, options);
    }
    if (mode & 2) {
      options.format = DataFormat::kText;
      return ripplekv::worker::LoadCalibrationData(file->path(), tokenizer, options);
    }
    return ripplekv::worker::CalibrationDataFromText(body, "fuzz.txt", tokenizer, options);
  };
  if (mode & 3) file->Write(body);

  auto set = load();
  if (mode & 1) {
    // JSONL from a file is the file's bytes through the in-memory parser: same outcome.
    auto in_memory =
        ripplekv::worker::CalibrationDataFromJsonl(body, file->path(), tokenizer, options);
    Require(in_memory.ok() == set.ok());
    Require(in_memory.ok() || in_memory.status().code() == set.status().code());
    if (in_memory.ok()) {
      Require(in_memory->fingerprint == set->fingerprint);
      Require(in_memory->description == set->description);
      Require(in_memory->skipped.size() == set->skipped.size());
    }
  }
  if (!set.ok()) return 0;
  CheckSet(*set, options, tokenizer);

  // A pure function of the bytes, the tokenizer and the options.
  auto again = load();
  Require(again.ok());
  Require(again->fingerprint == set->fingerprint);
  Require(again->description == set->description);
  Require(again->skipped.size() == set->skipped.size());
  return 0;
}
