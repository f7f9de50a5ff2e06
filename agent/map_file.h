#pragma once
// The files a serving node's agent keeps (docs/ROLLOUTS.md, "The agent"): the budget map FILE in
// the node's format, and beside it the sidecar FILE.state.json that says which map version FILE
// holds:
//   {"model_hash": H, "version": V, "rollout_id": R, "format": F, "sha256": <hex of FILE's bytes>,
//    "applied": bool}
// The sidecar is trusted only while FILE's bytes still hash to its "sha256", so a FILE replaced or
// edited by anyone else (or torn by a crash between the two writes) reads as holding nothing.
//
// Every change is durable when the call returns: files are replaced atomically (a temporary file
// in the same directory, written and fsync'ed, renamed over the target, the directory fsync'ed;
// WriteFileAtomically()) and removals fsync the directory.
//
// Thread-safe (no shared state); two callers on the same paths race as the file system does.

#include <string>
#include <string_view>

#include "base/sha256.h"  // Sha256Hex, for the sidecar's check
#include "base/status.h"

namespace ripplekv::agent {

// Largest map FILE or sidecar read back, bytes (maps are a few KiB).
inline constexpr uint64_t kMaxMapFileBytes = 64ull << 20;

// What the sidecar records.
struct HeldMap {
  std::string model_hash;
  std::string version;     // "" : holds nothing
  std::string rollout_id;  // the rollout that assigned `version`; may be empty
  std::string format;      // "native", "kvpress" or "trtllm"
  std::string sha256;      // lowercase hex SHA-256 of FILE's bytes (64 digits)
  bool applied = false;    // the apply hook succeeded (or there is none) after FILE was written

  friend bool operator==(const HeldMap&, const HeldMap&) = default;
};

// What ReadHeldMap() found.
struct HeldMapRead {
  HeldMap held;  // held.version "" : holds nothing
  // Why nothing is held although a file was there (a malformed sidecar, a FILE that does not
  // match it, another model or format), naming the file; empty when held, or when neither file
  // exists.
  std::string reason;
  // Whether FILE or its sidecar exists (so there is something to remove).
  bool files_exist = false;
};

// FILE's sidecar path: `map_path` + ".state.json".
[[nodiscard]] std::string SidecarPath(std::string_view map_path);

// The sidecar document of `held` (one line of JSON and a newline).
[[nodiscard]] std::string HeldMapToJson(const HeldMap& held);
// Parses a sidecar document: every field above with its JSON type (unknown fields are ignored).
// InvalidArgument naming the problem.
[[nodiscard]] StatusOr<HeldMap> HeldMapFromJson(std::string_view json_text);

// What the node holds for `model_hash` in `format` (a BudgetFormatName()): the sidecar's map when
// FILE exists, its bytes hash to the sidecar's sha256 and the sidecar names the same model and
// format; otherwise nothing. Never fails: anything unreadable or malformed reads as nothing held,
// with `reason` saying why.
[[nodiscard]] HeldMapRead ReadHeldMap(const std::string& map_path, std::string_view model_hash,
                                      std::string_view format);

// Replaces FILE (then its sidecar) with `contents` (then HeldMapToJson(held)) durably, in that
// order, so that a crash between the two leaves a FILE that does not match the old sidecar: it
// reads as nothing held. `held.sha256` is set from `contents` here. Errors: WriteFileAtomically's
// (naming the path).
[[nodiscard]] Status WriteMapFile(const std::string& map_path, std::string_view contents,
                                  HeldMap held);
// Replaces the sidecar only (e.g. to record `applied`). Errors as WriteMapFile().
[[nodiscard]] Status WriteSidecar(const std::string& map_path, const HeldMap& held);

// Removes `path` if it exists and fsyncs its directory. A missing file is not an error. Errors:
// FileErrnoStatus's for a failed unlink, or a directory that cannot be opened or synced.
[[nodiscard]] Status RemoveFileDurably(const std::string& path);

}  // namespace ripplekv::agent
