#pragma once
// The devices this build and this machine offer, and their allocators. The CPU is always there;
// CUDA devices exist when the build has the CUDA backend (RIPPLEKV_CUDA, on wherever the toolkit
// is found) and the machine has a driver and a GPU.

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "kernels/ops/op_context.h"
#include "kernels/tensor/allocator.h"
#include "kernels/tensor/device.h"

namespace ripplekv::kernels {

// A device and its ordinal among the devices of its kind ("cuda:1" is {kCuda, 1}).
struct DeviceSpec {
  Device device = Device::kCpu;
  int ordinal = 0;
};

// Parses "cpu", "cuda" (ordinal 0) or "cuda:N". InvalidArgument naming the text otherwise.
[[nodiscard]] StatusOr<DeviceSpec> ParseDevice(std::string_view text);
// "cpu", "cuda:N".
std::string DeviceSpecName(const DeviceSpec& spec);

// How many devices of `device`'s kind are usable: 1 for the CPU; for CUDA, the visible GPUs (0
// without the backend, a driver or a GPU). Thread-safe; asks the driver once per process.
int DeviceCount(Device device);
// Why no device of that kind is usable ("" when one is), for error messages and test skips,
// e.g. "this build has no CUDA backend" or the CUDA runtime's own words.
std::string DeviceUnavailableReason(Device device);

// The first device fault of this process ("" when there was none): a kernel that could not launch
// or faulted, a failed copy, synchronization or cuBLAS call (kernels/ops/cuda/cuda_device.h). A
// faulted CUDA context stays unusable: every later op on the device fails (Unavailable, naming the
// fault), and a process that serves work should finish reporting and exit (the worker does).
std::string DeviceFault();

// The allocator of `spec` (lives for the process). FailedPrecondition naming the reason when the
// device is not usable, OutOfRange when the ordinal is not below DeviceCount.
[[nodiscard]] StatusOr<Allocator*> DeviceAllocator(const DeviceSpec& spec);

// What one thread of work needs to run ops on a device: the OpContext (for CUDA a stream, a
// cuBLAS handle bound to it and a GEMM workspace, all owned here) and an allocator on that stream
// (for CUDA stream-ordered: temporaries are allocated and freed without waiting for the device).
// A CPU session owns nothing and allocates on the host. Ops queued on the context run in order;
// copies to the host through the allocator wait for them. Tensors from the allocator must be
// freed before the session is destroyed. Move-only; destruction waits for the queued work, then
// frees. Use one session per thread.
class DeviceSession {
 public:
  // cuBLAS's recommended workspace on Hopper-class GPUs.
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;

  // FailedPrecondition naming the reason when the device is unusable (no backend, no driver, no
  // GPU, cuBLAS missing), OutOfRange for an ordinal past the device count. num_threads >= 1 (CPU
  // threads of the CPU ops; host-side work of a device session).
  [[nodiscard]] static StatusOr<DeviceSession> Open(
      const DeviceSpec& spec, int num_threads, size_t workspace_bytes = kDefaultWorkspaceBytes);

  DeviceSession(DeviceSession&& other) noexcept;
  DeviceSession& operator=(DeviceSession&& other) noexcept;
  DeviceSession(const DeviceSession&) = delete;
  DeviceSession& operator=(const DeviceSession&) = delete;
  ~DeviceSession();

  const DeviceSpec& spec() const { return spec_; }
  const OpContext& context() const { return ctx_; }
  Allocator& allocator() const { return *allocator_; }
  // Waits for the queued work; Unavailable naming the device fault (DeviceFault) for an
  // asynchronous error (a faulting kernel), which leaves the device unusable for this process.
  [[nodiscard]] Status Synchronize() const;

  // The device's memory, bytes: in use (by every process on it) and total. NotFound for the CPU,
  // whose memory the process measures itself; Internal with the runtime's message otherwise.
  struct Memory {
    int64_t used_bytes = 0;
    int64_t total_bytes = 0;
  };
  [[nodiscard]] StatusOr<Memory> DeviceMemory() const;

 private:
  DeviceSession() = default;
  void Release() noexcept;

  DeviceSpec spec_;
  OpContext ctx_;
  Allocator* allocator_ = nullptr;  // owned_allocator_, or a process-wide one
  std::unique_ptr<Allocator> owned_allocator_;
};

}  // namespace ripplekv::kernels
