#include "ipc/messages/execute.h"

namespace pybackend::ipc {

void WriteCorrelationId(Writer& w, const CorrelationId& c, bool traced) {
  w.U8(static_cast<uint8_t>((c.is_string ? 1 : 0) | (traced ? kCorrelationTraced : 0)));
  if (c.is_string) {
    w.Str(c.str);
  } else {
    w.U64(c.u64);
  }
}

CorrelationId ReadCorrelationId(Reader& r) {
  CorrelationId c;
  uint8_t kind = r.U8();
  // Only EXECUTE, which the backend writes, carries the TRACED bit.
  if (kind > 1) throw DecodeError("unknown correlation id kind " + std::to_string(kind));
  c.is_string = kind == 1;
  if (c.is_string) {
    c.str = r.StrView();
  } else {
    c.u64 = r.U64();
  }
  return c;
}

void ExecuteEncoder::RequestHead(uint64_t token, std::string_view request_id,
                                 const CorrelationId& corr, uint32_t flags, uint64_t timeout_us,
                                 std::string_view parameters, std::string_view trace_context) {
  w_.U64(token);
  w_.Str(request_id);
  // The kind's TRACED bit: the context follows the id (most requests carry none).
  WriteCorrelationId(w_, corr, !trace_context.empty());
  if (!trace_context.empty()) w_.Str(trace_context);
  w_.U32(flags);
  w_.U64(timeout_us);
  w_.Str(parameters);
}

ResultDecoder::ResultDecoder(const std::vector<uint8_t>& body) : r_(body.data(), body.size()) {
  uint8_t status = r_.U8();
  if (status == static_cast<uint8_t>(ResultStatus::BATCH_ERROR)) {
    batch_error_ = true;
    error_code_ = r_.U32();
    error_message_ = r_.Str();
    return;
  }
  async_seq_ = r_.U32();
  n_ = r_.U32();
}

ResultDecoder::Item ResultDecoder::NextItem() {
  Item it;
  it.kind = static_cast<ResultKind>(r_.U8());
  it.release_flags = r_.U32();
  if (it.kind != ResultKind::RESPONSE && it.kind != ResultKind::NONE) {
    throw DecodeError("unknown result kind " + std::to_string(static_cast<int>(it.kind)));
  }
  return it;
}

SendMsg DecodeSend(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  SendMsg m;
  m.token = r.U64();
  m.send_flags = r.U32();
  m.has_response = r.U8() != 0;
  if (m.has_response) m.response = ReadResponseBody(r);
  return m;
}

}  // namespace pybackend::ipc
