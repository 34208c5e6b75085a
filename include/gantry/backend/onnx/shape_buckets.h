// Shape buckets for dynamic dimensions (kapsl's bucket_dim_granularity / bucket_max_dims): a request's
// dynamic dimension is rounded up to a multiple of the granularity (at most its bound), its inputs padded
// with zeros to that size and the outputs trimmed back, so that a few sessions, each specialised for one
// bucket's shapes (with its own memory pattern), serve every size. Which input may be padded along which
// named dimension, and which output is trimmed along which, the manifest declares (io.inputs[].bucket_dims,
// io.outputs[].bucket_dims): only a model whose rows (or positions) do not influence each other may be
// padded, and only its author knows that.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gantry/backend/model.h"
#include "gantry/core/status.h"
#include "gantry/core/tensor.h"

namespace gantry::onnx {

struct BucketRules {
  int64_t granularity = 0;                         // 0: no bucketing
  std::map<std::string, int64_t> max_dims;         // a bucket never exceeds these sizes
  std::vector<std::set<std::string>> input_dims;   // per model input: dims it may be padded along
  std::vector<std::set<std::string>> output_dims;  // per model output: dims trimmed back to the request's
  bool active() const;
};

// The bucket of one request: every padded dim's size in the bucket and in the request. Empty `sizes`
// when nothing is padded (no input has a bucketed dim).
struct Bucket {
  std::map<std::string, int64_t> sizes;
  std::map<std::string, int64_t> request;
  bool pads() const { return sizes != request; }
};

// The bucket for inputs given in the model's input order. InvalidArgument when two inputs disagree on a
// bucketed dim.
Result<Bucket> bucket_for(const BucketRules& rules, const std::vector<backend::TensorInfo>& inputs,
                          const backend::NamedTensor* const* ordered);

// The shape `t` takes in `bucket` along the dims `dims` of `info`.
Shape bucket_shape(const backend::TensorInfo& info, const std::set<std::string>& dims, const Shape& shape,
                   const std::map<std::string, int64_t>& sizes);

// A zero-filled tensor of `shape` (each dim >= t's) with `t` in its leading corner; a copy of t when equal.
Result<Tensor> pad_to(ConstTensorView t, const Shape& shape);
// The leading corner of `t` of `shape` (each dim <= t's).
Result<Tensor> trim_to(ConstTensorView t, const Shape& shape);

}  // namespace gantry::onnx
