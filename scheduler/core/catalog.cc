#include "scheduler/core/catalog.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ripplekv::scheduler {
namespace {

StatusOr<StoredProfile> ParseStoredProfile(store::ProfileVersion record) {
  StatusOr<method::SensitivityProfile> profile = method::ProfileFromJson(record.profile_json);
  if (!profile.ok()) {
    return absl::DataLossError(absl::StrCat("stored profile ", record.model_hash, " version ",
                                            record.version, ": ", profile.status().message()));
  }
  return StoredProfile{.model_hash = std::move(record.model_hash),
                       .version = record.version,
                       .job = record.job,
                       .created_at_ms = record.created_at_ms,
                       .profile = *std::move(profile)};
}

}  // namespace

StatusOr<PageRange> Page(const PageRequest& page, size_t total) {
  if (page.page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size: ", page.page_size, " is negative"));
  }
  const size_t size =
      page.page_size == 0 ? kDefaultPageSize : std::min(page.page_size, kMaxPageSize);
  size_t offset = 0;
  for (char c : page.page_token) {
    if (c < '0' || c > '9' || offset > (std::numeric_limits<size_t>::max() - 9) / 10) {
      return absl::InvalidArgumentError(absl::StrCat(
          "page_token: \"", page.page_token.substr(0, 80), "\" is not a token of this server"));
    }
    offset = offset * 10 + static_cast<size_t>(c - '0');
  }
  const size_t begin = std::min(offset, total);
  return PageRange{.begin = begin, .end = std::min(total, begin + size)};
}

std::string NextPageToken(const PageRange& range, size_t total) {
  return range.end < total ? absl::StrCat(range.end) : std::string();
}

StatusOr<JobPage> Catalog::ListJobs(const JobFilter& filter) const {
  // The page arguments are checked before the store is read.
  RETURN_IF_ERROR(Page(filter.page, 0).status());
  ASSIGN_OR_RETURN(std::vector<store::Job> jobs, store_->ListJobs());
  std::erase_if(jobs, [&](const store::Job& job) {
    if (!filter.states.empty() &&
        std::find(filter.states.begin(), filter.states.end(), job.state) == filter.states.end()) {
      return true;
    }
    return !filter.model_hash.empty() && job.spec.model_hash != filter.model_hash;
  });
  // Newest first: by create time, then id, both descending.
  std::sort(jobs.begin(), jobs.end(), [](const store::Job& a, const store::Job& b) {
    if (a.created_at_ms != b.created_at_ms) return a.created_at_ms > b.created_at_ms;
    return a.id > b.id;
  });
  ASSIGN_OR_RETURN(PageRange range, Page(filter.page, jobs.size()));
  JobPage page;
  page.jobs.assign(std::make_move_iterator(jobs.begin() + static_cast<ptrdiff_t>(range.begin)),
                   std::make_move_iterator(jobs.begin() + static_cast<ptrdiff_t>(range.end)));
  page.next_page_token = NextPageToken(range, jobs.size());
  return page;
}

StatusOr<TaskPage> Catalog::ListTasks(store::JobId id, const PageRequest& page) const {
  RETURN_IF_ERROR(Page(page, 0).status());
  ASSIGN_OR_RETURN(std::vector<store::Task> tasks, store_->ListTasks(id));
  ASSIGN_OR_RETURN(PageRange range, Page(page, tasks.size()));
  TaskPage out;
  out.tasks.assign(std::make_move_iterator(tasks.begin() + static_cast<ptrdiff_t>(range.begin)),
                   std::make_move_iterator(tasks.begin() + static_cast<ptrdiff_t>(range.end)));
  out.next_page_token = NextPageToken(range, tasks.size());
  return out;
}

StatusOr<StoredProfile> Catalog::GetProfile(const std::string& model_hash, uint32_t version) const {
  ASSIGN_OR_RETURN(store::ProfileVersion record, store_->GetProfile(model_hash, version));
  return ParseStoredProfile(std::move(record));
}

StatusOr<ProfilePage> Catalog::ListProfiles(const std::string& model_hash,
                                            const PageRequest& page) const {
  RETURN_IF_ERROR(Page(page, 0).status());
  ASSIGN_OR_RETURN(std::vector<store::ProfileVersion> records, store_->ListProfiles(model_hash));
  // By hash, then version descending.
  std::sort(records.begin(), records.end(),
            [](const store::ProfileVersion& a, const store::ProfileVersion& b) {
              if (a.model_hash != b.model_hash) return a.model_hash < b.model_hash;
              return a.version > b.version;
            });
  ASSIGN_OR_RETURN(PageRange range, Page(page, records.size()));
  ProfilePage out;
  for (size_t i = range.begin; i < range.end; ++i) {
    ASSIGN_OR_RETURN(StoredProfile profile, ParseStoredProfile(std::move(records[i])));
    out.profiles.push_back(std::move(profile));
  }
  out.next_page_token = NextPageToken(range, records.size());
  return out;
}

StatusOr<ProfileBudgetMap> Catalog::GetBudgetMap(const std::string& model_hash, uint32_t version,
                                                 const method::BudgetOptions& options) const {
  ProfileBudgetMap out;
  ASSIGN_OR_RETURN(out.profile, GetProfile(model_hash, version));
  // A stored profile that cannot give a map (a layer never measured) is the stored version's
  // fault, not the request's: FailedPrecondition. Bad options stay InvalidArgument. The map is
  // the one `ripplekv budgets` computes from the same profile, noise or response.
  if (Status usable = method::ValidateMapProfile(out.profile.profile); !usable.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("profile ", out.profile.model_hash,
                                                      " version ", out.profile.version, ": ",
                                                      usable.message()));
  }
  // A map the profile cannot give under these options although it gives others (per_head of a
  // profile without head curves) is FailedPrecondition from the method: the profile's, so it is
  // named like the errors above. Everything else the method returns is the options' fault.
  StatusOr<method::BudgetMap> map = method::ComputeBudgetMap(out.profile.profile, options);
  if (absl::IsFailedPrecondition(map.status())) {
    return absl::FailedPreconditionError(absl::StrCat("profile ", out.profile.model_hash,
                                                      " version ", out.profile.version, ": ",
                                                      map.status().message()));
  }
  if (!map.ok()) return map.status();
  out.map = *std::move(map);
  return out;
}

}  // namespace ripplekv::scheduler
