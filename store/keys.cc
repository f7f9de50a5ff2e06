#include "store/keys.h"

#include "base/strings.h"

namespace ripplekv::store {
namespace {

constexpr size_t kJobKeyBytes = 8;
constexpr char kJobDataSuffix = 'd';
constexpr size_t kTaskKeyBytes = 16;
constexpr size_t kResultKeyBytes = 20;
constexpr size_t kVersionBytes = 4;
constexpr size_t kRolloutKeyBytes = 8;
constexpr uint64_t kSignBit = 1ull << 63;

void PutBe64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}
void PutBe32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}
uint64_t GetBe64(std::string_view in) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}
uint32_t GetBe32(std::string_view in) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

std::string Hex(std::string_view bytes) {
  constexpr size_t kMaxShown = 64;
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "0x";
  for (size_t i = 0; i < bytes.size() && i < kMaxShown; ++i) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  if (bytes.size() > kMaxShown) out += "...";
  return out;
}

bool Printable(std::string_view bytes, size_t max) {
  bool printable = !bytes.empty() && bytes.size() <= max;
  for (char c : bytes) printable = printable && c >= 0x20 && c < 0x7f;
  return printable;
}

std::string DescribeParsedKey(std::string_view cf, std::string_view key) {
  if (cf == kJobsCf) {
    if (auto id = ParseJobKey(key)) return Cat("job=", *id);
    if (auto id = ParseV1JobDataKey(key)) return Cat("job=", *id, " data");
  } else if (cf == kJobDataCf || cf == kActiveJobsCf) {
    if (auto id = ParseJobKey(key)) return Cat("job=", *id);
  } else if (cf == kFinishedJobsCf) {
    if (auto f = ParseFinishedJobKey(key))
      return Cat("finished_at_ms=", f->finished_at_ms, " job=", f->id);
  } else if (cf == kTasksCf) {
    if (auto t = ParseTaskKey(key))
      return Cat("job=", t->job, " sample=", t->sample, " layer=", t->layer);
  } else if (cf == kResultsCf) {
    if (auto r = ParseResultKey(key)) {
      return Cat("job=", r->job, " sample=", r->sample, " layer=", r->layer, " trial=", r->trial);
    }
  } else if (cf == kProfilesCf || cf == kBudgetMapsCf) {
    if (auto v = ParseVersionKey(key))
      return Cat("model_hash=", v->model_hash, " version=", v->version);
  } else if (cf == kRolloutsCf) {
    if (auto id = ParseRolloutKey(key)) return Cat("rollout=", *id);
  } else if (cf == kRolloutNodesCf) {
    if (auto n = ParseRolloutNodeKey(key))
      return Cat("rollout=", n->id, " node=", ShowNodeId(n->node_id));
  } else if (cf == kMetaCf) {
    if (auto d = ParseMapDigestKey(key)) {
      return Cat("'", kMapDigestPrefix, "' model_hash=", d->model_hash, " digest=", d->digest);
    }
    if (Printable(key, 300)) return Cat("'", key, "'");
  }
  return Hex(key);
}

}  // namespace

std::string JobKey(JobId id) {
  std::string out;
  out.reserve(kJobKeyBytes);
  PutBe64(&out, id);
  return out;
}

std::optional<JobId> ParseJobKey(std::string_view key) {
  if (key.size() != kJobKeyBytes) return std::nullopt;
  return GetBe64(key);
}

std::string V1JobDataKey(JobId id) { return JobKey(id) + kJobDataSuffix; }

std::optional<JobId> ParseV1JobDataKey(std::string_view key) {
  if (key.size() != kJobKeyBytes + 1 || key.back() != kJobDataSuffix) return std::nullopt;
  return GetBe64(key);
}

std::string FinishedJobKey(TimeMs finished_at_ms, JobId id) {
  std::string out;
  out.reserve(2 * kJobKeyBytes);
  PutBe64(&out, static_cast<uint64_t>(finished_at_ms) ^ kSignBit);
  PutBe64(&out, id);
  return out;
}

std::optional<FinishedJobKeyParts> ParseFinishedJobKey(std::string_view key) {
  if (key.size() != 2 * kJobKeyBytes) return std::nullopt;
  return FinishedJobKeyParts{.finished_at_ms = static_cast<TimeMs>(GetBe64(key) ^ kSignBit),
                             .id = GetBe64(key.substr(kJobKeyBytes))};
}

std::string TaskKeyBytes(const TaskKey& key) {
  std::string out;
  out.reserve(kTaskKeyBytes);
  PutBe64(&out, key.job);
  PutBe32(&out, key.sample);
  PutBe32(&out, key.layer);
  return out;
}

std::optional<TaskKey> ParseTaskKey(std::string_view key) {
  if (key.size() != kTaskKeyBytes) return std::nullopt;
  return TaskKey{
      .job = GetBe64(key), .sample = GetBe32(key.substr(8)), .layer = GetBe32(key.substr(12))};
}

std::string ResultKeyBytes(const TrialResult& result) {
  std::string out;
  out.reserve(kResultKeyBytes);
  PutBe64(&out, result.job);
  PutBe32(&out, result.sample);
  PutBe32(&out, result.layer);
  PutBe32(&out, result.trial);
  return out;
}

std::optional<TrialResult> ParseResultKey(std::string_view key) {
  if (key.size() != kResultKeyBytes) return std::nullopt;
  return TrialResult{.job = GetBe64(key),
                     .sample = GetBe32(key.substr(8)),
                     .layer = GetBe32(key.substr(12)),
                     .trial = GetBe32(key.substr(16))};
}

std::string VersionPrefix(std::string_view model_hash) {
  std::string out(model_hash);
  out.push_back('\0');
  return out;
}

std::string VersionKey(std::string_view model_hash, uint32_t version) {
  std::string out = VersionPrefix(model_hash);
  PutBe32(&out, version);
  return out;
}

std::optional<VersionKeyParts> ParseVersionKey(std::string_view key) {
  if (key.size() < kVersionBytes + 2) return std::nullopt;
  const std::string_view hash = key.substr(0, key.size() - kVersionBytes - 1);
  if (key[hash.size()] != '\0' || !ValidateModelHash(hash).ok()) return std::nullopt;
  return VersionKeyParts{.model_hash = std::string(hash),
                         .version = GetBe32(key.substr(key.size() - kVersionBytes))};
}

std::string MapDigestKey(std::string_view model_hash, std::string_view digest) {
  return Cat(kMapDigestPrefix, VersionPrefix(model_hash), digest);
}

std::optional<MapDigestKeyParts> ParseMapDigestKey(std::string_view key) {
  if (!key.starts_with(kMapDigestPrefix)) return std::nullopt;
  key.remove_prefix(kMapDigestPrefix.size());
  if (key.size() < kMapDigestChars + 2) return std::nullopt;
  const std::string_view hash = key.substr(0, key.size() - kMapDigestChars - 1);
  const std::string_view digest = key.substr(key.size() - kMapDigestChars);
  if (key[hash.size()] != '\0' || !ValidateModelHash(hash).ok() || !IsMapDigest(digest)) {
    return std::nullopt;
  }
  return MapDigestKeyParts{.model_hash = std::string(hash), .digest = std::string(digest)};
}

std::string MapDigestValue(uint32_t version) {
  std::string out;
  out.reserve(kVersionBytes);
  PutBe32(&out, version);
  return out;
}

std::optional<uint32_t> ParseMapDigestValue(std::string_view value) {
  if (value.size() != kVersionBytes) return std::nullopt;
  const uint32_t version = GetBe32(value);
  if (version == 0) return std::nullopt;
  return version;
}

std::string RolloutKey(uint64_t id) {
  std::string out;
  out.reserve(kRolloutKeyBytes);
  PutBe64(&out, id);
  return out;
}

std::optional<uint64_t> ParseRolloutKey(std::string_view key) {
  if (key.size() != kRolloutKeyBytes) return std::nullopt;
  const uint64_t id = GetBe64(key);
  if (id == 0) return std::nullopt;
  return id;
}

std::string RolloutNodeKey(uint64_t id, std::string_view node_id) {
  std::string out = RolloutKey(id);
  out.append(node_id);
  return out;
}

std::optional<RolloutNodeKeyParts> ParseRolloutNodeKey(std::string_view key) {
  if (key.size() <= kRolloutKeyBytes || key.size() > kRolloutKeyBytes + kMaxNodeIdBytes) {
    return std::nullopt;
  }
  std::optional<uint64_t> id = ParseRolloutKey(key.substr(0, kRolloutKeyBytes));
  if (!id) return std::nullopt;
  return RolloutNodeKeyParts{.id = *id, .node_id = std::string(key.substr(kRolloutKeyBytes))};
}

Status ValidateModelHash(std::string_view hash) {
  if (hash.empty()) return absl::InvalidArgumentError("model_hash is empty");
  if (hash.size() > kMaxModelHashBytes) {
    return absl::InvalidArgumentError(
        Cat("model_hash is ", hash.size(), " bytes; at most ", kMaxModelHashBytes, " allowed"));
  }
  if (hash.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        Cat("model_hash contains a NUL byte at offset ", hash.find('\0')));
  }
  return absl::OkStatus();
}

bool IsMapDigest(std::string_view digest) {
  if (digest.size() != kMapDigestChars) return false;
  for (char c : digest) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Status ValidateNodeId(std::string_view node_id) {
  if (node_id.empty()) return absl::InvalidArgumentError("node id is empty");
  if (node_id.size() > kMaxNodeIdBytes) {
    return absl::InvalidArgumentError(Cat("node id ", ShowNodeId(node_id), " is ", node_id.size(),
                                          " bytes; at most ", kMaxNodeIdBytes, " allowed"));
  }
  return absl::OkStatus();
}

std::string ShowNodeId(std::string_view node_id) {
  constexpr size_t kMaxShown = 64;
  if (Printable(node_id, kMaxShown)) return Cat("'", node_id, "'");
  if (Printable(node_id.substr(0, kMaxShown), kMaxShown)) {
    return Cat("'", node_id.substr(0, kMaxShown), "'...");
  }
  return Hex(node_id);
}

std::string DescribeKey(std::string_view cf, std::string_view key) {
  return Cat("column family '", cf, "', key ", DescribeParsedKey(cf, key));
}

}  // namespace ripplekv::store
