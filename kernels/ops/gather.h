#pragma once
// Row gathers: the rows of the residual stream whose logits or layer inputs a caller wants, and
// the embedding lookup. Ops like every other, so the engine and its callers never copy tensor
// memory themselves (a device backend implements these next to its other kernels).

#include <cstdint>
#include <span>

#include "base/status.h"
#include "kernels/tensor/tensor.h"
#include "kernels/dequant/weight.h"
#include "kernels/ops/op_context.h"

namespace ripplekv::kernels {

// out[i, :] = src[rows[i], :] for i in [0, rows.size()). src: [n, d]; out: [rows.size(), d];
// rows may repeat and come in any order. out must not overlap src. InvalidArgument naming the
// tensor on a shape mismatch, or the index and value of a row outside [0, n) (nothing written);
// on a device, where the rows live in device memory, they are not checked (the caller's contract).
[[nodiscard]] Status GatherRows(const OpContext& ctx, const ConstTensorView& src,
                                Int32View rows, const TensorView& out);

// The rows [first, first + out.dim(0)) of src ([n, d]) into out: GatherRows over a range.
[[nodiscard]] Status CopyRows(const OpContext& ctx, const ConstTensorView& src, int64_t first,
                              const TensorView& out);

// out[i, :] = the fp32 values of row tokens[i] of `table` ([vocab, d], any stored type: exactly
// the values Weight::ExpandRows gives). out: [tokens.size(), d]. InvalidArgument naming the index
// and the id of a token outside [0, vocab), or the tensor on a shape mismatch (nothing written).
[[nodiscard]] Status EmbeddingLookup(const OpContext& ctx, const Weight& table,
                                     Int32View tokens, const TensorView& out);

}  // namespace ripplekv::kernels
