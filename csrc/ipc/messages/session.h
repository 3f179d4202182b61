// The session's housekeeping messages (docs/protocol.md, "Message kinds"): HELLO, the `json`
// bodies (INIT, INIT_REPLY, FINALIZE_REPLY, ATTACH), LOG, SEGMENT_ADD, SEGMENT_DROP and the
// body of a FLAG_INDIRECT datagram. Python: pybackend/ipc/control_codec.py.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/codec.h"
#include "ipc/protocol.h"

namespace pybackend::ipc {

struct HelloMsg {
  uint32_t protocol_version = 0;
  uint32_t pid = 0;
  std::string python_version;
  std::string numpy_version;
};
std::vector<uint8_t> EncodeHello(const HelloMsg& m);
HelloMsg DecodeHello(const std::vector<uint8_t>& body);

// A `json` body: one str holding a JSON document. The view points into `body`.
std::vector<uint8_t> EncodeJson(std::string_view text);
std::string_view DecodeJson(const std::vector<uint8_t>& body);

struct LogMsg {
  uint8_t level = 0;  // TRITONSERVER_LogLevel
  uint32_t line = 0;
  std::string file;  // strings, not views: Triton's log call wants them NUL-terminated
  std::string message;
};
std::vector<uint8_t> EncodeLog(const LogMsg& m);
LogMsg DecodeLog(const std::vector<uint8_t>& body);

struct SegmentAddMsg {  // the segment's fd travels with the datagram
  Owner owner = Owner::BACKEND;
  uint32_t seg = 0;
  uint64_t size = 0;
};
std::vector<uint8_t> EncodeSegmentAdd(const SegmentAddMsg& m);
SegmentAddMsg DecodeSegmentAdd(const std::vector<uint8_t>& body);

struct SegmentDropMsg {
  Owner owner = Owner::BACKEND;
  uint32_t seg = 0;
};
std::vector<uint8_t> EncodeSegmentDrop(const SegmentDropMsg& m);
SegmentDropMsg DecodeSegmentDrop(const std::vector<uint8_t>& body);

// A FLAG_INDIRECT datagram's body: where in the sender's arena the real body lies.
struct IndirectRef {
  uint32_t seg = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};
std::vector<uint8_t> EncodeIndirect(const IndirectRef& m);
IndirectRef DecodeIndirect(const uint8_t* body, size_t size);

}  // namespace pybackend::ipc
