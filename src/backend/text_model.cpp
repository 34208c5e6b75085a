#include "gantry/backend/text_model.h"

namespace gantry::backend {

Result<std::vector<int32_t>> TextModel::tokenize(std::string_view, bool, bool) const {
  return Unsupported("this model has no tokenizer");
}

Result<std::string> TextModel::token_piece(int32_t) const {
  return Unsupported("this model has no tokenizer");
}

Result<std::string> TextModel::detokenize(std::span<const int32_t>) const {
  return Unsupported("this model has no tokenizer");
}

}  // namespace gantry::backend
