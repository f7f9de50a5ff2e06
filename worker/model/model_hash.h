#pragma once
// Model identity: the SHA-256 of a model's weight files (the definition is in docs/MODEL_HASH.md,
// and can be recomputed with coreutils). Profiles and budget maps are keyed by it, and a worker
// refuses a job whose hash differs from the model it loaded.
//
// All functions stream files through SHA-256 in kHashChunkBytes reads (memory use is constant,
// whatever the file size), are thread-safe, and return lowercase hex digests.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ripplekv::worker {

// Read size of the streaming hash, bytes.
inline constexpr size_t kHashChunkBytes = 4u << 20;

// SHA-256 of `bytes`, lowercase hex (64 characters). Fails (Internal) only if OpenSSL does.
StatusOr<std::string> Sha256Hex(std::string_view bytes);

// SHA-256 of the file at `path`, equal to the first field of `sha256sum path`.
// Errors: InvalidArgument (not a regular file), FileErrnoStatus's for a failed open/stat/read
// (NotFound when there is no such file; docs/ERRORS.md).
StatusOr<std::string> Sha256FileHex(const std::string& path);

// The model hash of `path`:
//  - a regular file (a GGUF): the SHA-256 of the file;
//  - a directory with model.safetensors: the SHA-256 of that file;
//  - a directory with model.safetensors.index.json: the SHA-256 of the text made of one line
//    "<sha256 hex of shard>  <shard file name>\n" per shard the index names, in byte-wise file
//    name order (`sha256sum` output format).
// The weight files are chosen exactly as SafetensorsModelFiles::Open() chooses them. Errors:
// NotFound (no such path; no weight files in the directory), InvalidArgument (malformed index).
StatusOr<std::string> ModelHash(const std::string& path);

// The SHA-256 line of one file of a model.
struct FileDigest {
  std::string name;  // relative to the model directory (the base name for a file)
  uint64_t size_bytes = 0;
  std::string sha256;          // lowercase hex
  bool in_model_hash = false;  // a weight file, part of ModelHash()
};

struct ModelDigest {
  std::string model_hash;         // == ModelHash(path)
  std::vector<FileDigest> files;  // byte-wise sorted by name
};

// Hashes every file of a model, each once, for `ripplekv info`: for a directory, every regular
// file at its top level except hidden ones (names starting with '.'), so tokenizer and config
// files, which calibration results also depend on, are listed next to the weights; for a single
// file, that file. Subdirectories are not descended into. Errors as for ModelHash().
StatusOr<ModelDigest> ModelFilesDigest(const std::string& path);

}  // namespace ripplekv::worker
