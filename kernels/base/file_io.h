#pragma once
// Whole-file reads with a size bound, and atomic whole-file writes (temp file + fsync + rename),
// for the small JSON documents of this folder (profiles, budget maps). Thread-safe; no shared
// state.

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/base/status.h"

namespace ripplekv {

// The contents of the file at `path`. Errors: NotFound (no such file), InvalidArgument (not a
// regular file), ResourceExhausted (larger than `max_bytes`; nothing is allocated for it), others
// mapped from errno. Every message names `path`.
[[nodiscard]] StatusOr<std::string> ReadFileBounded(const std::string& path, uint64_t max_bytes);

// Replaces the file at `path` with `contents` so that a reader (or a crash at any point) sees
// either the old file or the whole new one, never a torn write: the bytes go to a temporary file in
// the same directory, which is fsync'ed and then renamed over `path`; the directory is fsync'ed
// last. The temporary file is removed on failure. Errors are mapped from errno and name the path.
[[nodiscard]] Status WriteFileAtomically(const std::string& path, std::string_view contents);

}  // namespace ripplekv
