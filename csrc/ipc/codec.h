// Little-endian encoders/decoders for the primitive encodings of docs/protocol.md and the two
// composite shapes both channels use (TensorDesc, ResponseBody). Decoding never trusts the
// peer: every read is bounds-checked and a short or malformed body throws DecodeError.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipc/protocol.h"

namespace pybackend::ipc {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian and we copy integers as they are in memory");

class DecodeError : public std::runtime_error {
 public:
  explicit DecodeError(const std::string& what) : std::runtime_error(what) {}
};

class Writer {
 public:
  void U8(uint8_t v) { Put(&v, 1); }
  void U16(uint16_t v) { Put(&v, 2); }
  void U32(uint32_t v) { Put(&v, 4); }
  void U64(uint64_t v) { Put(&v, 8); }
  void I64(int64_t v) { Put(&v, 8); }
  void F64(double v) { Put(&v, 8); }
  void Str(std::string_view s);
  void Blob(const void* data, size_t size);
  void Raw(const void* data, size_t size) { Put(data, size); }
  // Makes room for `size` bytes and returns where they go, so callers can copy tensor data
  // straight from Triton's buffers into the message.
  uint8_t* Extend(size_t size);
  // Overwrites a u32 written earlier (counts that are only known at the end).
  void PatchU32(size_t at, uint32_t v) { std::memcpy(buf_.data() + at, &v, 4); }

  size_t size() const { return buf_.size(); }
  const uint8_t* data() const { return buf_.data(); }
  void Clear() { buf_.clear(); }
  // The bytes written, moved out (the writer is empty afterwards): a message body to send.
  std::vector<uint8_t> Take() { return std::move(buf_); }

 private:
  void Put(const void* data, size_t size);
  std::vector<uint8_t> buf_;
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}

  uint8_t U8() { return Get<uint8_t>(); }
  uint16_t U16() { return Get<uint16_t>(); }
  uint32_t U32() { return Get<uint32_t>(); }
  uint64_t U64() { return Get<uint64_t>(); }
  int64_t I64() { return Get<int64_t>(); }
  double F64() { return Get<double>(); }
  std::string Str() { return std::string(StrView()); }
  std::string_view StrView();
  // Returns a pointer to the next `size` bytes of the body and skips them.
  const uint8_t* Bytes(uint64_t size);

  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

 private:
  template <typename T>
  T Get() {
    T v;
    std::memcpy(&v, Bytes(sizeof(T)), sizeof(T));
    return v;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

// Where a GPU_IPC tensor lies: `offset` bytes into the device allocation that `handle` (a
// CUipcMemHandle) names on `device` (the backend's numbering). `owner` keeps the memory alive
// until the peer returns the BlockRef (GPU_HOLD_SEG, hold) with FREE.
struct GpuRef {
  Owner owner = Owner::STUB;
  uint32_t device = 0;
  uint64_t hold = 0;
  std::array<uint8_t, GPU_IPC_HANDLE_SIZE> handle{};
  uint64_t offset = 0;
};

// One tensor as described on the wire. For INLINE tensors `inline_data` points into the
// decoded message body, so a TensorDesc must not outlive the message it came from.
struct TensorDesc {
  std::string name;
  uint8_t dtype = 0;
  Location location = Location::INLINE;
  std::vector<int64_t> dims;
  uint64_t byte_size = 0;
  const uint8_t* inline_data = nullptr;
  uint32_t seg = 0;
  uint64_t offset = 0;
  GpuRef gpu;  // GPU_IPC only
};

// Writes everything of a TensorDesc up to (not including) its data or block reference.
void WriteTensorHead(Writer& w, std::string_view name, uint8_t dtype, Location location,
                     const int64_t* dims, uint32_t ndim, uint64_t byte_size);
void WriteTensorDesc(Writer& w, const TensorDesc& t);
void WriteGpuRef(Writer& w, const GpuRef& g);
TensorDesc ReadTensorDesc(Reader& r);

struct ResponseBody {
  bool has_error = false;
  // The error is the stub's own (execute failed, nobody can answer the request): the
  // request failed. Otherwise an error is a response the model made, its answer.
  bool fails_request = false;
  uint32_t error_code = 0;
  std::string error_message;
  std::string parameters;  // "" or a JSON object
  std::vector<TensorDesc> outputs;
};

void WriteResponseBody(Writer& w, const ResponseBody& body);
ResponseBody ReadResponseBody(Reader& r);

// Human-readable name of a message kind for error messages and logs.
const char* KindName(uint16_t kind);

}  // namespace pybackend::ipc
