#include "worker/tokenizer/utf8.h"

#include <array>

namespace ripplekv::worker {

namespace {

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// GPT-2's bytes_to_unicode(): bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to themselves; the
// remaining 68 bytes map, in increasing order, to U+0100, U+0101, ...
struct ByteTables {
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 512> cpt_to_byte;  // every image is below U+0200

  ByteTables() {
    cpt_to_byte.fill(-1);
    auto keeps_itself = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cpt = keeps_itself(b) ? static_cast<uint32_t>(b) : 256u + n++;
      AppendUtf8(cpt, &byte_to_utf8[b]);
      cpt_to_byte[cpt] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables* const tables = new ByteTables();
  return *tables;
}

}  // namespace

size_t Utf8SequenceLength(uint8_t lead) {
  static constexpr size_t kLookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLookup[lead >> 4];
}

std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b0 = s[i];
    if (b0 < 0x80) {
      out.push_back(b0);
      i += 1;
    } else if ((b0 & 0x40) == 0) {  // stray continuation byte
      out.push_back(kReplacementChar);
      i += 1;
    } else if ((b0 & 0x20) == 0) {
      if (i + 1 < n && IsContinuation(s[i + 1])) {
        out.push_back(((b0 & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu));
        i += 2;
      } else {
        out.push_back(kReplacementChar);
        i += 1;
      }
    } else if ((b0 & 0x10) == 0) {
      if (i + 2 < n && IsContinuation(s[i + 1]) && IsContinuation(s[i + 2])) {
        out.push_back(((b0 & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu));
        i += 3;
      } else {
        out.push_back(kReplacementChar);
        i += 1;
      }
    } else if ((b0 & 0x08) == 0) {
      if (i + 3 < n && IsContinuation(s[i + 1]) && IsContinuation(s[i + 2]) &&
          IsContinuation(s[i + 3])) {
        const uint32_t cpt = ((b0 & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) |
                             ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
        out.push_back(cpt <= 0x10FFFF ? cpt : kReplacementChar);
        i += 4;
      } else {
        out.push_back(kReplacementChar);
        i += 1;
      }
    } else {  // 0xF8..0xFF never start a sequence
      out.push_back(kReplacementChar);
      i += 1;
    }
  }
  return out;
}

void AppendUtf8(uint32_t cpt, std::string* out) {
  if (cpt <= 0x7F) {
    out->push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out->push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out->push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0x10FFFF) {
    out->push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    AppendUtf8(kReplacementChar, out);
  }
}

const std::string& ByteToUnicode(uint8_t byte) { return Tables().byte_to_utf8[byte]; }

int UnicodeToByte(uint32_t cpt) {
  return cpt < Tables().cpt_to_byte.size() ? Tables().cpt_to_byte[cpt] : -1;
}

}  // namespace ripplekv::worker
