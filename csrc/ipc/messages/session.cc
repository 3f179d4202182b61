#include "ipc/messages/session.h"

namespace pybackend::ipc {

std::vector<uint8_t> EncodeHello(const HelloMsg& m) {
  Writer w;
  w.U32(m.protocol_version);
  w.U32(m.pid);
  w.Str(m.python_version);
  w.Str(m.numpy_version);
  return w.Take();
}

HelloMsg DecodeHello(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  HelloMsg m;
  m.protocol_version = r.U32();
  m.pid = r.U32();
  m.python_version = r.Str();
  m.numpy_version = r.Str();
  return m;
}

std::vector<uint8_t> EncodeJson(std::string_view text) {
  Writer w;
  w.Str(text);
  return w.Take();
}

std::string_view DecodeJson(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  return r.StrView();
}

std::vector<uint8_t> EncodeLog(const LogMsg& m) {
  Writer w;
  w.U8(m.level);
  w.U32(m.line);
  w.Str(m.file);
  w.Str(m.message);
  return w.Take();
}

LogMsg DecodeLog(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  LogMsg m;
  m.level = r.U8();
  m.line = r.U32();
  m.file = r.Str();
  m.message = r.Str();
  return m;
}

std::vector<uint8_t> EncodeSegmentAdd(const SegmentAddMsg& m) {
  Writer w;
  w.U8(static_cast<uint8_t>(m.owner));
  w.U32(m.seg);
  w.U64(m.size);
  return w.Take();
}

SegmentAddMsg DecodeSegmentAdd(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  SegmentAddMsg m;
  m.owner = static_cast<Owner>(r.U8());
  m.seg = r.U32();
  m.size = r.U64();
  return m;
}

std::vector<uint8_t> EncodeSegmentDrop(const SegmentDropMsg& m) {
  Writer w;
  w.U8(static_cast<uint8_t>(m.owner));
  w.U32(m.seg);
  return w.Take();
}

SegmentDropMsg DecodeSegmentDrop(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  SegmentDropMsg m;
  m.owner = static_cast<Owner>(r.U8());
  m.seg = r.U32();
  return m;
}

std::vector<uint8_t> EncodeIndirect(const IndirectRef& m) {
  Writer w;
  w.U32(m.seg);
  w.U64(m.offset);
  w.U64(m.length);
  return w.Take();
}

IndirectRef DecodeIndirect(const uint8_t* body, size_t size) {
  Reader r(body, size);
  IndirectRef m;
  m.seg = r.U32();
  m.offset = r.U64();
  m.length = r.U64();
  return m;
}

}  // namespace pybackend::ipc
