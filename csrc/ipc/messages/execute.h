// A batch's way to the stub and its answers back (docs/protocol.md): EXECUTE (ExecuteBody),
// RESULT (ResultBody) and SEND (a response sender's response). Python:
// pybackend/ipc/execute_codec.py, result_codec.py, response_codec.py (SEND).
//
// The hot path: EXECUTE is written in place as the batch's requests are read (no per-request
// structs), RESULT read in place (the caller keeps each item where it needs it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/codec.h"
#include "ipc/messages/body_encoder.h"
#include "ipc/messages/free.h"
#include "ipc/protocol.h"

namespace pybackend::ipc {

// `u8 kind (0 integer, 1 string)`, then a u64 or a str: EXECUTE and BLS_EXEC alike. A
// decoded `str` points into the body.
struct CorrelationId {
  bool is_string = false;
  uint64_t u64 = 0;
  std::string_view str;
};
// EXECUTE only: a kind with this bit set is followed, after the id, by `str trace_context`.
inline constexpr uint8_t kCorrelationTraced = 2;
// `traced`: the kind carries kCorrelationTraced (the caller writes the context next).
void WriteCorrelationId(Writer& w, const CorrelationId& c, bool traced = false);
// BLS_EXEC's: a kind other than 0 or 1 is a DecodeError.
CorrelationId ReadCorrelationId(Reader& r);

// ExecuteBody: Begin, then per request RequestHead, RequestedOutputs + that many
// RequestedOutput, Inputs + that many tensors (BodyEncoder), then at most one Freed.
class ExecuteEncoder : public BodyEncoder {
 public:
  void Begin(uint32_t n_requests) { w_.U32(n_requests); }
  // `trace_context`: the request's OpenTelemetry context ("" when it has none), which
  // `request.trace().get_context()` returns in the stub.
  void RequestHead(uint64_t token, std::string_view request_id, const CorrelationId& corr,
                   uint32_t flags, uint64_t timeout_us, std::string_view parameters,
                   std::string_view trace_context = {});
  void RequestedOutputs(uint32_t n) { w_.U32(n); }
  void RequestedOutput(std::string_view name) { w_.Str(name); }
  void Inputs(uint32_t n) { w_.U32(n); }
  // The stub's blocks handed back with the batch (the optional trailer; nothing if empty).
  void Freed(const BlockList& blocks) { AppendFreed(w_, blocks); }
};

// ResultBody, read in order: the head (constructor), NextItem (and Response for a RESPONSE
// item) for each of size() items, then Freed. Throws DecodeError on malformed input.
class ResultDecoder {
 public:
  struct Item {
    ResultKind kind = ResultKind::NONE;
    uint32_t release_flags = 0;
  };

  explicit ResultDecoder(const std::vector<uint8_t>& body);
  bool batch_error() const { return batch_error_; }  // then only error_*() are valid
  uint32_t error_code() const { return error_code_; }
  const std::string& error_message() const { return error_message_; }
  uint32_t async_seq() const { return async_seq_; }
  uint32_t size() const { return n_; }
  Item NextItem();
  ResponseBody Response() { return ReadResponseBody(r_); }
  // The backend blocks freed with the batch (empty when the body has no trailer).
  BlockRefs Freed() { return ReadFreed(r_, "RESULT"); }

 private:
  Reader r_;
  bool batch_error_ = false;
  uint32_t error_code_ = 0;
  std::string error_message_;
  uint32_t async_seq_ = 0;
  uint32_t n_ = 0;
};

struct SendMsg {
  uint64_t token = 0;
  uint32_t send_flags = 0;  // TRITONSERVER_ResponseCompleteFlag
  bool has_response = false;
  ResponseBody response;  // INLINE outputs point into the body decoded
};
SendMsg DecodeSend(const std::vector<uint8_t>& body);

}  // namespace pybackend::ipc
