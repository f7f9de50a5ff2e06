#include "kernels/dequant/ggml_types.h"
#include "base/strings.h"

#include <iterator>
#include <string>

#include "fmt/format.h"
#include "base/check.h"

namespace ripplekv::kernels {

namespace {

// Names of GGML type ids that exist in the format but that RippleKV does not decode, so an error
// can say "q2_k is not supported" rather than "unknown type 10". Gaps are ids that were removed
// from GGML and never appear in current files.
struct KnownType {
  uint32_t id;
  std::string_view name;
};
constexpr KnownType kKnownUnsupported[] = {
    {4, "q4_2 (removed)"},
    {5, "q4_3 (removed)"},
    {9, "q8_1"},
    {10, "q2_k"},
    {11, "q3_k"},
    {15, "q8_k"},
    {16, "iq2_xxs"},
    {17, "iq2_xs"},
    {18, "iq3_xxs"},
    {19, "iq1_s"},
    {20, "iq4_nl"},
    {21, "iq3_s"},
    {22, "iq2_s"},
    {23, "iq4_xs"},
    {24, "i8"},
    {25, "i16"},
    {26, "i32"},
    {27, "i64"},
    {28, "f64"},
    {29, "iq1_m"},
    {31, "q4_0_4_4 (removed)"},
    {32, "q4_0_4_8 (removed)"},
    {33, "q4_0_8_8 (removed)"},
    {34, "tq1_0"},
    {35, "tq2_0"},
    {36, "iq4_nl_4_4 (removed)"},
    {37, "iq4_nl_4_8 (removed)"},
    {38, "iq4_nl_8_8 (removed)"},
    {39, "mxfp4"},
};

std::string_view KnownUnsupportedName(uint32_t raw_type) {
  for (const KnownType& t : kKnownUnsupported) {
    if (t.id == raw_type) return t.name;
  }
  return {};
}

constexpr std::string_view kSupportedList =
    "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k";

}  // namespace

StatusOr<GgmlTypeTraits> TraitsOf(uint32_t raw_type) {
  switch (raw_type) {
    case static_cast<uint32_t>(GgmlType::kF32):
    case static_cast<uint32_t>(GgmlType::kF16):
    case static_cast<uint32_t>(GgmlType::kBF16):
    case static_cast<uint32_t>(GgmlType::kQ8_0):
    case static_cast<uint32_t>(GgmlType::kQ4_0):
    case static_cast<uint32_t>(GgmlType::kQ4_1):
    case static_cast<uint32_t>(GgmlType::kQ5_0):
    case static_cast<uint32_t>(GgmlType::kQ5_1):
    case static_cast<uint32_t>(GgmlType::kQ4_K):
    case static_cast<uint32_t>(GgmlType::kQ5_K):
    case static_cast<uint32_t>(GgmlType::kQ6_K):
      return TraitsOf(static_cast<GgmlType>(raw_type));
    default:
      break;
  }
  std::string_view known = KnownUnsupportedName(raw_type);
  if (!known.empty()) {
    return absl::UnimplementedError(Cat("ggml tensor type ", raw_type, " (", known,
                                        ") is not supported; supported: ", kSupportedList));
  }
  return absl::InvalidArgumentError(Cat("unknown ggml tensor type id ", raw_type));
}

GgmlTypeTraits TraitsOf(GgmlType type) {
  // Block sizes and byte counts of the GGML block structs (ggml-common.h):
  //   q4_0 {fp16 d; u8 qs[16]}            q4_1 {fp16 d, m; u8 qs[16]}
  //   q5_0 {fp16 d; u8 qh[4]; u8 qs[16]}  q5_1 {fp16 d, m; u8 qh[4]; u8 qs[16]}
  //   q8_0 {fp16 d; i8 qs[32]}
  //   q4_k {fp16 d, dmin; u8 scales[12]; u8 qs[128]}
  //   q5_k {fp16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
  //   q6_k {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d}
  switch (type) {
    case GgmlType::kF32:
      return {"f32", 1, 4};
    case GgmlType::kF16:
      return {"f16", 1, 2};
    case GgmlType::kBF16:
      return {"bf16", 1, 2};
    case GgmlType::kQ4_0:
      return {"q4_0", 32, 18};
    case GgmlType::kQ4_1:
      return {"q4_1", 32, 20};
    case GgmlType::kQ5_0:
      return {"q5_0", 32, 22};
    case GgmlType::kQ5_1:
      return {"q5_1", 32, 24};
    case GgmlType::kQ8_0:
      return {"q8_0", 32, 34};
    case GgmlType::kQ4_K:
      return {"q4_k", 256, 144};
    case GgmlType::kQ5_K:
      return {"q5_k", 256, 176};
    case GgmlType::kQ6_K:
      return {"q6_k", 256, 210};
  }
  RIPPLEKV_CHECK(false && "GgmlType value outside the enum");
  return {};
}

}  // namespace ripplekv::kernels
