#include "evaluator/op_export.hpp"

namespace ptxevo::evaluator {

std::string substitute(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    const std::string token = "@" + key + "@";
    for (auto at = text.find(token); at != std::string::npos; at = text.find(token, at + value.size()))
      text.replace(at, token.size(), value);
  }
  return text;
}

const char* torch_dtype_cpp(DType t) {
  switch (t) {
    case DType::F64: return "at::kDouble";
    case DType::F32: return "at::kFloat";
    case DType::F16: return "at::kHalf";
    case DType::BF16: return "at::kBFloat16";
    case DType::I64: return "at::kLong";
    case DType::I32: return "at::kInt";
    case DType::U8: return "at::kByte";
  }
  return "at::kFloat";
}

const char* torch_dtype_py(DType t) {
  switch (t) {
    case DType::F64: return "torch.float64";
    case DType::F32: return "torch.float32";
    case DType::F16: return "torch.float16";
    case DType::BF16: return "torch.bfloat16";
    case DType::I64: return "torch.int64";
    case DType::I32: return "torch.int32";
    case DType::U8: return "torch.uint8";
  }
  return "torch.float32";
}

}  // namespace ptxevo::evaluator
