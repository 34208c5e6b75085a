// The individual transformations behind weights::apply(). Each takes the input weight and `ctx`, the
// prefix every error message starts with ("slice 0:10,::2 on 'blk.0.attn_q.weight' [64,64]"), and
// returns a new owning weight; the input is only read.
#pragma once

#include <string>

#include "gantry/core/status.h"
#include "gantry/weights/transform.h"
#include "gantry/weights/weight.h"

namespace gantry::weights::detail {

Result<Weight> cast_weight(const Weight& in, DType to, const std::string& ctx);
Result<Weight> transpose_weight(const Weight& in, const std::vector<int>& perm, const std::string& ctx);
Result<Weight> reshape_weight(const Weight& in, const std::vector<int64_t>& shape, const std::string& ctx);
Result<Weight> slice_weight(const Weight& in, const std::vector<SliceDim>& dims, const std::string& ctx);
Result<Weight> scale_weight(const Weight& in, double factor, const std::string& ctx);
Result<Weight> quantize_weight(const Weight& in, model::GgmlType to, const std::string& ctx);
Result<Weight> dequantize_weight(const Weight& in, const std::string& ctx);

// A plain weight's element type, or an error naming `ctx` when the weight is block-quantised.
Result<DType> plain_type(const Weight& in, const std::string& ctx);

// An owning weight named like `in` with a fresh zero-filled tensor of `type` and `shape`.
Result<Weight> make_plain(const std::string& name, DType type, const Shape& shape, const std::string& ctx);

}  // namespace gantry::weights::detail
