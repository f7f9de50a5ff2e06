#include "proto/profile.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace ripplekv::v1 {

void ModelToProto(const method::ProfileModel& model, ModelInfo* out) {
  out->set_model_hash(model.hash);
  out->set_architecture(model.architecture);
  out->set_name(model.name);
  out->set_n_layers(static_cast<int32_t>(model.n_layers));
  out->set_n_kv_heads(static_cast<int32_t>(model.n_kv_heads));
  out->set_head_dim(static_cast<int32_t>(model.head_dim));
  out->set_d_model(static_cast<int32_t>(model.d_model));
  out->set_vocab_size(static_cast<int32_t>(model.vocab_size));
}

method::ProfileModel ModelFromProto(const ModelInfo& m) {
  return {.hash = m.model_hash(),
          .architecture = m.architecture(),
          .name = m.name(),
          .n_layers = m.n_layers(),
          .n_kv_heads = m.n_kv_heads(),
          .head_dim = m.head_dim(),
          .d_model = m.d_model(),
          .vocab_size = m.vocab_size()};
}

namespace {

void PointToProto(const method::ResponsePoint& point, ResponsePoint* out) {
  out->set_budget(static_cast<int32_t>(point.budget));
  out->set_mean_kl(point.mean_kl);
  out->set_std_error(point.std_error);
}

method::ResponsePoint PointFromProto(const ResponsePoint& r) {
  return {.budget = r.budget(), .mean_kl = r.mean_kl(), .std_error = r.std_error()};
}

}  // namespace

void ProfileToProto(const method::SensitivityProfile& profile, bool with_layers, Profile* out) {
  ModelToProto(profile.model, out->mutable_model());
  CalibrationParamsToProto(profile.params, out->mutable_params());
  out->set_data_source(profile.params.data_source);
  out->set_data_domain(profile.params.data_domain);
  out->set_tool_version(profile.tool_version);
  if (profile.verification) {
    const method::ProfileVerification& v = *profile.verification;
    ProfileVerification* pv = out->mutable_verification();
    pv->set_fraction(v.fraction);
    pv->set_tasks_verified(static_cast<int64_t>(v.tasks_verified));
    pv->set_tasks_unverified(static_cast<int64_t>(v.tasks_unverified));
    pv->set_tasks_recomputed(static_cast<int64_t>(v.tasks_recomputed));
    for (const method::ProfileVerification::Disagreement& d : v.disagreements) {
      ProfileVerification::Disagreement* pd = pv->add_disagreements();
      pd->set_sample(static_cast<int32_t>(d.sample));
      pd->set_layer(static_cast<int32_t>(d.layer));
      pd->set_outvoted_worker(d.outvoted_worker);
      for (const std::string& w : d.agreeing_workers) pd->add_agreeing_workers(w);
    }
  }
  if (with_layers && profile.stability) {
    const method::ProfileStability& st = *profile.stability;
    ProfileStability* s = out->mutable_stability();
    s->set_seed(st.seed);
    s->set_resamples(st.resamples);
    s->set_level(st.level);
    s->set_ratio(st.ratio);
    s->set_tolerance(st.tolerance);
    for (const method::LayerStability& layer : st.layers) {
      LayerStability* l = s->add_layers();
      l->set_layer(static_cast<int32_t>(layer.layer));
      l->set_kl_low(layer.kl_low);
      l->set_kl_high(layer.kl_high);
      l->set_share(layer.share);
      l->set_share_low(layer.share_low);
      l->set_share_high(layer.share_high);
    }
    s->set_rank_correlation_median(st.rank_correlation_median);
    s->set_rank_correlation_low(st.rank_correlation_low);
    s->set_top_layer(static_cast<int32_t>(st.top_layer));
    s->set_top_layer_frequency(st.top_layer_frequency);
    s->set_max_share_deviation(st.max_share_deviation);
    s->set_stable(st.stable);
  }
  if (with_layers) {
    for (const method::LayerSensitivity& layer : profile.layers) {
      LayerSensitivity* l = out->add_layers();
      l->set_layer(static_cast<int32_t>(layer.layer));
      l->set_mean_kl(layer.mean_kl);
      l->set_std_error(layer.std_error);
      l->set_count(layer.count);
      for (double m : layer.per_sample_mean) l->add_per_sample_mean(m);
      for (const method::ResponsePoint& point : layer.response) {
        PointToProto(point, l->add_response());
      }
      for (const std::vector<method::ResponsePoint>& head : layer.head_response) {
        HeadResponse* h = l->add_head_response();
        for (const method::ResponsePoint& point : head) PointToProto(point, h->add_points());
      }
    }
  }
}

method::SensitivityProfile ProfileFromProto(const Profile& p) {
  method::SensitivityProfile out;
  out.model = ModelFromProto(p.model());
  out.model.hash = p.model_hash();  // the stored profile's key, not the model message's copy
  // A response sets every field; one the conversion refuses leaves the defaults, which the
  // profile's validation (method::ValidateProfile) then judges.
  if (StatusOr<method::CalibrationParams> params = CalibrationParamsFromProto(p.params(), "params");
      params.ok()) {
    static_cast<method::CalibrationParams&>(out.params) = *std::move(params);
  }
  out.params.data_source = p.data_source();
  out.params.data_domain = p.data_domain();
  for (const LayerSensitivity& l : p.layers()) {
    method::LayerSensitivity layer;
    layer.layer = l.layer();
    layer.mean_kl = l.mean_kl();
    layer.std_error = l.std_error();
    layer.count = l.count();
    layer.per_sample_mean.assign(l.per_sample_mean().begin(), l.per_sample_mean().end());
    for (const ResponsePoint& r : l.response()) layer.response.push_back(PointFromProto(r));
    for (const HeadResponse& h : l.head_response()) {
      std::vector<method::ResponsePoint>& head = layer.head_response.emplace_back();
      for (const ResponsePoint& r : h.points()) head.push_back(PointFromProto(r));
    }
    out.layers.push_back(std::move(layer));
  }
  out.created_at = method::FormatIso8601Utc(
      std::chrono::system_clock::time_point(std::chrono::seconds(p.create_time().seconds())));
  out.tool_version = p.tool_version();
  if (p.has_stability()) {
    const ProfileStability& s = p.stability();
    method::ProfileStability st{.seed = s.seed(),
                                .resamples = s.resamples(),
                                .level = s.level(),
                                .ratio = s.ratio(),
                                .tolerance = s.tolerance()};
    for (const LayerStability& l : s.layers()) {
      st.layers.push_back({.layer = l.layer(),
                           .kl_low = l.kl_low(),
                           .kl_high = l.kl_high(),
                           .share = l.share(),
                           .share_low = l.share_low(),
                           .share_high = l.share_high()});
    }
    st.rank_correlation_median = s.rank_correlation_median();
    st.rank_correlation_low = s.rank_correlation_low();
    st.top_layer = s.top_layer();
    st.top_layer_frequency = s.top_layer_frequency();
    st.max_share_deviation = s.max_share_deviation();
    st.stable = s.stable();
    out.stability = std::move(st);
  }
  if (p.has_verification()) {
    const ProfileVerification& v = p.verification();
    method::ProfileVerification pv{.fraction = v.fraction(),
                                   .tasks_verified = static_cast<uint64_t>(v.tasks_verified()),
                                   .tasks_unverified = static_cast<uint64_t>(v.tasks_unverified()),
                                   .tasks_recomputed = static_cast<uint64_t>(v.tasks_recomputed())};
    for (const ProfileVerification::Disagreement& d : v.disagreements()) {
      pv.disagreements.push_back(
          {.sample = static_cast<uint32_t>(d.sample()),
           .layer = static_cast<uint32_t>(d.layer()),
           .outvoted_worker = d.outvoted_worker(),
           .agreeing_workers = {d.agreeing_workers().begin(), d.agreeing_workers().end()}});
    }
    out.verification = std::move(pv);
  }
  return out;
}

}  // namespace ripplekv::v1
