// ripplekv budgets (--profile P | --scheduler ADDR --model-hash H [--version V])
//   (--avg-budget B | --max-kl X | --frontier [--averages A,B,...])
//   [--ratio R] [--min-budget N] [--max-budget N] [--normalization minmax|rank|log-minmax]
//   [--shrink-z Z] [--per-head] [--format native|kvpress|trtllm] [--context-len L] [--out FILE]
//   [--json]
//   [--frontier-svg FILE]
// Turns a profile into per-layer KV-cache token budgets; the total is exactly L * B
// (docs/BUDGETS.md). A noise profile goes through the mapping of docs/DESIGN.md §2 (ratio,
// normalization, shrinkage); a response profile through the response allocation, which minimizes
// the KL its layers were measured to lose (the noise mapping's flags are not read; a warning says
// so); --per-head gives each KV head its own budget (a per-head response profile; the table adds
// a "heads" column, --format trtllm refuses the map). With --scheduler the map is computed by the
// scheduler (GetBudgetMap, the same library) from its stored profile; the security flags of
// proto/client_security_flags.h apply. A response profile also answers (--profile only):
//   --frontier       the optimal map's predicted KL at each average budget (--averages, default
//                    the profile's grid budgets within the bounds): a table, or --json;
//   --max-kl X       the map of the smallest average budget whose predicted KL is at most X nats,
//                    output as a map of --avg-budget would be;
//   --frontier-svg   the frontier as an SVG chart (with --max-kl or --avg-budget, the map marked).
// stdout: a table, or the map in --format (the frontier as JSON) with --json; --out writes the
// map file. Errors: one line on stderr; exit codes in cli/exit_codes.h (an unreachable --max-kl
// is NOT_FOUND, exit 2, naming the lowest predicted KL).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/strings.h"
#include "cli/budget_flags.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/profile_plot.h"
#include "cli/remote_client.h"
#include "method/budget_format.h"
#include "method/budget_map.h"
#include "method/profile.h"
#include "method/response_allocation.h"
#include "nlohmann/json.hpp"
#include "proto/budget_params.h"
#include "proto/client_security_flags.h"
#include "proto/profile.h"
#include "spdlog/spdlog.h"

namespace ripplekv::cli {

namespace {

struct BudgetsArgs {
  std::string profile;
  std::string scheduler;             // remote: the scheduler's address, instead of --profile
  v1::ClientSecurityFiles security;  // remote: --tls-ca, --tls-cert, --tls-key, --token-file
  std::string model_hash;            // remote: the profile's model hash
  int64_t version = 0;               // remote: profile version; 0: the latest
  // --total-budget is not offered; --avg-budget is required unless --max-kl or --frontier.
  BudgetFlags budget;
  std::string format = "native";
  std::string out;
  bool json = false;
  // Response profiles only.
  bool frontier = false;          // print the frontier instead of a map
  std::vector<int64_t> averages;  // the frontier's average budgets; empty: the grid's
  std::optional<double> max_kl;   // the map of the smallest average predicting at most this, nats
  std::string frontier_svg;       // write the frontier's chart here
  // The noise mapping's flags given on the command line, named in a warning for a response
  // profile (which does not read them).
  std::vector<std::string> mapping_flags;
};

// GetBudgetMap on the scheduler, and the profile it used (for the table's mean KL column).
StatusOr<std::pair<method::SensitivityProfile, method::BudgetMap>> RemoteBudgetMap(
    const BudgetsArgs& args, const method::BudgetOptions& options, method::BudgetFormat format) {
  ASSIGN_OR_RETURN(RemoteClient client, RemoteClient::Connect(args.scheduler, args.security));
  v1::GetBudgetMapRequest request;
  request.set_model_hash(args.model_hash);
  request.set_profile_version(args.version);
  v1::BudgetParams* p = request.mutable_params();
  *p = v1::BudgetParamsFromOptions(options);
  p->set_format(format == method::BudgetFormat::kKvpress  ? v1::BUDGET_FORMAT_KVPRESS
                : format == method::BudgetFormat::kTrtllm ? v1::BUDGET_FORMAT_TRTLLM
                                                          : v1::BUDGET_FORMAT_NATIVE);
  ASSIGN_OR_RETURN(v1::BudgetMap remote, client.GetBudgetMap(request));
  ASSIGN_OR_RETURN(v1::Profile profile,
                   client.GetProfile(args.model_hash, remote.profile_version()));
  method::SensitivityProfile sensitivity = v1::ProfileFromProto(profile);
  method::BudgetMap map;
  map.model_hash = remote.model_hash();
  map.objective = sensitivity.params.objective;
  map.selector = sensitivity.params.selector;
  map.options = options;
  map.total_tokens = remote.total_tokens();
  map.tokens.assign(remote.tokens().begin(), remote.tokens().end());
  for (const v1::HeadBudgets& heads : remote.head_tokens()) {
    map.head_tokens.emplace_back(heads.tokens().begin(), heads.tokens().end());
  }
  map.multipliers.assign(remote.multipliers().begin(), remote.multipliers().end());
  map.normalized.assign(remote.normalized().begin(), remote.normalized().end());
  return std::make_pair(std::move(sensitivity), std::move(map));
}

// "[lo, hi]" or "[lo, unbounded]", tokens.
std::string BoundsText(const method::ApportionBounds& bounds) {
  return absl::StrCat("[", bounds.min_tokens, ", ",
                      bounds.max_tokens ? absl::StrCat(*bounds.max_tokens) : "unbounded", "]");
}

// The frontier's default average budgets: the profile's grid budgets within the bounds, or the
// lower bound alone when none is.
std::vector<int64_t> GridAverages(const method::SensitivityProfile& profile,
                                  const method::ApportionBounds& bounds) {
  std::vector<int64_t> averages;
  for (int64_t budget : profile.params.budgets) {
    if (budget >= bounds.min_tokens && (!bounds.max_tokens || budget <= *bounds.max_tokens)) {
      averages.push_back(budget);
    }
  }
  if (averages.empty()) averages.push_back(bounds.min_tokens);
  return averages;
}

// What --frontier, --max-kl and --frontier-svg work from: a response profile's curves and the
// bounds of its allocation.
struct ResponseSetup {
  // [L] the layers' curves; with --per-head [L * H] every layer's heads', layer-major.
  std::vector<method::ResponseCurve> curves;
  size_t heads = 1;  // curves per layer: H with --per-head, else 1
  method::ApportionBounds bounds;
  std::vector<int64_t> averages;  // of the frontier: --averages, or GridAverages()
};

StatusOr<ResponseSetup> SetUpResponse(const BudgetsArgs& args,
                                      const method::SensitivityProfile& profile,
                                      const method::BudgetOptions& options) {
  ResponseSetup setup;
  // The allocation of H curves per layer with an average B per head is the per-head map of
  // average B: the same L * H * B tokens.
  ASSIGN_OR_RETURN(method::AllocationCurves curves,
                   method::AllocationCurvesOf(profile, options.per_head));
  setup.curves = std::move(curves.curves);
  setup.heads = curves.heads;
  setup.bounds = method::ResponseBounds(profile.params.selector, options);
  setup.averages = args.averages.empty() ? GridAverages(profile, setup.bounds) : args.averages;
  std::sort(setup.averages.begin(), setup.averages.end());
  setup.averages.erase(std::unique(setup.averages.begin(), setup.averages.end()),
                       setup.averages.end());
  for (int64_t average : setup.averages) {
    if (average < setup.bounds.min_tokens ||
        (setup.bounds.max_tokens && average > *setup.bounds.max_tokens)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--averages: ", average, " is outside the bounds ", BoundsText(setup.bounds),
                       " (the lower bound is at least ",
                       method::MinResponseBudget(profile.params.selector), ", the smallest budget ",
                       Sv(method::ResponseSelectorName(profile.params.selector)), " keeps)"));
    }
  }
  return setup;
}

std::string ModelName(const method::SensitivityProfile& profile) {
  return profile.model.name.empty() ? profile.model.architecture : profile.model.name;
}

// The chart's average budgets: --averages as given; by default the grid's, with eight more
// per doubling between its first and last (so the curve is drawn, not its chords), rounded.
std::vector<int64_t> ChartAverages(const BudgetsArgs& args, const ResponseSetup& setup) {
  if (!args.averages.empty() || setup.averages.size() < 2) return setup.averages;
  std::vector<int64_t> averages = setup.averages;
  const double first = static_cast<double>(setup.averages.front());
  const double last = static_cast<double>(setup.averages.back());
  for (int step = 1; first * std::exp2(step / 8.0) < last; ++step) {
    averages.push_back(std::llround(first * std::exp2(step / 8.0)));
  }
  std::sort(averages.begin(), averages.end());
  averages.erase(std::unique(averages.begin(), averages.end()), averages.end());
  return averages;
}

// "30 layers", or with --per-head "30 layers x 3 KV heads".
std::string LayersText(const BudgetsArgs& args, const ResponseSetup& setup) {
  const size_t layers = setup.curves.size() / setup.heads;
  if (!args.budget.per_head) return absl::StrCat(layers, " layers");
  return absl::StrCat(layers, " layers x ", setup.heads, " KV heads");
}

// Writes --frontier-svg: the frontier at ChartAverages(), and the map chosen, if any.
Status WriteFrontierPlot(const BudgetsArgs& args, const method::SensitivityProfile& profile,
                         const ResponseSetup& setup,
                         std::optional<FrontierPlotData::Chosen> chosen) {
  ASSIGN_OR_RETURN(
      std::vector<method::FrontierPoint> points,
      method::ResponseFrontier(setup.curves, ChartAverages(args, setup), setup.bounds));
  FrontierPlotData plot;
  plot.title = absl::StrCat(ModelName(profile), " — response frontier");
  plot.subtitle = absl::StrCat(
      Sv(method::ResponseSelectorName(profile.params.selector)), ", ", LayersText(args, setup),
      ", budgets within ", BoundsText(setup.bounds), ", model ", profile.model.hash.substr(0, 12));
  for (const method::FrontierPoint& point : points) {
    plot.average_tokens.push_back(point.average_tokens);
    plot.predicted_kl.push_back(point.predicted_kl);
    plot.hull_kl.push_back(point.hull_kl);
  }
  plot.max_kl = args.max_kl;
  plot.chosen = chosen;
  RETURN_IF_ERROR(WriteFrontierSvg(plot, args.frontier_svg));
  spdlog::info("wrote the frontier chart {}", args.frontier_svg);
  return absl::OkStatus();
}

void PrintFrontier(const BudgetsArgs& args, const method::SensitivityProfile& profile,
                   const ResponseSetup& setup, const std::vector<method::FrontierPoint>& points) {
  const size_t layers = setup.curves.size() / setup.heads;
  if (args.json) {
    nlohmann::ordered_json j;
    j["model_hash"] = profile.model.hash;
    j["objective"] = std::string(method::ObjectiveName(profile.params.objective));
    j["selector"] = std::string(method::ResponseSelectorName(profile.params.selector));
    j["min_tokens"] = setup.bounds.min_tokens;
    j["max_tokens"] = setup.bounds.max_tokens ? nlohmann::ordered_json(*setup.bounds.max_tokens)
                                              : nlohmann::ordered_json(nullptr);
    j["points"] = nlohmann::ordered_json::array();
    for (const method::FrontierPoint& point : points) {
      nlohmann::ordered_json tokens = point.tokens;
      if (args.budget.per_head) {  // [L][H], as a per-head map's head_tokens
        tokens = nlohmann::ordered_json::array();
        for (size_t l = 0; l < layers; ++l) {
          tokens.push_back(std::vector<int64_t>(
              point.tokens.begin() + static_cast<ptrdiff_t>(l * setup.heads),
              point.tokens.begin() + static_cast<ptrdiff_t>((l + 1) * setup.heads)));
        }
      }
      j["points"].push_back({{"average_tokens", point.average_tokens},
                             {"total_tokens", point.average_tokens * static_cast<int64_t>(layers)},
                             {"predicted_kl", point.predicted_kl},
                             {"hull_kl", point.hull_kl},
                             {args.budget.per_head ? "head_tokens" : "tokens", tokens}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%10s  %12s  %14s  %14s\n", "avg budget", "total tokens", "predicted KL",
              "hull bound");
  for (const method::FrontierPoint& point : points) {
    std::printf("%10lld  %12lld  %14.6g  %14.6g\n", static_cast<long long>(point.average_tokens),
                static_cast<long long>(point.average_tokens * static_cast<int64_t>(layers)),
                point.predicted_kl, point.hull_kl);
  }
  std::printf(
      "optimal maps of %s, %s, budgets within %s; KL in nats summed over %s "
      "(hull bound: a lower bound of the optimum)\n",
      LayersText(args, setup).c_str(),
      std::string(method::ResponseSelectorName(profile.params.selector)).c_str(),
      BoundsText(setup.bounds).c_str(), args.budget.per_head ? "heads" : "layers");
}

// A per-head map's last column: "  heads" in the header, "  96 128 160" (layer l's head budgets)
// in a row; "" for a per-layer map.
std::string HeadsColumn(const method::BudgetMap& map, std::optional<size_t> layer) {
  if (map.head_tokens.empty()) return "";
  if (!layer) return "  heads";
  return absl::StrCat("  ", absl::StrJoin(map.head_tokens[*layer], " "));
}

// The table of a response map: each layer's predicted KL at its budget, and the sum.
// Layer `layer`'s predicted KL under `map`: its curve at its budget, or (`heads` curves per layer,
// layer-major) the sum of its heads' curves at their budgets.
double PredictedLayerKl(const std::vector<method::ResponseCurve>& curves, size_t heads,
                        const method::BudgetMap& map, size_t layer) {
  double predicted = 0.0;
  for (size_t h = 0; h < heads; ++h) {
    const int64_t tokens = map.head_tokens.empty() ? map.tokens[layer] : map.head_tokens[layer][h];
    predicted +=
        method::InterpolateResponse(curves[layer * heads + h], static_cast<double>(tokens));
  }
  return predicted;
}

Status PrintResponseTable(const method::SensitivityProfile& profile, const method::BudgetMap& map,
                          const method::BudgetOptions& options) {
  const method::ApportionBounds bounds = method::ResponseBounds(map.selector, options);
  // The curves the map allocated: the layers', or every layer's heads' (a per-head map, whose
  // layer's predicted KL is the sum of its heads' at their budgets).
  ASSIGN_OR_RETURN(const method::AllocationCurves curves,
                   method::AllocationCurvesOf(profile, !map.head_tokens.empty()));
  ASSIGN_OR_RETURN(
      method::ResponseAllocation allocation,
      method::AllocateByResponse(curves.curves,
                                 map.total_tokens * static_cast<int64_t>(curves.heads), bounds));
  std::printf("%5s  %12s  %8s%s\n", "layer", "predicted KL", "tokens",
              HeadsColumn(map, std::nullopt).c_str());
  for (size_t i = 0; i < map.tokens.size(); ++i) {
    const double predicted = PredictedLayerKl(curves.curves, curves.heads, map, i);
    std::printf("%5lld  %12.6g  %8lld%s\n", static_cast<long long>(profile.layers[i].layer),
                predicted, static_cast<long long>(map.tokens[i]), HeadsColumn(map, i).c_str());
  }
  std::printf(
      "total %lld tokens over %zu layers (average %lld), response allocation (%s, budgets "
      "within %s), predicted KL %.6g nats (hull bound %.6g)\n",
      static_cast<long long>(map.total_tokens), map.tokens.size(),
      static_cast<long long>(options.average_tokens),
      std::string(method::ResponseSelectorName(map.selector)).c_str(), BoundsText(bounds).c_str(),
      allocation.predicted_kl, allocation.hull_kl);
  return absl::OkStatus();
}

int RunBudgets(const BudgetsArgs& args) {
  const bool remote = !args.scheduler.empty();
  if (remote == !args.profile.empty() || remote == args.model_hash.empty()) {
    return ReportError(
        absl::InvalidArgumentError("give either --profile, or --scheduler with --model-hash"));
  }
  // The response answers, and which flag asks for one (for messages).
  const std::string response_flag = args.frontier                ? "--frontier"
                                    : args.max_kl                ? "--max-kl"
                                    : !args.frontier_svg.empty() ? "--frontier-svg"
                                                                 : "";
  if (remote && !response_flag.empty()) {
    return ReportError(absl::InvalidArgumentError(
        absl::StrCat(response_flag, ": needs --profile (a profile file), not --scheduler")));
  }
  if (args.frontier && args.max_kl) {
    return ReportError(absl::InvalidArgumentError("give --frontier or --max-kl, not both"));
  }
  if (!args.averages.empty() && !args.frontier && args.frontier_svg.empty()) {
    return ReportError(
        absl::InvalidArgumentError("--averages: only with --frontier or --frontier-svg"));
  }
  if (args.frontier && !args.out.empty()) {
    return ReportError(absl::InvalidArgumentError(
        "--out: not with --frontier (it prints the frontier; --frontier-svg draws it)"));
  }
  if (args.budget.avg_budget == 0 && !args.frontier && !args.max_kl) {
    return ReportError(absl::InvalidArgumentError(
        "--avg-budget: give the average budget per layer (a response profile also takes "
        "--max-kl or --frontier)"));
  }
  StatusOr<method::SensitivityProfile> profile =
      remote ? method::SensitivityProfile{} : method::ReadProfileFile(args.profile);
  if (!profile.ok()) return ReportError(profile.status());
  StatusOr<method::BudgetOptions> options =
      args.frontier ? BoundOptionsFromFlags(args.budget, "--frontier")
      : args.max_kl ? BoundOptionsFromFlags(args.budget, "--max-kl")
                    : BudgetOptionsFromFlags(args.budget);
  if (!options.ok()) return ReportError(options.status());
  auto format = method::ParseBudgetFormat(args.format);
  if (!format.ok()) return ReportError(format.status());
  if (*format == method::BudgetFormat::kKvpress && !options->max_context) {
    return ReportError(absl::InvalidArgumentError(
        "--format kvpress needs --context-len (kvpress takes ratios of a context length)"));
  }
  const bool response = !remote && profile->params.objective == method::Objective::kResponse;
  if (!remote && !response_flag.empty() && !response) {
    return ReportError(absl::FailedPreconditionError(absl::StrCat(
        response_flag, " needs a response profile (ripplekv calibrate --objective response); ",
        args.profile, " measured objective ",
        Sv(method::ObjectiveName(profile->params.objective)))));
  }
  if (response && !args.mapping_flags.empty()) {
    spdlog::warn("{} not read: a response profile's map minimizes its measured KL",
                 absl::StrJoin(args.mapping_flags, ", "));
  }

  std::optional<ResponseSetup> setup;
  if (!response_flag.empty()) {
    StatusOr<ResponseSetup> made = SetUpResponse(args, *profile, *options);
    if (!made.ok()) return ReportError(made.status());
    setup = *std::move(made);
  }
  // The frontier alone.
  if (args.frontier) {
    auto points = method::ResponseFrontier(setup->curves, setup->averages, setup->bounds);
    if (!points.ok()) return ReportError(points.status());
    if (!args.frontier_svg.empty()) {
      if (Status s = WriteFrontierPlot(args, *profile, *setup, std::nullopt); !s.ok()) {
        return ReportError(s);
      }
    }
    PrintFrontier(args, *profile, *setup, *points);
    return kExitOk;
  }
  if (args.max_kl) {
    auto found = method::SmallestAverageForKl(setup->curves, *args.max_kl, setup->bounds);
    if (!found.ok()) return ReportError(found.status());
    spdlog::info(
        "smallest average budget whose optimal map predicts at most {} nats: {} tokens per layer "
        "(predicted {:.6g} nats, hull bound {:.6g})",
        *args.max_kl, found->average_tokens, found->predicted_kl, found->hull_kl);
    options->average_tokens = found->average_tokens;
  }

  // The map under `o`: computed here, or by the scheduler (which also sends its profile).
  auto compute = [&](const method::BudgetOptions& o) -> StatusOr<method::BudgetMap> {
    if (!remote) return method::ComputeBudgetMap(*profile, o);
    ASSIGN_OR_RETURN(auto fetched, RemoteBudgetMap(args, o, *format));
    *profile = std::move(fetched.first);
    return std::move(fetched.second);
  };
  StatusOr<method::BudgetMap> map = compute(*options);
  if (!map.ok() && map.status().code() == absl::StatusCode::kInvalidArgument) {
    // A layer above --context-len: capped there, as eval fits a map to its context.
    StatusOr<std::optional<method::BudgetOptions>> capped = CapAtContext(
        *options, [&](const method::BudgetOptions& o) -> StatusOr<std::vector<int64_t>> {
          ASSIGN_OR_RETURN(method::BudgetMap uncapped, compute(o));
          return uncapped.tokens;
        });
    if (!capped.ok()) return ReportError(capped.status());
    if (*capped) {
      *options = **capped;
      map = compute(*options);
    }
  }
  if (!map.ok()) return ReportError(map.status());
  if (map->tokens.size() != profile->layers.size()) {
    return ReportError(absl::DataLossError(absl::StrCat(
        "budget map has ", map->tokens.size(), " layers, profile ", profile->layers.size())));
  }
  if (!args.frontier_svg.empty()) {
    double predicted = 0.0;
    for (size_t l = 0; l < map->tokens.size(); ++l) {
      predicted += PredictedLayerKl(setup->curves, setup->heads, *map, l);
    }
    const FrontierPlotData::Chosen chosen{.average_tokens = options->average_tokens,
                                          .predicted_kl = predicted};
    if (Status s = WriteFrontierPlot(args, *profile, *setup, chosen); !s.ok()) {
      return ReportError(s);
    }
  }
  const std::optional<int64_t> context = options->max_context;
  if (!args.out.empty()) {
    if (Status s = method::WriteBudgetMapFile(args.out, *map, *format, context); !s.ok()) {
      return ReportError(s);
    }
    spdlog::info("wrote {} budget map {}", args.format, args.out);
  }
  if (args.json) {
    auto text = method::FormatBudgetMap(*map, *format, context);
    if (!text.ok()) return ReportError(text.status());
    std::fputs(text->c_str(), stdout);
    if (text->empty() || text->back() != '\n') std::fputc('\n', stdout);
    return kExitOk;
  }
  if (map->objective == method::Objective::kResponse) {
    if (Status s = PrintResponseTable(*profile, *map, *options); !s.ok()) return ReportError(s);
    return kExitOk;
  }
  std::printf("%5s  %12s  %10s  %8s%s\n", "layer", "mean KL", "multiplier", "tokens",
              HeadsColumn(*map, std::nullopt).c_str());
  for (size_t i = 0; i < map->tokens.size(); ++i) {
    std::printf("%5lld  %12.6g  %10.3f  %8lld%s\n",
                static_cast<long long>(profile->layers[i].layer), profile->layers[i].mean_kl,
                map->multipliers[i], static_cast<long long>(map->tokens[i]),
                HeadsColumn(*map, i).c_str());
  }
  std::printf("total %lld tokens over %zu layers (average %lld), ratio %.3g, %s\n",
              static_cast<long long>(map->total_tokens), map->tokens.size(),
              static_cast<long long>(options->average_tokens), args.budget.ratio,
              args.budget.normalization.c_str());
  return kExitOk;
}

}  // namespace

void AddBudgetsCommand(CLI::App& app, Action& run) {
  auto a = std::make_shared<BudgetsArgs>();
  CLI::App* cmd = app.add_subcommand("budgets", "Per-layer KV budgets from a profile");
  cmd->add_option("--profile", a->profile, "Profile JSON from `ripplekv calibrate --out`");
  cmd->add_option("--scheduler", a->scheduler,
                  "Ask this scheduler (host:port) instead of reading --profile");
  v1::AddClientSecurityFlags(cmd, a->security);
  cmd->add_option("--model-hash", a->model_hash, "With --scheduler: the profile's model hash");
  cmd->add_option("--version", a->version, "With --scheduler: profile version (0: latest)")
      ->capture_default_str();
  AddBudgetFlags(cmd, a->budget, {});
  cmd->add_option("--format", a->format, "native, kvpress or trtllm")->capture_default_str();
  cmd->add_option("-o,--out", a->out, "Write the budget map in --format here");
  cmd->add_flag("--json", a->json, "Print the map in --format (or the frontier) as JSON");
  cmd->add_flag("--frontier", a->frontier,
                "Response profile: the optimal map's predicted KL at each average budget");
  cmd->add_option("--averages", a->averages,
                  "The frontier's average budgets, e.g. 32,64,128 (default: the profile's grid)")
      ->delimiter(',');
  cmd->add_option("--max-kl", a->max_kl,
                  "Response profile: the map of the smallest average budget predicting at most "
                  "this KL (nats)");
  cmd->add_option("--frontier-svg", a->frontier_svg,
                  "Response profile: write the frontier as an SVG chart here");
  cmd->callback([a, cmd, &run] {
    a->mapping_flags.clear();
    for (const char* flag : {"--ratio", "--normalization", "--shrink-z"}) {
      if (cmd->count(flag) > 0) a->mapping_flags.push_back(flag);
    }
    run = [a] { return RunBudgets(*a); };
  });
}

}  // namespace ripplekv::cli
