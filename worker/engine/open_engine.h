#pragma once
// Opening a model for work, the one way every program does it (`ripplekv`'s commands,
// ripplekv-worker, the benchmarks): the device first (a machine without one fails before the
// model is read), then under --tp the tensor-parallel group's device, the weights, the tokenizer,
// this rank's shard, and a Transformer over them.

#include <memory>
#include <string>

#include "base/status.h"
#include "kernels/ops/devices.h"
#include "kernels/tensor/dtype.h"
#include "worker/engine/tp_group.h"
#include "worker/engine/transformer.h"
#include "worker/model/model.h"
#include "worker/model/model_loader.h"
#include "worker/tokenizer/tokenizer.h"

namespace ripplekv::worker {

// How the ranks of `mpirun` form tensor-parallel groups (docs/DESIGN.md §3.2).
enum class TpLayout {
  kWholeWorld,    // all ranks are one group of `tp` (the commands, the benchmarks)
  kWorkerGroups,  // groups of `tp` consecutive ranks, each a worker with a task channel
};

struct EngineOptions {
  std::string weights = "stored";       // host weights: stored (as in the file) or f32
  std::string device = "cpu";           // cpu, cuda (the first GPU) or cuda:N
  std::string device_weights = "bf16";  // weights on a device: bf16 or f32
  int tp = 1;  // ranks the model is split over (> 1: under `mpirun`, in a build with MPI)
  TpLayout tp_layout = TpLayout::kWholeWorld;
  int num_threads = 1;  // CPU threads of the device session and the Transformer, >= 1
};

// A model opened for work. Held by unique_ptr: the Transformer points into `model` (or the
// group's shard), `device` and the group.
struct Engine {
  std::string path;
  WeightStorage storage = WeightStorage::kStored;  // EngineOptions::weights, parsed
  kernels::DeviceSpec device_spec;                 // the device this rank runs on
  kernels::DType device_weights = kernels::DType::kBF16;  // EngineOptions::device_weights, parsed
  Model model;
  std::unique_ptr<Tokenizer> tokenizer;
  // The device the Transformer runs on (its stream, BLAS handle, allocator); outlives it.
  std::unique_ptr<kernels::DeviceSession> device;
  // With tp > 1: this rank's group (its communicators and its shard of `model`).
  std::unique_ptr<TpGroup> tp;
  std::unique_ptr<Transformer> transformer;
  double load_seconds = 0.0;  // reading the model through making the Transformer (not the device)

  // This rank's weights: the group's shard, or the whole model.
  const Model& held() const { return tp ? tp->shard : model; }
  // Whether this process reports results: always, except on the ranks other than 0 of a group.
  bool primary() const { return tp == nullptr || tp->rank == 0; }
};

// Opens the GGUF file or Hugging Face directory at `path` as `options` say. With tp > 1 the
// process must be a rank of `mpirun` (ranks other than 0 log warnings only); on CUDA, rank r of a
// node uses cuda:(N + r) for device cuda:N. Logs nothing itself. Errors: InvalidArgument naming a
// bad option value; FailedPrecondition with the reason when the device is not usable (no CUDA
// backend, driver or GPU), or tp > 1 without mpirun, MPI or (on a device) NCCL; OutOfRange for an
// ordinal past the device count; those of reading the model and its tokenizer.
[[nodiscard]] StatusOr<std::unique_ptr<Engine>> OpenEngine(const std::string& path,
                                                           const EngineOptions& options);

// The tokenizer of the model at `path` alone (fast; no weights): from the GGUF file's metadata,
// or a Hugging Face directory's tokenizer.json and tokenizer_config.json.
[[nodiscard]] StatusOr<std::unique_ptr<Tokenizer>> OpenTokenizer(const std::string& path);

}  // namespace ripplekv::worker
