#pragma once
// File-system helpers shared by every reader in the tree: one path join, the one errno -> Status
// mapping for failed file-system calls, whole-file reads with a size bound, a bounded prefix read
// for format sniffing, and atomic whole-file writes (temp file + fsync + rename). Which failure
// gets which status code is docs/ERRORS.md. Thread-safe; no shared state.

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ripplekv {

// `dir` and `name` joined by exactly one '/' ("a" + "b" and "a/" + "b" give "a/b"); an empty `dir`
// gives `name` unchanged. `name` is appended as is: no normalization, no special case for an
// absolute `name`.
[[nodiscard]] std::string JoinPath(std::string_view dir, std::string_view name);

// The Status for a failed file-system call (open, fstat/stat, read, write, mmap, ...) on `path`:
// the one errno -> code table of docs/ERRORS.md, used by every reader so that the same failure
// gets the same code everywhere:
//   ENOENT, ENOTDIR                                     -> NotFound
//   EACCES, EPERM, EROFS                                -> PermissionDenied
//   EISDIR, ENAMETOOLONG, ELOOP, EINVAL                 -> InvalidArgument
//   EFBIG, EOVERFLOW, ENOMEM, ENOSPC, EDQUOT, EMFILE, ENFILE -> ResourceExhausted
//   EIO, EAGAIN, EINTR, EBUSY, ETIMEDOUT, ESTALE        -> Unavailable (transient: retry)
//   anything else                                       -> absl::ErrnoToStatus's code
// Message: "<path>: cannot <action>: <strerror>", e.g. "model.gguf: cannot stat: Input/output
// error".
[[nodiscard]] Status FileErrnoStatus(int error_number, std::string_view path,
                                     std::string_view action);

// The contents of the file at `path`. Errors (docs/ERRORS.md): those of FileErrnoStatus for a
// failed open/fstat/read (NotFound when there is no such file), InvalidArgument (not a regular
// file), ResourceExhausted (larger than `max_bytes`; nothing is allocated for it). Every message
// names `path`. A file that shrinks while it is read gives the bytes that were there.
[[nodiscard]] StatusOr<std::string> ReadFileBounded(const std::string& path, uint64_t max_bytes);

// The first min(size, `max_bytes`) bytes of the regular file at `path`: for sniffing a format's
// magic number without reading a large file. Errors as ReadFileBounded, except that the file's
// size is never one.
[[nodiscard]] StatusOr<std::string> ReadFilePrefix(const std::string& path, uint64_t max_bytes);

// Replaces the file at `path` with `contents` so that a reader (or a crash at any point) sees
// either the old file or the whole new one, never a torn write: the bytes go to a temporary file in
// the same directory, which is fsync'ed and then renamed over `path`; the directory is fsync'ed
// last. The temporary file is removed on failure. Errors are FileErrnoStatus's and name the path.
[[nodiscard]] Status WriteFileAtomically(const std::string& path, std::string_view contents);

}  // namespace ripplekv
