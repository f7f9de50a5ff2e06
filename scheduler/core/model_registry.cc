#include "scheduler/core/model_registry.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <type_traits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/strings.h"

namespace ripplekv::scheduler {
namespace {

bool SameModel(const method::ProfileModel& a, const method::ProfileModel& b) {
  return a.hash == b.hash && a.architecture == b.architecture && a.name == b.name &&
         a.n_layers == b.n_layers && a.n_kv_heads == b.n_kv_heads && a.head_dim == b.head_dim &&
         a.d_model == b.d_model && a.vocab_size == b.vocab_size;
}

// The (key, count) of `counts` with the largest count when exactly one key has it; nullopt when
// `counts` is empty or the largest count is tied. `counts`: a range of (key, count) pairs.
template <typename Counts>
auto UniqueMost(const Counts& counts)
    -> std::optional<std::pair<std::decay_t<decltype(counts.begin()->first)>, int>> {
  std::optional<std::pair<std::decay_t<decltype(counts.begin()->first)>, int>> best;
  bool tied = false;
  for (const auto& [key, count] : counts) {
    if (!best || count > best->second) {
      best.emplace(key, count);
      tied = false;
    } else if (count == best->second) {
      tied = true;
    }
  }
  if (tied) return std::nullopt;
  return best;
}

std::string Quoted(std::string_view text) {
  constexpr size_t kMaxBytes = 96;
  std::string out = absl::StrCat(
      "\"", absl::CEscape(absl::string_view(text.data(), std::min(text.size(), kMaxBytes))), "\"");
  if (text.size() > kMaxBytes) out += "...";
  return out;
}

// Each field where `reported` differs from `recorded`, with both values: `name: "x" (recorded
// "y"), n_layers: 31 (recorded 30)`.
std::string ModelDifferences(const method::ProfileModel& reported,
                             const method::ProfileModel& recorded) {
  std::vector<std::string> fields;
  auto text = [&](std::string_view field, const std::string& a, const std::string& b) {
    if (a != b)
      fields.push_back(absl::StrCat(Sv(field), ": ", Quoted(a), " (recorded ", Quoted(b), ")"));
  };
  auto count = [&](std::string_view field, int64_t a, int64_t b) {
    if (a != b) fields.push_back(absl::StrCat(Sv(field), ": ", a, " (recorded ", b, ")"));
  };
  text("architecture", reported.architecture, recorded.architecture);
  text("name", reported.name, recorded.name);
  count("n_layers", reported.n_layers, recorded.n_layers);
  count("n_kv_heads", reported.n_kv_heads, recorded.n_kv_heads);
  count("head_dim", reported.head_dim, recorded.head_dim);
  count("d_model", reported.d_model, recorded.d_model);
  count("vocab_size", reported.vocab_size, recorded.vocab_size);
  return absl::StrJoin(fields, ", ");
}

}  // namespace

Status ValidateModel(const method::ProfileModel& m) {
  auto bad = [](std::string_view field, int64_t v) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker registration field model.", Sv(field), ": must be > 0, got ", v));
  };
  if (m.hash.empty())
    return absl::InvalidArgumentError("worker registration field model.hash: is required");
  if (m.n_layers <= 0) return bad("n_layers", m.n_layers);
  if (m.n_kv_heads <= 0) return bad("n_kv_heads", m.n_kv_heads);
  if (m.head_dim <= 0) return bad("head_dim", m.head_dim);
  if (m.d_model <= 0) return bad("d_model", m.d_model);
  if (m.vocab_size <= 0) return bad("vocab_size", m.vocab_size);
  return absl::OkStatus();
}

Status ModelRegistry::Load() {
  if (loaded_) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto stored, store_->ListModelSummaries());
  for (const auto& [hash, json] : stored) {
    StatusOr<method::ProfileModel> model = method::ProfileModelFromJson(json);
    if (!model.ok()) {
      return absl::DataLossError(
          absl::StrCat("stored summary of model ", hash, ": ", model.status().message()));
    }
    models_.emplace(hash, *std::move(model));
  }
  loaded_ = true;
  return absl::OkStatus();
}

const method::ProfileModel* ModelRegistry::Recorded(const std::string& hash) const {
  auto it = models_.find(hash);
  return it == models_.end() ? nullptr : &it->second;
}

Status ModelRegistry::CheckRegistration(const std::string& worker_id,
                                        const method::ProfileModel& reported) const {
  const method::ProfileModel* known = Recorded(reported.hash);
  if (known == nullptr || SameModel(*known, reported)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("worker ", worker_id, " reports a model summary for hash ", reported.hash,
                   " that differs from the one recorded: ", ModelDifferences(reported, *known)));
}

int64_t ModelRegistry::AgreedLayers(const std::string& hash, const ModelRef& ref,
                                    const std::map<std::string, WorkerState>& workers) {
  std::map<int64_t, int> counts;
  for (const auto& [id, w] : workers) {
    if (w.model.hash == hash && ref.Admits(w.model)) ++counts[w.model.n_layers];
  }
  if (auto most = UniqueMost(counts)) return most->first;
  return 0;
}

void ModelRegistry::NoteCreated(store::JobId id, const std::string& hash, const ModelRef& ref) {
  job_refs_.insert_or_assign(id, ref);
  first_refs_.try_emplace(hash, ref);
}

const ModelRef& ModelRegistry::JobRef(const store::Job& job) {
  auto it = job_refs_.find(job.id);
  if (it != job_refs_.end()) return it->second;
  // Submitted before a restart: the name was not stored; the layer count is in the plan.
  ModelRef ref;
  if (job.spec.params.layers.empty() && job.samples_planned > 0) {
    ref.n_layers = static_cast<int64_t>(job.tasks_total / job.samples_planned);
  }
  return job_refs_.emplace(job.id, std::move(ref)).first->second;
}

void ModelRegistry::SetFirstRef(const std::string& hash, const store::Job& oldest) {
  first_refs_.emplace(hash, JobRef(oldest));
}

StatusOr<std::vector<std::pair<std::string, std::string>>> ModelRegistry::Record(
    const std::string& hash, const std::map<std::string, WorkerState>& workers) {
  std::vector<std::pair<std::string, std::string>> differing;
  if (models_.contains(hash)) return differing;
  auto ref = first_refs_.find(hash);
  const bool has_ref = ref != first_refs_.end();
  // Identical summaries among the candidates, with how many workers report each.
  std::vector<std::pair<const method::ProfileModel*, int>> groups;
  for (const auto& [id, w] : workers) {
    if (w.model.hash != hash || (has_ref && !ref->second.Admits(w.model))) continue;
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const auto& group) { return SameModel(*group.first, w.model); });
    if (g == groups.end()) {
      groups.push_back({&w.model, 1});
    } else {
      ++g->second;
    }
  }
  // With a job's ModelRef one agreeing worker suffices; without one, two must agree. A tie waits
  // for a worker or a job that decides it.
  const int needed = has_ref ? 1 : 2;
  const auto most = UniqueMost(groups);
  if (!most || most->second < needed) return differing;
  const method::ProfileModel recorded = *most->first;
  RETURN_IF_ERROR(store_->PutModelSummary(hash, method::ProfileModelToJson(recorded)).status());
  models_.emplace(hash, recorded);
  first_refs_.erase(hash);
  for (const auto& [id, w] : workers) {
    if (w.model.hash == hash && !SameModel(w.model, recorded)) {
      differing.push_back(
          {id,
           absl::StrCat("worker ", id, " was dropped: its model summary for hash ", hash,
                        " differs from the one recorded: ", ModelDifferences(w.model, recorded))});
    }
  }
  return differing;
}

}  // namespace ripplekv::scheduler
