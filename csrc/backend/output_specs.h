// The outputs a model's config declares (name, data type, dims), for checking what a stub
// returns before it reaches Triton: Triton itself passes any name, type and shape through,
// so a model's mistake would otherwise reach clients as data they cannot interpret.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/json.h"
#include "ipc/codec.h"

namespace pybackend {

class OutputSpecs {
 public:
  // From the normalised model config; max_batch_size > 0 adds a leading batch dimension.
  void Build(const json::Value& config, int64_t max_batch_size);
  // "" when `t` matches a declared output (or the config declares none); otherwise what is
  // wrong, what the config says and how to fix it.
  std::string Check(const ipc::TensorDesc& t, const std::string& instance) const;

 private:
  struct Spec {
    std::string data_type;  // "TYPE_FP32", ...
    std::vector<int64_t> dims;
    bool reshaped = false;  // `reshape` given: the returned shape is not the config's dims
  };
  std::unordered_map<std::string, Spec> specs_;
  std::vector<std::string> names_;
  bool batched_ = false;
};

// Checks a serialized BYTES tensor: `count` elements, each a u32 length and that many
// bytes, filling exactly `size` bytes. Returns "" or what is wrong.
std::string CheckBytesPayload(const uint8_t* data, uint64_t size, uint64_t count);

}  // namespace pybackend
