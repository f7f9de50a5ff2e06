#pragma once
// The catalog (docs/DESIGN.md §3): the scheduler's reads for the adapters, straight from the
// store: filtered, paged listings of jobs, a job's tasks and profile versions, typed (parsed)
// profiles, and budget maps computed from them (method::ComputeBudgetMap), so the gRPC adapters
// only convert messages and map Status codes (they never read the store). Paging (AIP-158) is
// the one every listing of the scheduler, CalibrationService's and RolloutService's, uses.
//
// Thread-safety: every method reads one consistent store snapshot and holds no state: callable
// from any thread without the Scheduler's mutex. The store must outlive the Catalog.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "method/budget_map.h"
#include "method/profile.h"
#include "store/store.h"
#include "store/types.h"

namespace ripplekv::scheduler {

// Paging of the listings (AIP-158). A page token is the decimal offset of the page's first item
// in the listing, so it stays meaningful while the listing does not change between pages.
inline constexpr int32_t kDefaultPageSize = 50;  // items per page when none is asked
inline constexpr int32_t kMaxPageSize = 1000;    // a larger page size is cut to this

struct PageRequest {
  int32_t page_size = 0;   // items; 0: kDefaultPageSize; above kMaxPageSize: kMaxPageSize;
                           // negative: InvalidArgument naming "page_size"
  std::string page_token;  // empty: the first page; else a next_page_token of the same listing
                           // (InvalidArgument naming "page_token" for anything else)
};

// The page's [begin, end) in a listing of `total` items, and the token of the next page (empty
// on the last page). Every listing of the scheduler, CalibrationService's and RolloutService's,
// pages this way. Errors: InvalidArgument naming page_size or page_token.
struct PageRange {
  size_t begin = 0;
  size_t end = 0;
};
[[nodiscard]] StatusOr<PageRange> Page(const PageRequest& page, size_t total);
std::string NextPageToken(const PageRange& range, size_t total);

struct JobFilter {
  std::vector<store::JobState> states;  // keep jobs in one of these states; empty: every state
  std::string model_hash;               // keep jobs of this model; empty: every model
  PageRequest page;
};

struct JobPage {
  // Newest first: by create time, then id, both descending. spec.data_inline left empty.
  std::vector<store::Job> jobs;
  std::string next_page_token;  // empty on the last page
};

struct TaskPage {
  // In (sample, layer) order; lease fields as stored (a lease past its deadline that ExpireLeases
  // has not returned yet still reads as leased).
  std::vector<store::Task> tasks;
  std::string next_page_token;  // empty on the last page
};

// A stored profile version, parsed (method/profile.h), with the store's record of it.
struct StoredProfile {
  std::string model_hash;
  uint32_t version = 0;              // 1, 2, ... per model hash
  store::JobId job = store::kNoJob;  // the job that measured it; kNoJob for an imported profile
  store::TimeMs created_at_ms = 0;   // when the store wrote it, ms since the epoch
  method::SensitivityProfile profile;
};

struct ProfilePage {
  std::vector<StoredProfile> profiles;  // by model hash (bytewise), then version descending
  std::string next_page_token;          // empty on the last page
};

struct ProfileBudgetMap {
  StoredProfile profile;  // the version the map was computed from (kLatestVersion resolved)
  method::BudgetMap map;
};

class Catalog {
 public:
  // `store` is not owned and must outlive this object.
  explicit Catalog(store::Store* store) : store_(store) {}

  // Scheduler::ListJobs, ListTasks, GetProfile, ListProfiles and GetBudgetMap (their contracts
  // are in scheduler.h).
  [[nodiscard]] StatusOr<JobPage> ListJobs(const JobFilter& filter) const;
  [[nodiscard]] StatusOr<TaskPage> ListTasks(store::JobId id, const PageRequest& page) const;
  [[nodiscard]] StatusOr<StoredProfile> GetProfile(const std::string& model_hash,
                                                   uint32_t version) const;
  [[nodiscard]] StatusOr<ProfilePage> ListProfiles(const std::string& model_hash,
                                                   const PageRequest& page) const;
  [[nodiscard]] StatusOr<ProfileBudgetMap> GetBudgetMap(const std::string& model_hash,
                                                        uint32_t version,
                                                        const method::BudgetOptions& options) const;

 private:
  store::Store* const store_;
};

}  // namespace ripplekv::scheduler
