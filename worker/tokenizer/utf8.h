#pragma once
// UTF-8 helpers with llama.cpp's exact leniency rules, and GPT-2's byte <-> unicode mapping.
// All functions are pure and thread-safe.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ripplekv::worker {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the UTF-8 sequence that `lead` starts, from its high nibble only (1 for ASCII and for
// stray continuation bytes, 2 for 0xC_/0xD_, 3 for 0xE_, 4 for 0xF_), as llama.cpp's
// unicode_len_utf8. Used to cut text into "characters" without validating it.
size_t Utf8SequenceLength(uint8_t lead);

// Decodes `text` into code points as llama.cpp's unicode_cpts_from_utf8 does: a byte that does not
// start a complete sequence (stray continuation byte, truncated sequence, 0xF8..0xFF) becomes
// U+FFFD and decoding resumes at the next byte. Like llama.cpp, overlong forms and surrogates are
// accepted as decoded. Unlike llama.cpp (which throws later), a 4-byte form above U+10FFFF becomes
// U+FFFD.
std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text);

// Appends the UTF-8 encoding of `cpt` (1..4 bytes). Surrogates are encoded as 3 bytes like any
// other code point (llama.cpp round-trips them); values above U+10FFFF append U+FFFD.
void AppendUtf8(uint32_t cpt, std::string* out);

// GPT-2 byte-level mapping: every byte maps to one printable code point (UTF-8 encoded here);
// printable Latin-1 bytes map to themselves, the others to U+0100 + n.
const std::string& ByteToUnicode(uint8_t byte);

// Inverse of ByteToUnicode for one code point; -1 when `cpt` is not the image of a byte.
int UnicodeToByte(uint32_t cpt);

}  // namespace ripplekv::worker
