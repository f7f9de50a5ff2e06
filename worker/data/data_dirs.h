#pragma once
// The directories a worker may read calibration data from (`ripplekv-worker --data-dir DIR`,
// docs/DATA.md "Data directories"). A job names its data file by path; the worker reads it only
// when the path, with every symlink and ".." resolved, lies inside one of these directories and is
// a regular file. Jobs come from clients, so nothing else on the worker's file system is theirs to
// read, and errors returned here are for the worker's own log: callers show clients a generic
// message (kDataPathRefused), never these details.
//
// Containment is judged on the resolved path, component-wise: "/data/x" contains "/data/x/a" but
// not "/data/xyz". Consequences, by decision:
//   * a symlink inside a data directory that points outside is refused;
//   * a symlink outside that points inside is accepted (what is read is the file inside, which the
//     operator allowed; the link grants nothing more);
//   * hard links and bind mounts inside a directory count as inside: a data directory must be
//     writable only by people trusted to choose what workers read.
//
// Reading (ReadFile) opens the file by walking the resolved path's components from a descriptor of
// the data directory held since Open, each with O_NOFOLLOW: a component swapped for a symlink
// after Resolve fails the read instead of being followed, and the data directory itself cannot be
// swapped after Open. What remains: a regular file swapped for another regular file (or a hard
// link) inside the directory between Resolve and the read is read; that is the directory writers'
// choice, as above.
//
// Thread-safety: immutable after Open; every method may be called concurrently. Copies share the
// held descriptors.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ripplekv::worker {

// The one message clients get for a data path this worker will not read, whatever the reason
// (missing, outside the data directories, not a regular file, unreadable, no directories
// configured): it says nothing about the file. No quote characters, so it reads the same after
// the scheduler escapes a worker's message.
inline constexpr std::string_view kDataPathRefused =
    "its calibration data path is not readable under the data directories of this worker";

class DataDirs {
 public:
  // No directories: every path is refused (the secure default of a worker without --data-dir).
  DataDirs() = default;

  // Resolves each of `dirs` (realpath) and holds a descriptor of it. Errors, naming the directory
  // as given: those of FileErrnoStatus for a failed realpath/open (NotFound for a missing one),
  // InvalidArgument for an empty name or one that is not a directory.
  [[nodiscard]] static StatusOr<DataDirs> Open(const std::vector<std::string>& dirs);

  // The resolved directories, in the order given.
  std::vector<std::string> dirs() const;
  bool empty() const { return state_ == nullptr; }

  // The resolved (realpath) form of `path` when it lies inside a data directory and is a regular
  // file. Errors (details for the log): FailedPrecondition (no data directories), InvalidArgument
  // (not absolute, not a regular file), PermissionDenied (resolves outside the data directories),
  // FileErrnoStatus's for a failed realpath/stat (NotFound for a missing file).
  [[nodiscard]] StatusOr<std::string> Resolve(const std::string& path) const;

  // The contents of `path` after Resolve accepts it, opened as described at the top of this file.
  // Errors: those of Resolve, FileErrnoStatus's for a failed open/fstat/read (ELOOP: a component
  // became a symlink), InvalidArgument (no longer a regular file), ResourceExhausted (larger than
  // `max_bytes`, nothing allocated for it).
  [[nodiscard]] StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes) const;

 private:
  struct State;
  std::shared_ptr<const State> state_;  // null: no directories
};

}  // namespace ripplekv::worker
