// libFuzzer target for the values the scheduler's store reads back (store/codec.h) and the
// version-3 rollout values its migration reads (store/legacy/decode_v3_rollouts.h): a damaged or
// hostile value must give a Status (DataLoss naming the record), never a crash or a sanitizer
// report. The first byte picks the reader (job, rollout, rollout node, v3 rollout, v3 node); the
// rest is the value. A value that decodes must encode, and its encoding must decode and encode to
// the same bytes again (the codec is canonical). A broken property traps.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "store/codec.h"
#include "store/legacy/decode_v3_rollouts.h"

namespace {

namespace store = ripplekv::store;

void Require(bool property) {
  if (!property) __builtin_trap();
}

// decode(value) ok => encode ok, and decode(encode) re-encodes to the same bytes.
template <typename Decode, typename Encode>
void CheckCanonical(std::string_view value, Decode decode, Encode encode) {
  auto decoded = decode(value);
  if (!decoded.ok()) return;
  auto text = encode(*decoded);
  Require(text.ok());
  auto again = decode(*text);
  Require(again.ok());
  auto text_again = encode(*again);
  Require(text_again.ok() && *text_again == *text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view value(reinterpret_cast<const char*>(data) + 1, size - 1);
  constexpr store::JobId kJob = 7;
  constexpr uint64_t kRollout = 3;
  const std::string node = "node-1";
  auto decode_rollout = [&](std::string_view v) { return store::DecodeRollout(kRollout, v); };
  auto decode_node = [&](std::string_view v) { return store::DecodeRolloutNode(node, v); };
  switch (data[0] % 5) {
    case 0:
      CheckCanonical(
          value, [&](std::string_view v) { return store::DecodeJob(kJob, v); },
          [](const store::Job& job) { return store::EncodeJob(job); });
      break;
    case 1:
      CheckCanonical(value, decode_rollout, store::EncodeRollout);
      break;
    case 2:
      CheckCanonical(value, decode_node, store::EncodeRolloutNode);
      break;
    case 3: {
      // What the migration writes in place of a v3 value must be a value version 4 reads.
      auto migrated = store::DecodeV3Rollout(kRollout, value);
      if (migrated.ok()) {
        auto text = store::EncodeRollout(*migrated);
        if (text.ok()) CheckCanonical(*text, decode_rollout, store::EncodeRollout);
      }
      break;
    }
    case 4: {
      auto migrated = store::DecodeV3RolloutNode(node, value);
      if (migrated.ok()) {
        auto text = store::EncodeRolloutNode(*migrated);
        if (text.ok()) CheckCanonical(*text, decode_node, store::EncodeRolloutNode);
      }
      break;
    }
  }
  return 0;
}
