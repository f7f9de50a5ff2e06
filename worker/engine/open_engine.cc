#include "worker/engine/open_engine.h"

#include <chrono>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/engine/device_model.h"
#include "worker/model/gguf_reader.h"

namespace ripplekv::worker {

StatusOr<std::unique_ptr<Tokenizer>> OpenTokenizer(const std::string& path) {
  ASSIGN_OR_RETURN(ModelFormat format, DetectModelFormat(path));
  if (format == ModelFormat::kGguf) {
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
    return TokenizerFromGguf(*file);
  }
  const std::filesystem::path dir(path);
  return TokenizerFromHfJson((dir / "tokenizer.json").string(),
                             (dir / "tokenizer_config.json").string());
}

StatusOr<std::unique_ptr<Engine>> OpenEngine(const std::string& path,
                                             const EngineOptions& options) {
  auto engine = std::make_unique<Engine>();
  engine->path = path;
  ASSIGN_OR_RETURN(engine->storage, ParseWeightStorage(options.weights));
  ASSIGN_OR_RETURN(engine->device_spec, kernels::ParseDevice(options.device));
  ASSIGN_OR_RETURN(engine->device_weights, ParseDeviceWeights(options.device_weights));
  const bool whole_world = options.tp_layout == TpLayout::kWholeWorld;
  if (options.tp > 1) {
#if RIPPLEKV_WITH_MPI
    ASSIGN_OR_RETURN(engine->device_spec, TpDevice(options.tp, engine->device_spec, whole_world));
#else
    return absl::FailedPreconditionError(absl::StrCat(
        "--tp ", options.tp, ": this build has no MPI (install Open MPI and rebuild)"));
#endif
  }
  // The device first: a machine without one fails before the model is read.
  ASSIGN_OR_RETURN(kernels::DeviceSession device,
                   kernels::DeviceSession::Open(engine->device_spec, options.num_threads));
  engine->device = std::make_unique<kernels::DeviceSession>(std::move(device));
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(engine->model, LoadModel(path, engine->storage));
  ASSIGN_OR_RETURN(engine->tokenizer, OpenTokenizer(path));
#if RIPPLEKV_WITH_MPI
  if (options.tp > 1) {
    ASSIGN_OR_RETURN(engine->tp, JoinTpGroup(options.tp, *engine->device, engine->model,
                                             /*commands=*/!whole_world));
  }
#endif
  ASSIGN_OR_RETURN(Transformer transformer,
                   Transformer::Create(engine->held(),
                                       {.num_threads = options.num_threads,
                                        .device = engine->device.get(),
                                        .device_weights = engine->device_weights,
                                        .communicator = engine->tp ? engine->tp->model.get()
                                                                   : nullptr}));
  engine->transformer = std::make_unique<Transformer>(std::move(transformer));
  engine->load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return engine;
}

}  // namespace ripplekv::worker
