#pragma once
// The memory a worker may use by default (docs/MEMORY.md, "The worker's limit"): the machine's
// physical memory, or less where the process's control group caps it, as a container's memory
// limit (Kubernetes, Docker, a systemd MemoryMax=, a Slurm job's cgroup) does. A worker that
// plans for the node's memory inside a 64 GiB pod is killed by the kernel, not refused a job.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace ripplekv::worker {

// A memory limit and where it was read.
struct MemoryLimit {
  int64_t bytes = 0;
  std::string source;  // "physical memory" or the cgroup file, e.g. "/sys/fs/cgroup/memory.max"
};

// The tightest memory limit of the cgroup the process is in, given the text of
// /proc/self/cgroup and /proc/self/mountinfo, with mount points looked up under `root`: cgroup
// v2's memory.max, else v1's memory.limit_in_bytes, the smallest of the cgroup's and its
// ancestors' up to the mount. nullopt when no limit is set ("max", or v1's near-2^63 value) or
// nothing can be read; malformed text counts as nothing read.
std::optional<MemoryLimit> CgroupMemoryLimit(std::string_view proc_self_cgroup,
                                             std::string_view proc_self_mountinfo,
                                             const std::filesystem::path& root = "/");

// The machine's physical memory (sysconf), lowered to this process's cgroup limit when there is
// one; bytes 0 when neither can be read.
MemoryLimit DefaultMemoryLimit();

}  // namespace ripplekv::worker
