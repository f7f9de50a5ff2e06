#pragma once
// SHA-256 of bytes in memory (OpenSSL EVP), for content ids and integrity checks: the store's
// budget-map digests, the agent's file checks, rollout node ranks. Streaming a large file is
// worker/model/model_hash.h's job.
//
// Thread-safe (a pure function).

#include <string>
#include <string_view>

namespace ripplekv {

// SHA-256 of `bytes` as 64 lowercase hex digits. OpenSSL's digest of memory fails only in a broken
// build; the result is then 64 zeros, which is no real content's digest, so a caller comparing
// digests never gets a wrong match.
std::string Sha256Hex(std::string_view bytes);

}  // namespace ripplekv
