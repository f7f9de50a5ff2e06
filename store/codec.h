#pragma once
// Value encoding of the store's records (docs/STORE.md): one compact JSON object per value with a
// format version "v". Fields that the key already holds (ids, sample, layer, trial, model hash,
// version) are not repeated in the value. Internal to store/.
//
// Decoding is strict: invalid JSON, another "v", a missing, mistyped, out-of-range or unknown
// field is DataLoss naming the field; the caller prefixes the column family and key. Doubles are
// written in the shortest form that reads back to the same bits.
//
// All functions are pure and thread-safe.

#include <string>
#include <string_view>

#include "base/status.h"
#include "store/keys.h"
#include "store/types.h"

namespace ripplekv::store {

// The value format version this code writes and reads.
inline constexpr int kValueFormatVersion = 1;

// Encoders fail only with InvalidArgument for a string field that is not valid UTF-8 (JSON text
// must be), naming the field and the byte offset.
// The job record holds every field but spec.data_inline, which has its own record (keys.h):
// EncodeJob ignores it and DecodeJob leaves it empty.
[[nodiscard]] StatusOr<std::string> EncodeJob(const Job& job);
[[nodiscard]] StatusOr<Job> DecodeJob(JobId id, std::string_view value);

[[nodiscard]] StatusOr<std::string> EncodeJobData(std::string_view data_inline);
[[nodiscard]] StatusOr<std::string> DecodeJobData(std::string_view value);

[[nodiscard]] StatusOr<std::string> EncodeTask(const Task& task);
[[nodiscard]] StatusOr<Task> DecodeTask(const TaskKey& key, std::string_view value);

std::string EncodeResultValue(double kl);
[[nodiscard]] StatusOr<double> DecodeResultValue(std::string_view value);

[[nodiscard]] StatusOr<std::string> EncodeProfile(const ProfileVersion& profile);
[[nodiscard]] StatusOr<ProfileVersion> DecodeProfile(const VersionKeyParts& key,
                                                     std::string_view value);

// The budget map record holds its digest, which DecodeBudgetMap checks against budget_json (a
// mismatch is DataLoss).
[[nodiscard]] StatusOr<std::string> EncodeBudgetMap(const BudgetMapRecord& map);
[[nodiscard]] StatusOr<BudgetMapRecord> DecodeBudgetMap(const VersionKeyParts& key,
                                                        std::string_view value);
// Schema version 2 only: a budget map record without "digest". The returned record's digest is
// computed from budget_json. Read by the migration to version 3.
[[nodiscard]] StatusOr<BudgetMapRecord> DecodeV2BudgetMap(const VersionKeyParts& key,
                                                          std::string_view value);

// Rollouts and their node records. The encoders also refuse (InvalidArgument) a rollout that
// breaks RolloutRecord's ranges (no stage, a stage without exactly one size, a stage index out of
// range, a negative soak, a timeout not > 0, a share outside (0, 1]); the decoder checks the same
// (DataLoss). Ids come from the key.
[[nodiscard]] StatusOr<std::string> EncodeRollout(const RolloutRecord& rollout);
[[nodiscard]] StatusOr<RolloutRecord> DecodeRollout(uint64_t id, std::string_view value);
[[nodiscard]] StatusOr<std::string> EncodeRolloutNode(const RolloutNodeRecord& node);
[[nodiscard]] StatusOr<RolloutNodeRecord> DecodeRolloutNode(std::string_view node_id,
                                                            std::string_view value);

// A budget map's content id (BudgetMapRecord::digest): the first kMapDigestChars lowercase hex
// digits of SHA-256(budget_json).
std::string BudgetMapDigest(std::string_view budget_json);

// InvalidArgument "<field> is not valid UTF-8 (byte offset N)" unless `text` is valid UTF-8.
[[nodiscard]] Status CheckUtf8(std::string_view text, std::string_view field);

// InvalidArgument "<field> is not a JSON document: <parser message>" unless `text` parses as
// one complete JSON value (which implies valid UTF-8).
[[nodiscard]] Status CheckJsonDocument(std::string_view text, std::string_view field);

}  // namespace ripplekv::store
