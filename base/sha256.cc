#include "base/sha256.h"

#include <openssl/evp.h>

#include <array>

namespace ripplekv {

std::string Sha256Hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> hash{};
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), hash.data(), &size, EVP_sha256(), nullptr) != 1) {
    hash.fill(0);
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (size_t i = 0; i < 32; ++i) {
    out.push_back(kDigits[hash[i] >> 4]);
    out.push_back(kDigits[hash[i] & 15]);
  }
  return out;
}

}  // namespace ripplekv
