#include "ipc/messages/bls.h"

namespace pybackend::ipc {

void DecodeBlsExec(const std::vector<uint8_t>& body, BlsExecMsg* out) {
  Reader r(body.data(), body.size());
  out->model_name = r.Str();
  out->model_version = r.I64();
  out->decoupled = r.U8() != 0;
  out->request_id = r.Str();
  out->correlation_id = ReadCorrelationId(r);
  out->flags = r.U32();
  out->timeout_us = r.U64();
  out->preferred_memory = r.U8();
  out->preferred_device = r.I64();
  out->parameters = r.StrView();
  uint32_t n_requested = r.U32();
  for (uint32_t i = 0; i < n_requested; ++i) out->requested_outputs.push_back(r.Str());
  uint32_t n_inputs = r.U32();
  for (uint32_t i = 0; i < n_inputs; ++i) out->inputs.push_back(ReadTensorDesc(r));
  out->parent_token = r.U64();
  if (r.remaining() != 0) throw DecodeError("trailing bytes in BLS_EXEC");
}

void BlsResponseEncoder::ErrorResponse(uint32_t code, std::string_view message) {
  w_.U8(1);  // has_response
  w_.U8(1);  // has_error
  w_.U32(code);
  w_.Str(message);
  w_.Str("");
  w_.U32(0);
}

void BlsResponseEncoder::BeginResponse(std::string_view parameters) {
  w_.U8(1);  // has_response
  w_.U8(0);  // has_error
  w_.Str(parameters);
  count_at_ = w_.size();
  w_.U32(0);
}

ModelLoadMsg DecodeModelLoad(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  ModelLoadMsg m;
  m.model_name = r.Str();
  m.config = r.Str();
  uint32_t n_files = r.U32();
  for (uint32_t i = 0; i < n_files; ++i) {
    ModelLoadMsg::File f;
    f.path = r.Str();
    f.size = r.U32();
    f.data = r.Bytes(f.size);
    m.files.push_back(std::move(f));
  }
  return m;
}

ModelUnloadMsg DecodeModelUnload(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  ModelUnloadMsg m;
  m.model_name = r.Str();
  m.unload_dependents = r.U8() != 0;
  return m;
}

ModelReadyMsg DecodeModelReady(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  ModelReadyMsg m;
  m.model_name = r.Str();
  m.version = r.I64();
  return m;
}

}  // namespace pybackend::ipc
