#include "ipc/codec.h"

namespace pybackend::ipc {

void Writer::Put(const void* data, size_t size) {
  if (size == 0) return;
  const auto* p = static_cast<const uint8_t*>(data);
  buf_.insert(buf_.end(), p, p + size);
}

uint8_t* Writer::Extend(size_t size) {
  size_t at = buf_.size();
  buf_.resize(at + size);
  return buf_.data() + at;
}

void Writer::Str(std::string_view s) {
  if (s.size() > UINT32_MAX) throw std::length_error("string too long for the wire format");
  U32(static_cast<uint32_t>(s.size()));
  Put(s.data(), s.size());
}

void Writer::Blob(const void* data, size_t size) {
  if (size > UINT32_MAX) throw std::length_error("blob too long for the wire format");
  U32(static_cast<uint32_t>(size));
  Put(data, size);
}

const uint8_t* Reader::Bytes(uint64_t size) {
  if (size > remaining()) {
    throw DecodeError("truncated message: needed " + std::to_string(size) + " bytes, " +
                      std::to_string(remaining()) + " left");
  }
  const uint8_t* at = p_;
  p_ += size;
  return at;
}

std::string_view Reader::StrView() {
  uint32_t n = U32();
  const uint8_t* at = Bytes(n);
  return std::string_view(reinterpret_cast<const char*>(at), n);
}

void WriteTensorHead(Writer& w, std::string_view name, uint8_t dtype, Location location,
                     const int64_t* dims, uint32_t ndim, uint64_t byte_size) {
  w.Str(name);
  w.U8(dtype);
  w.U8(static_cast<uint8_t>(location));
  w.U32(ndim);
  for (uint32_t i = 0; i < ndim; ++i) w.I64(dims[i]);
  w.U64(byte_size);
}

void WriteTensorDesc(Writer& w, const TensorDesc& t) {
  WriteTensorHead(w, t.name, t.dtype, t.location, t.dims.data(),
                  static_cast<uint32_t>(t.dims.size()), t.byte_size);
  if (t.location == Location::INLINE) {
    w.Raw(t.inline_data, t.byte_size);
  } else if (t.location == Location::GPU_IPC) {
    WriteGpuRef(w, t.gpu);
  } else {
    w.U32(t.seg);
    w.U64(t.offset);
  }
}

void WriteGpuRef(Writer& w, const GpuRef& g) {
  w.U8(static_cast<uint8_t>(g.owner));
  w.U32(g.device);
  w.U64(g.hold);
  w.Raw(g.handle.data(), g.handle.size());
  w.U64(g.offset);
}

TensorDesc ReadTensorDesc(Reader& r) {
  TensorDesc t;
  t.name = r.Str();
  t.dtype = r.U8();
  uint8_t location = r.U8();
  uint32_t ndim = r.U32();
  // Each dim takes 8 bytes; refuse counts the body cannot hold before allocating.
  if (static_cast<uint64_t>(ndim) * 8 > r.remaining()) {
    throw DecodeError("tensor '" + t.name + "' claims " + std::to_string(ndim) + " dims");
  }
  t.dims.resize(ndim);
  for (uint32_t i = 0; i < ndim; ++i) t.dims[i] = r.I64();
  t.byte_size = r.U64();
  switch (static_cast<Location>(location)) {
    case Location::INLINE:
      t.location = Location::INLINE;
      t.inline_data = r.Bytes(t.byte_size);
      break;
    case Location::BACKEND_ARENA:
    case Location::STUB_ARENA:
      t.location = static_cast<Location>(location);
      t.seg = r.U32();
      t.offset = r.U64();
      break;
    case Location::GPU_IPC: {
      t.location = Location::GPU_IPC;
      uint8_t owner = r.U8();
      if (owner != static_cast<uint8_t>(Owner::BACKEND) &&
          owner != static_cast<uint8_t>(Owner::STUB)) {
        throw DecodeError("GPU tensor '" + t.name + "' has unknown owner " + std::to_string(owner));
      }
      t.gpu.owner = static_cast<Owner>(owner);
      t.gpu.device = r.U32();
      t.gpu.hold = r.U64();
      std::memcpy(t.gpu.handle.data(), r.Bytes(GPU_IPC_HANDLE_SIZE), GPU_IPC_HANDLE_SIZE);
      t.gpu.offset = r.U64();
      break;
    }
    default:
      throw DecodeError("tensor '" + t.name + "' has unsupported location " +
                        std::to_string(location));
  }
  return t;
}

void WriteResponseBody(Writer& w, const ResponseBody& body) {
  // 0: no error, 1: an error response the model made, 2: an error that fails the request.
  w.U8(!body.has_error ? 0 : (body.fails_request ? 2 : 1));
  if (body.has_error) {
    w.U32(body.error_code);
    w.Str(body.error_message);
  }
  w.Str(body.parameters);
  w.U32(static_cast<uint32_t>(body.outputs.size()));
  for (const auto& t : body.outputs) WriteTensorDesc(w, t);
}

ResponseBody ReadResponseBody(Reader& r) {
  ResponseBody body;
  uint8_t error_kind = r.U8();
  body.has_error = error_kind != 0;
  body.fails_request = error_kind == 2;
  if (body.has_error) {
    body.error_code = r.U32();
    body.error_message = r.Str();
  }
  body.parameters = r.Str();
  uint32_t n = r.U32();
  if (n > r.remaining()) throw DecodeError("response claims " + std::to_string(n) + " outputs");
  body.outputs.reserve(n);
  for (uint32_t i = 0; i < n; ++i) body.outputs.push_back(ReadTensorDesc(r));
  return body;
}

const char* KindName(uint16_t kind) {
  switch (static_cast<MessageKind>(kind)) {
    case MessageKind::HELLO:
      return "HELLO";
    case MessageKind::INIT:
      return "INIT";
    case MessageKind::INIT_REPLY:
      return "INIT_REPLY";
    case MessageKind::EXECUTE:
      return "EXECUTE";
    case MessageKind::RESULT:
      return "RESULT";
    case MessageKind::FINALIZE:
      return "FINALIZE";
    case MessageKind::FINALIZE_REPLY:
      return "FINALIZE_REPLY";
    case MessageKind::SEGMENT_ADD:
      return "SEGMENT_ADD";
    case MessageKind::SEGMENT_DROP:
      return "SEGMENT_DROP";
    case MessageKind::FREE:
      return "FREE";
    case MessageKind::LOG:
      return "LOG";
    case MessageKind::SEND:
      return "SEND";
    case MessageKind::REPLY:
      return "REPLY";
    case MessageKind::IS_CANCELLED:
      return "IS_CANCELLED";
    case MessageKind::BLS_EXEC:
      return "BLS_EXEC";
    case MessageKind::BLS_RESPONSE:
      return "BLS_RESPONSE";
    case MessageKind::BLS_CANCEL:
      return "BLS_CANCEL";
    case MessageKind::METRIC_FAMILY_NEW:
      return "METRIC_FAMILY_NEW";
    case MessageKind::METRIC_FAMILY_DELETE:
      return "METRIC_FAMILY_DELETE";
    case MessageKind::METRIC_NEW:
      return "METRIC_NEW";
    case MessageKind::METRIC_VALUE:
      return "METRIC_VALUE";
    case MessageKind::METRIC_INCREMENT:
      return "METRIC_INCREMENT";
    case MessageKind::METRIC_SET:
      return "METRIC_SET";
    case MessageKind::METRIC_OBSERVE:
      return "METRIC_OBSERVE";
    case MessageKind::MODEL_LOAD:
      return "MODEL_LOAD";
    case MessageKind::MODEL_UNLOAD:
      return "MODEL_UNLOAD";
    case MessageKind::MODEL_READY:
      return "MODEL_READY";
    case MessageKind::SENDER_DROPPED:
      return "SENDER_DROPPED";
    case MessageKind::LANE:
      return "LANE";
    case MessageKind::ATTACH:
      return "ATTACH";
  }
  return "UNKNOWN";
}

}  // namespace pybackend::ipc
