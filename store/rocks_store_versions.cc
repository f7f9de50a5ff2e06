// RocksStore: profile versions and budget maps, versioned per model hash and never overwritten,
// budget maps also content-addressed by their digest (see store/store.h for the contracts).

#include "base/strings.h"
#include "store/codec.h"
#include "store/keys.h"
#include "store/rocks_store.h"

namespace ripplekv::store {
namespace {

// The version after `latest`, or ResourceExhausted when the counter is spent.
StatusOr<uint32_t> NextVersion(uint32_t latest, std::string_view what,
                               std::string_view model_hash) {
  if (latest == UINT32_MAX) {
    return absl::ResourceExhaustedError(
        Cat("model hash ", model_hash, " has no ", what, " version number left"));
  }
  return latest + 1;
}

}  // namespace

StatusOr<uint32_t> RocksStore::LatestVersion(Cf cf, const std::string& model_hash) const {
  const std::string prefix = VersionPrefix(model_hash);
  const std::string last = VersionKey(model_hash, UINT32_MAX);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[cf]));
  it->SeekForPrev(rocksdb::Slice(last));
  if (it->Valid() && it->key().starts_with(rocksdb::Slice(prefix))) {
    const std::string_view key(it->key().data(), it->key().size());
    std::optional<VersionKeyParts> parts = ParseVersionKey(key);
    if (!parts || parts->model_hash != model_hash) {
      return Damaged(cf, key, absl::DataLossError("malformed key"));
    }
    return parts->version;
  }
  RETURN_IF_ERROR(FromRocks(it->status(), Cat("seeking in column family '", CfName(cf), "'")));
  return 0u;
}

StatusOr<ProfileVersion> RocksStore::PutProfileVersion(const std::string& model_hash,
                                                       const std::string& profile_json,
                                                       JobId job_id) {
  RETURN_IF_ERROR(ValidateModelHash(model_hash));
  RETURN_IF_ERROR(CheckJsonDocument(profile_json, "profile_json"));
  std::lock_guard<std::mutex> lock(write_mu_);
  rocksdb::WriteBatch batch;
  std::optional<Job> job;
  if (job_id != kNoJob) {
    ASSIGN_OR_RETURN(job, ReadJob(job_id));
    if (job->spec.model_hash != model_hash) {
      return absl::InvalidArgumentError(Cat("model hash ", model_hash, " is not job ", job_id,
                                            "'s model hash ", job->spec.model_hash));
    }
    if (job->state != JobState::kRunning) {
      return absl::FailedPreconditionError(
          Cat("job ", job_id, " is ", JobStateName(job->state), "; only a running job can finish"));
    }
    if (job->tasks_done != job->tasks_total) {
      return absl::FailedPreconditionError(
          Cat("job ", job_id, " has ", job->tasks_done, " of ", job->tasks_total, " tasks done"));
    }
  }
  ASSIGN_OR_RETURN(uint32_t latest, LatestVersion(kProfiles, model_hash));
  ASSIGN_OR_RETURN(uint32_t version, NextVersion(latest, "profile", model_hash));
  ProfileVersion profile{.model_hash = model_hash,
                         .version = version,
                         .profile_json = profile_json,
                         .job = job_id,
                         .created_at_ms = Now()};
  ASSIGN_OR_RETURN(std::string value, EncodeProfile(profile));
  RETURN_IF_ERROR(PutRaw(&batch, kProfiles, VersionKey(model_hash, version), value));
  if (job) {
    job->state = JobState::kSucceeded;
    job->profile_version = version;
    job->updated_at_ms = profile.created_at_ms;
    RETURN_IF_ERROR(PutFinishedJob(&batch, *job));
  }
  RETURN_IF_ERROR(Write(&batch));
  if (job) NoteJobsFinished(1);
  return profile;
}

StatusOr<ProfileVersion> RocksStore::GetProfile(const std::string& model_hash,
                                                uint32_t version) const {
  RETURN_IF_ERROR(ValidateModelHash(model_hash));
  if (version == kLatestVersion) {
    ASSIGN_OR_RETURN(version, LatestVersion(kProfiles, model_hash));
    if (version == 0) return absl::NotFoundError(Cat("model hash ", model_hash, " has no profile"));
  }
  const std::string key = VersionKey(model_hash, version);
  ASSIGN_OR_RETURN(std::optional<std::string> value, Get(kProfiles, key));
  if (!value) {
    return absl::NotFoundError(Cat("model hash ", model_hash, " has no profile version ", version));
  }
  StatusOr<ProfileVersion> profile =
      DecodeProfile({.model_hash = model_hash, .version = version}, *value);
  if (!profile.ok()) return Damaged(kProfiles, key, profile.status());
  return profile;
}

StatusOr<std::vector<ProfileVersion>> RocksStore::ListProfiles(
    const std::string& model_hash) const {
  if (!model_hash.empty()) RETURN_IF_ERROR(ValidateModelHash(model_hash));
  std::vector<ProfileVersion> out;
  const std::string prefix = model_hash.empty() ? std::string() : VersionPrefix(model_hash);
  RETURN_IF_ERROR(Scan(kProfiles, prefix, [&](std::string_view key, std::string_view value) {
    std::optional<VersionKeyParts> parts = ParseVersionKey(key);
    if (!parts) return Damaged(kProfiles, key, absl::DataLossError("malformed key"));
    StatusOr<ProfileVersion> profile = DecodeProfile(*parts, value);
    if (!profile.ok()) return Damaged(kProfiles, key, profile.status());
    out.push_back(*std::move(profile));
    return absl::OkStatus();
  }));
  return out;
}

StatusOr<BudgetMapRecord> RocksStore::ReadBudgetMap(const std::string& model_hash, uint32_t version,
                                                    const rocksdb::Snapshot* snapshot) const {
  const std::string key = VersionKey(model_hash, version);
  ASSIGN_OR_RETURN(std::optional<std::string> value, Get(kBudgetMaps, key, snapshot));
  if (!value) {
    return absl::NotFoundError(
        Cat("model hash ", model_hash, " has no budget map version ", version));
  }
  StatusOr<BudgetMapRecord> map =
      DecodeBudgetMap({.model_hash = model_hash, .version = version}, *value);
  if (!map.ok()) return Damaged(kBudgetMaps, key, map.status());
  return map;
}

StatusOr<std::optional<BudgetMapRecord>> RocksStore::FindBudgetMap(
    const std::string& model_hash, const std::string& digest) const {
  SnapshotHolder snapshot(db_.get());
  const std::string index = MapDigestKey(model_hash, digest);
  ASSIGN_OR_RETURN(std::optional<std::string> value, Get(kMeta, index, snapshot.get()));
  if (!value) return std::optional<BudgetMapRecord>();
  std::optional<uint32_t> version = ParseMapDigestValue(*value);
  if (!version) return Damaged(kMeta, index, absl::DataLossError("not a budget map version"));
  StatusOr<BudgetMapRecord> map = ReadBudgetMap(model_hash, *version, snapshot.get());
  if (absl::IsNotFound(map.status())) {
    return Damaged(kMeta, index,
                   absl::DataLossError(Cat("names missing budget map version ", *version)));
  }
  if (!map.ok()) return map.status();
  if (map->digest != digest) {
    return Damaged(kMeta, index,
                   absl::DataLossError(Cat("names budget map version ", *version,
                                           ", whose digest is ", map->digest)));
  }
  return std::optional<BudgetMapRecord>(*std::move(map));
}

StatusOr<BudgetMapPut> RocksStore::PutBudgetMap(const std::string& model_hash,
                                                uint32_t profile_version,
                                                const std::string& budget_json) {
  RETURN_IF_ERROR(ValidateModelHash(model_hash));
  RETURN_IF_ERROR(CheckJsonDocument(budget_json, "budget_json"));
  const std::string digest = BudgetMapDigest(budget_json);
  std::lock_guard<std::mutex> lock(write_mu_);
  // The profile it derives from must exist (GetProfile also resolves kLatestVersion).
  ASSIGN_OR_RETURN(ProfileVersion profile, GetProfile(model_hash, profile_version));
  ASSIGN_OR_RETURN(std::optional<BudgetMapRecord> existing, FindBudgetMap(model_hash, digest));
  if (existing) {
    if (existing->budget_json != budget_json) {
      return absl::AlreadyExistsError(Cat("model hash ", model_hash, ": digest ", digest,
                                          " already names budget map version ", existing->version,
                                          ", whose bytes differ (a SHA-256 prefix collision)"));
    }
    return BudgetMapPut{.map = *std::move(existing), .created = false};
  }
  ASSIGN_OR_RETURN(uint32_t latest, LatestVersion(kBudgetMaps, model_hash));
  ASSIGN_OR_RETURN(uint32_t version, NextVersion(latest, "budget map", model_hash));
  BudgetMapRecord map{.model_hash = model_hash,
                      .version = version,
                      .profile_version = profile.version,
                      .budget_json = budget_json,
                      .digest = digest,
                      .created_at_ms = Now()};
  ASSIGN_OR_RETURN(std::string value, EncodeBudgetMap(map));
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(PutRaw(&batch, kBudgetMaps, VersionKey(model_hash, version), value));
  RETURN_IF_ERROR(PutRaw(&batch, kMeta, MapDigestKey(model_hash, digest), MapDigestValue(version)));
  RETURN_IF_ERROR(Write(&batch));
  return BudgetMapPut{.map = std::move(map), .created = true};
}

StatusOr<BudgetMapRecord> RocksStore::GetBudgetMap(const std::string& model_hash,
                                                   uint32_t version) const {
  RETURN_IF_ERROR(ValidateModelHash(model_hash));
  if (version == kLatestVersion) {
    ASSIGN_OR_RETURN(version, LatestVersion(kBudgetMaps, model_hash));
    if (version == 0) {
      return absl::NotFoundError(Cat("model hash ", model_hash, " has no budget map"));
    }
  }
  return ReadBudgetMap(model_hash, version);
}

StatusOr<BudgetMapRecord> RocksStore::GetBudgetMapByDigest(const std::string& model_hash,
                                                           const std::string& digest) const {
  RETURN_IF_ERROR(ValidateModelHash(model_hash));
  if (!IsMapDigest(digest)) {
    return absl::InvalidArgumentError(
        Cat("budget map digest '", digest, "' is not ", kMapDigestChars, " lowercase hex digits"));
  }
  ASSIGN_OR_RETURN(std::optional<BudgetMapRecord> map, FindBudgetMap(model_hash, digest));
  if (!map) {
    return absl::NotFoundError(
        Cat("model hash ", model_hash, " has no budget map with digest ", digest));
  }
  return *std::move(map);
}

StatusOr<std::vector<BudgetMapRecord>> RocksStore::ListBudgetMaps(
    const std::string& model_hash) const {
  if (!model_hash.empty()) RETURN_IF_ERROR(ValidateModelHash(model_hash));
  std::vector<BudgetMapRecord> out;
  const std::string prefix = model_hash.empty() ? std::string() : VersionPrefix(model_hash);
  RETURN_IF_ERROR(Scan(kBudgetMaps, prefix, [&](std::string_view key, std::string_view value) {
    std::optional<VersionKeyParts> parts = ParseVersionKey(key);
    if (!parts) return Damaged(kBudgetMaps, key, absl::DataLossError("malformed key"));
    StatusOr<BudgetMapRecord> map = DecodeBudgetMap(*parts, value);
    if (!map.ok()) return Damaged(kBudgetMaps, key, map.status());
    out.push_back(*std::move(map));
    return absl::OkStatus();
  }));
  return out;
}

StatusOr<std::string> RocksStore::PutModelSummary(const std::string& model_hash,
                                                  const std::string& summary_json) {
  constexpr size_t kMaxSummaryBytes = 64 << 10;
  RETURN_IF_ERROR(ValidateModelHash(model_hash));
  if (summary_json.size() > kMaxSummaryBytes) {
    return absl::InvalidArgumentError(
        Cat("summary_json: ", summary_json.size(), " bytes, over the limit of ", kMaxSummaryBytes));
  }
  RETURN_IF_ERROR(CheckJsonDocument(summary_json, "summary_json"));
  const std::string key = Cat(kModelSummaryPrefix, model_hash);
  std::lock_guard<std::mutex> lock(write_mu_);
  ASSIGN_OR_RETURN(std::optional<std::string> stored, Get(kMeta, key));
  if (stored) return *std::move(stored);
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(PutRaw(&batch, kMeta, key, summary_json));
  RETURN_IF_ERROR(Write(&batch));
  return summary_json;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> RocksStore::ListModelSummaries() const {
  std::vector<std::pair<std::string, std::string>> out;
  RETURN_IF_ERROR(
      Scan(kMeta, kModelSummaryPrefix, [&](std::string_view key, std::string_view value) {
        out.emplace_back(std::string(key.substr(kModelSummaryPrefix.size())), std::string(value));
        return absl::OkStatus();
      }));
  return out;
}

}  // namespace ripplekv::store
