#include "weights/writer_common.h"

#include <set>

namespace gantry::weights::detail {

Result<uint64_t> expected_bytes(const Weight& w) {
  const auto count = w.shape.element_count();
  if (!count)
    return InvalidArgument("'" + w.name + "': shape " + w.shape.to_string() + " has no element count");
  if (const auto* d = std::get_if<DType>(&w.type)) {
    if (*d == DType::kString) return InvalidArgument("'" + w.name + "': string tensors cannot be written");
    return static_cast<uint64_t>(*count) * dtype_size(*d);
  }
  const auto traits = model::ggml_type_traits(static_cast<uint32_t>(std::get<model::GgmlType>(w.type)));
  if (!traits) return InvalidArgument("'" + w.name + "': unknown ggml type");
  if (w.shape.rank() == 0 || w.shape.dims().back() % traits->block_size != 0)
    return InvalidArgument("'" + w.name + "': a " + std::string(traits->name) +
                           " tensor's last dimension must be a multiple of " +
                           std::to_string(traits->block_size) + ", the shape is " + w.shape.to_string());
  return model::ggml_row_bytes(*traits, static_cast<uint64_t>(*count));
}

Status check_weights(const std::vector<Weight>& weights, std::string_view format) {
  std::set<std::string> names;
  for (const Weight& w : weights) {
    if (w.name.empty()) return InvalidArgument(std::string(format) + ": a tensor has an empty name");
    if (!names.insert(w.name).second)
      return InvalidArgument(std::string(format) + ": two tensors are named '" + w.name + "'");
    GANTRY_ASSIGN_OR_RETURN(const uint64_t want, expected_bytes(w));
    if (w.data.byte_size() != want)
      return InvalidArgument(std::string(format) + ": '" + w.name + "' holds " +
                             std::to_string(w.data.byte_size()) + " bytes, " + weight_type_name(w.type) +
                             " " + w.shape.to_string() + " needs " + std::to_string(want));
    if (want > 0 && (w.data.data() == nullptr || w.data.memory_class() == MemoryClass::kDevice))
      return InvalidArgument(std::string(format) + ": '" + w.name + "' has no host data to write");
  }
  return Status::Ok();
}

}  // namespace gantry::weights::detail
