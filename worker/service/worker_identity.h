#pragma once
// The worker's id at the scheduler when no --id is given: HOST-DEVICE-N, unique among the workers
// one user runs on a host and stable across restarts of each (README, "The calibration service").
//
// N is the lowest slot whose lock file STATE_DIR/worker-HOST-DEVICE-N.lock the process can hold
// with flock(LOCK_EX | LOCK_NB). The lock lives as long as the WorkerIdentity that holds it (the
// whole process, in the daemon); the kernel drops it when the process ends, however it ends
// (kill -9 included), so a restarted worker gets the same N back while its siblings keep theirs:
// two workers on one host are HOST-cpu-0 and HOST-cpu-1, and each keeps its id when restarted.
// The host is part of the file name so that a state directory shared between hosts (an NFS home)
// still gives each host its own slots. Lock files are left in place (removing one would race
// with a process locking it); a locked one holds its owner's pid, for operators.
//
// An explicit id (--id) locks nothing. When the state directory cannot be created or locked, the
// id falls back to HOST-DEVICE-pidPID: unique, but not stable across restarts.

#include <string>
#include <string_view>

#include "base/status.h"

namespace ripplekv::worker {

// The environment the default state directory is taken from (DefaultStateDir); empty = unset.
struct StateDirEnvironment {
  std::string ripplekv_home;   // $RIPPLEKV_HOME
  std::string xdg_state_home;  // $XDG_STATE_HOME
  std::string home;            // $HOME

  // This process's variables.
  static StateDirEnvironment FromProcess();
};

// $RIPPLEKV_HOME/worker when RIPPLEKV_HOME is set, else $XDG_STATE_HOME/ripplekv, else
// $HOME/.local/state/ripplekv; "" when none applies. Relative XDG_STATE_HOME is ignored, as the XDG
// base directory specification says.
std::string DefaultStateDir(const StateDirEnvironment& env);

// This machine's host name (gethostname), "worker" when it has none.
std::string HostName();

// The device as it appears in an id: the worker's device name with ':' replaced by '-' ("cpu",
// "cuda:1" -> "cuda-1"), and any character other than [A-Za-z0-9._-] replaced by '-'.
std::string DeviceIdPart(std::string_view device);

struct IdentityOptions {
  std::string host;       // HostName(), or any name in tests
  std::string device;     // as the worker names it: "cpu", "cuda:1" (DeviceIdPart is applied)
  std::string state_dir;  // where the lock files live; created (mode 0700) when missing
  int max_slots = 1024;   // slots tried before giving up
};

// The id a worker registers with, and the lock that keeps it its own. Move-only; destroying it
// (or the process ending) releases the lock. Not thread-safe; one owner.
class WorkerIdentity {
 public:
  // An id the operator chose (--id): holds nothing.
  static WorkerIdentity Explicit(std::string id);

  // HOST-DEVICE-N with the lowest N in [0, max_slots) whose lock file this call can lock, which
  // it holds until the identity is destroyed. Two calls in one process conflict like two
  // processes (flock locks belong to the open file, and each call opens its own). Errors:
  // InvalidArgument for an empty host, device or state_dir; the errno's code naming the path
  // when the directory cannot be created or a lock file cannot be opened or locked;
  // ResourceExhausted when every slot is held.
  [[nodiscard]] static StatusOr<WorkerIdentity> Allocate(const IdentityOptions& options);

  // HOST-DEVICE-pidPID: unique while the process lives, never stable; holds nothing.
  static WorkerIdentity PerProcess(std::string_view host, std::string_view device, int pid);

  WorkerIdentity(WorkerIdentity&& other) noexcept;
  WorkerIdentity& operator=(WorkerIdentity&& other) noexcept;
  WorkerIdentity(const WorkerIdentity&) = delete;
  WorkerIdentity& operator=(const WorkerIdentity&) = delete;
  ~WorkerIdentity();

  const std::string& id() const { return id_; }
  // Where the id came from, for the log: "--id", "slot 0, lock PATH", "host, device and pid".
  const std::string& source() const { return source_; }
  int slot() const { return slot_; }                           // -1 unless allocated
  const std::string& lock_path() const { return lock_path_; }  // "" unless allocated

 private:
  WorkerIdentity() = default;
  void Release() noexcept;

  std::string id_;
  std::string source_;
  std::string lock_path_;
  int slot_ = -1;
  int fd_ = -1;  // the locked file, open while held
};

// What the worker runs as: `explicit_id` when not empty; else Allocate(options); else, when
// that fails, PerProcess with this process's pid and the reason in `fallback_reason` (the
// caller logs it as a warning). Never fails.
struct ChosenIdentity {
  WorkerIdentity identity;
  std::string fallback_reason;  // "" unless the id fell back to the pid
};
ChosenIdentity ChooseWorkerIdentity(const std::string& explicit_id, const IdentityOptions& options);

}  // namespace ripplekv::worker
