#include "backend/bls_service.h"

#include <atomic>
#include <condition_variable>
#include <vector>

#include "backend/bls_cycles.h"
#include "backend/bls_outputs.h"
#include "backend/error.h"
#include "backend/gpu_transfer.h"
#include "backend/json.h"
#include "backend/logging.h"
#include "cuda/trace.h"
#include "ipc/codec.h"

namespace pybackend {
namespace {
std::mutex g_calls_mu;
std::condition_variable g_calls_cv;
size_t g_calls = 0;  // BlsCall objects alive
}  // namespace

// One BLS request from the moment Triton owns it until both its release callback and its
// final response have run (whichever comes last frees it).
struct BlsCall {
  BlsOutputTarget out;  // the calling session, and where the callee's outputs go
  std::shared_ptr<BlsTable> table;
  uint64_t id = 0;
  // Answered on sync (BlsService::OnExec): one BLS_RESPONSE, so a response that comes
  // without the FINAL flag waits here for the callback that carries it.
  bool on_sync = false;
  TRITONSERVER_InferenceResponse* pending = nullptr;
  std::vector<uint8_t> body;  // the BLS_EXEC body: inline inputs point into it
  std::vector<std::shared_ptr<ipc::Mapping>> maps;    // stub segments our inputs lie in
  std::vector<std::pair<uint32_t, uint64_t>> blocks;  // stub blocks to return on release
  std::mutex mu;
  // Kept (and deleted) until the final response too, even after Triton released it: a
  // decoupled callee releases its request early, and cancelling must still reach its
  // response factory through it.
  TRITONSERVER_InferenceRequest* request = nullptr;
  bool released = false;
  std::atomic<int> refs{2};  // release callback + final response
  int64_t started_ns = 0;    // stage timers only: ServerInferAsync called (bls.callee)

  BlsCall() {
    std::lock_guard<std::mutex> lock(g_calls_mu);
    ++g_calls;
  }
  ~BlsCall() {
    std::lock_guard<std::mutex> lock(g_calls_mu);
    --g_calls;
    g_calls_cv.notify_all();
  }

  void Unref() {
    if (refs.fetch_sub(1) == 1) {
      table->Remove(this);
      if (pending != nullptr) TakeMessage(TRITONSERVER_InferenceResponseDelete(pending));
      if (request != nullptr) TakeMessage(TRITONSERVER_InferenceRequestDelete(request));
      delete this;
    }
  }
  // Hands the stub's input blocks back at once (they are no longer read), so a caller
  // making call after call reuses the same memory instead of growing its arena. A return
  // that cannot go out now stays queued in the ledger for the next one.
  void ReturnInputs() {
    StubSession& s = *out.session;
    for (auto& [seg, off] : blocks) s.ledger().Done(seg, off);
    std::string error;
    if (!blocks.empty() && s.alive() &&
        !s.ledger().SendReturns(s.async(), static_cast<int>(s.options().timeout.count()), &error)) {
      PB_LOG_WARN(s.log_prefix() + error);
    }
    blocks.clear();
    maps.clear();
    body.clear();
    body.shrink_to_fit();
  }
};

namespace {

bool SendBlsResponse(StubSession& s, bool on_sync, uint64_t id, const ipc::BlsResponseEncoder& enc,
                     std::string* error) {
  if (on_sync) {
    return s.SendSync(ipc::MessageKind::BLS_RESPONSE, id, enc.data(), enc.size(), error);
  }
  return s.async().Send(ipc::MessageKind::BLS_RESPONSE, id, enc.data(), enc.size(),
                        static_cast<int>(s.options().timeout.count()), error);
}

void ResponseComplete(TRITONSERVER_InferenceResponse* resp, const uint32_t flags, void* userp) {
  auto* call = static_cast<BlsCall*>(userp);
  StubSession& s = *call->out.session;
  if (cuda::trace::kOn && (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)) {
    cuda::trace::Record("bls.callee", cuda::trace::NowNs() - call->started_ns);
  }
  // Off the cycle registry before the caller can run on and call again.
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) bls_cycles::End(call);
  if (call->on_sync) {
    // The stub takes the first response of a non-decoupled call; it goes out with FINAL.
    if ((flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) == 0) {
      if (call->pending == nullptr) {
        call->pending = resp;
      } else if (resp != nullptr) {
        TakeMessage(TRITONSERVER_InferenceResponseDelete(resp));
      }
      return;
    }
    if (call->pending != nullptr) {  // the first response wins, as on async
      if (resp != nullptr) TakeMessage(TRITONSERVER_InferenceResponseDelete(resp));
      resp = call->pending;
      call->pending = nullptr;
    }
  }
  cuda::trace::Stage answer("bls.answer");  // encoded and sent to the calling stub
  uint32_t wire_flags = flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL;
  if (call->out.delivery_failed.exchange(false)) wire_flags |= ipc::kBlsResponseUndelivered;
  ipc::BlsResponseEncoder enc(wire_flags);
  std::vector<OutBuf*> named;
  if (resp != nullptr) {
    named = WriteBlsResponse(enc, resp);
  } else {
    enc.NoResponse();
  }
  std::string error;
  bool sent = s.alive() && SendBlsResponse(s, call->on_sync, call->id, enc, &error);
  if (sent) {
    for (OutBuf* out : named) out->handed = true;
  } else if (s.alive()) {
    PB_LOG_ERROR(s.log_prefix() + "cannot deliver a BLS response: " + error);
  }
  answer.End();
  // The caller's instance thread, asleep since its poll ran out during the call, polls for
  // the RESULT afresh while the stub finishes execute (after the answer: the stub first).
  if (sent && call->on_sync) s.WakeForResult();
  if (resp != nullptr) {
    std::string e = TakeMessage(TRITONSERVER_InferenceResponseDelete(resp));
    if (!e.empty()) PB_LOG_ERROR(s.log_prefix() + "deleting a BLS response: " + e);
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) call->Unref();
}

void RequestRelease(TRITONSERVER_InferenceRequest*, const uint32_t, void* userp) {
  auto* call = static_cast<BlsCall*>(userp);
  {
    std::lock_guard<std::mutex> lock(call->mu);
    call->released = true;
    call->ReturnInputs();
  }
  call->Unref();
}

void SetParameters(TRITONSERVER_InferenceRequest* req, std::string_view text) {
  if (text.empty()) return;
  json::Value params = json::Value::Parse(text);
  if (params.is_null()) return;
  if (!params.is_object()) Throw(TRITONSERVER_ERROR_INVALID_ARG, "parameters must be an object");
  for (const auto& [key, v] : params.members()) {
    const char* k = key.c_str();
    switch (v.type()) {
      case json::Value::Type::kString:
        Check(TRITONSERVER_InferenceRequestSetStringParameter(req, k, v.AsString().c_str()),
              nullptr);
        break;
      case json::Value::Type::kBool:
        Check(TRITONSERVER_InferenceRequestSetBoolParameter(req, k, v.AsBool()), nullptr);
        break;
      case json::Value::Type::kInt:
        Check(TRITONSERVER_InferenceRequestSetIntParameter(req, k, v.AsInt()), nullptr);
        break;
      default:
        Throw(TRITONSERVER_ERROR_INVALID_ARG,
              "Expect parameters values to have type bool/int/str, found a value of parameter '" +
                  key + "' that is none of them");
    }
  }
}

// One input of a BLS request, where it lies: in the message, in the stub's arena (mapped
// here; its block goes back when the request is released) or on a GPU.
void AddInput(StubSession& session, const ipc::TensorDesc& t, BlsCall* call,
              TRITONSERVER_InferenceRequest* req) {
  const uint8_t* data = nullptr;
  TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
  int64_t mem_id = 0;
  if (t.location == ipc::Location::INLINE) {
    data = t.inline_data;
  } else if (t.location == ipc::Location::STUB_ARENA) {
    std::string error;
    auto map = session.ledger().MapStub(t.seg, t.offset, t.byte_size, &error);
    if (!map) Throw(TRITONSERVER_ERROR_INTERNAL, "input '" + t.name + "': " + error);
    data = map->base + t.offset;
    call->maps.push_back(std::move(map));
    call->blocks.emplace_back(t.seg, t.offset);
  } else if (t.location == ipc::Location::GPU_IPC) {
    // A GPU tensor: the callee reads it where it lies (the stub's allocation, mapped once,
    // or memory of ours it sends back); the stub holds it until the request is released.
    call->blocks.emplace_back(ipc::GPU_HOLD_SEG, t.gpu.hold);
    std::string where = session.log_prefix() + "BLS input '" + t.name + "'";
    WithGpuTensor(session, t, where, [&](const void* p) { data = static_cast<const uint8_t*>(p); });
    mem = TRITONSERVER_MEMORY_GPU;
    mem_id = static_cast<int64_t>(t.gpu.device);
  } else {
    Throw(TRITONSERVER_ERROR_INVALID_ARG,
          "input '" + t.name + "' has a location BLS inputs cannot use");
  }
  Check(TRITONSERVER_InferenceRequestAddInput(req, t.name.c_str(),
                                              static_cast<TRITONSERVER_DataType>(t.dtype),
                                              t.dims.data(), t.dims.size()),
        nullptr);
  if (t.byte_size > 0) {
    Check(TRITONSERVER_InferenceRequestAppendInputData(req, t.name.c_str(), data, t.byte_size, mem,
                                                       mem_id),
          nullptr);
  }
}

}  // namespace

// ------------------------------------------------------------------------------ BlsTable

void BlsTable::Add(BlsCall* call) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_[{call->out.session.get(), call->id}] = call;
}

void BlsTable::Remove(BlsCall* call) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_.find({call->out.session.get(), call->id});
  if (it != calls_.end() && it->second == call) calls_.erase(it);
}

bool BlsTable::Cancel(const StubSession* session, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_.find({session, id});
  if (it == calls_.end()) return false;
  BlsCall* call = it->second;
  std::lock_guard<std::mutex> call_lock(call->mu);
  if (call->request != nullptr && call->refs.load() > 0) {
    std::string e = TakeMessage(TRITONSERVER_InferenceRequestCancel(call->request));
    if (!e.empty()) PB_LOG_WARN("cancelling a BLS request: " + e);
  }
  return true;
}

void BlsTable::CancelAll(const StubSession* session) {
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, call] : calls_) {
      if (key.first == session) ids.push_back(key.second);
    }
  }
  for (uint64_t id : ids) Cancel(session, id);
}

size_t BlsTable::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_.size();
}

// ---------------------------------------------------------------------------- BlsService

BlsService::BlsService(TRITONSERVER_Server* server, std::string model_name,
                       std::string instance_name, uint64_t inline_threshold,
                       RequestRegistry* registry)
    : server_(server),
      model_name_(std::move(model_name)),
      instance_name_(std::move(instance_name)),
      inline_threshold_(inline_threshold),
      registry_(registry),
      table_(std::make_shared<BlsTable>()) {}

TRITONSERVER_InferenceTrace* BlsService::ChildTrace(uint64_t token) {
  if (token == 0 || registry_ == nullptr) return nullptr;
  std::shared_ptr<RequestState> st = registry_->Find(token);
  if (st == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(st->mu);
  if (st->released || st->request == nullptr) return nullptr;
  TRITONSERVER_InferenceTrace* trace = nullptr;
  if (!TakeMessage(TRITONBACKEND_RequestTrace(st->request, &trace)).empty() || trace == nullptr) {
    return nullptr;  // tracing is off for this request
  }
  TRITONSERVER_InferenceTrace* child = nullptr;
  std::string err = TakeMessage(TRITONSERVER_InferenceTraceSpawnChildTrace(trace, &child));
  if (!err.empty()) {
    PB_LOG_WARN("model '" + model_name_ + "', instance '" + instance_name_ +
                "': BLS request not traced: " + err);
    return nullptr;
  }
  return child;
}

void SendBlsError(StubSession& session, bool on_sync, uint64_t id, TRITONSERVER_Error_Code code,
                  const std::string& message) {
  ipc::BlsResponseEncoder enc(TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  enc.ErrorResponse(code, message);
  std::string error;
  if (!SendBlsResponse(session, on_sync, id, enc, &error)) {
    PB_LOG_ERROR(session.log_prefix() + "cannot deliver a BLS error: " + error);
  }
}

void BlsService::OnExec(StubSession& session, const ipc::Message& msg, bool on_sync) {
  cuda::trace::Stage start("bls.start");  // BLS_EXEC decoded .. ServerInferAsync returned
  auto* call = new BlsCall();
  call->on_sync = on_sync;
  call->out.session = session.shared_from_this();
  call->table = table_;
  call->id = msg.id;
  call->out.inline_threshold = inline_threshold_;
  call->body = msg.body;
  TRITONSERVER_InferenceRequest* req = nullptr;
  ipc::BlsExecMsg exec;  // views into call->body
  try {
    ipc::DecodeBlsExec(call->body, &exec);
    Validate(exec, on_sync);
    Build(session, exec, call, &req);
    // A call that could never be answered is refused here (bls_cycles.h); End on FINAL.
    const void* parent = bls_cycles::ParentRequest(registry_, exec.parent_token);
    std::string cycle = bls_cycles::Begin(
        {call, req, parent, model_name_, instance_name_, exec.model_name, on_sync});
    if (!cycle.empty()) Throw(TRITONSERVER_ERROR_UNAVAILABLE, cycle);
    Start(call, req, exec.parent_token);
  } catch (const std::exception& e) {
    // Like the original, a request that could not be started fails with INTERNAL (the
    // callee's own errors keep their codes).
    TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL;
    if (dynamic_cast<const ipc::DecodeError*>(&e) != nullptr) {
      PB_LOG_ERROR(session.log_prefix() + "malformed BLS_EXEC: " + e.what());
    }
    bls_cycles::End(call);
    if (req != nullptr) TakeMessage(TRITONSERVER_InferenceRequestDelete(req));
    call->ReturnInputs();
    const std::string callee = exec.model_name.empty() ? "<unknown>" : exec.model_name;
    SendBlsError(session, on_sync, msg.id, code,
                 "Model " + callee + " - Error when running inference: " + e.what());
    delete call;
  }
}

void BlsService::Validate(const ipc::BlsExecMsg& exec, bool on_sync) {
  const std::string& callee = exec.model_name;
  if (exec.decoupled && on_sync) Throw(TRITONSERVER_ERROR_INTERNAL, "a decoupled BLS call on sync");
  bool ready = false;
  Check(TRITONSERVER_ServerModelIsReady(server_, callee.c_str(), exec.model_version, &ready),
        nullptr);
  if (!ready) {
    Throw(TRITONSERVER_ERROR_UNAVAILABLE,
          "Failed for execute the inference request. Model '" + callee + "' is not ready.");
  }
  uint32_t txn = 0;
  Check(TRITONSERVER_ServerModelTransactionProperties(server_, callee.c_str(), exec.model_version,
                                                      &txn, nullptr),
        nullptr);
  if ((txn & TRITONSERVER_TXN_DECOUPLED) != 0 && !exec.decoupled) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG,
          "Model " + callee +
              " is using the decoupled. The current BLS request call doesn't support models "
              "using the decoupled transaction policy. Please use 'decoupled=True' argument to "
              "the 'exec' or 'async_exec' calls for decoupled models.'");
  }
}

void BlsService::Build(StubSession& session, const ipc::BlsExecMsg& exec, BlsCall* call,
                       TRITONSERVER_InferenceRequest** out_req) {
  call->out.callee = exec.model_name;
  call->out.prefer_gpu = exec.preferred_memory == 0;  // pb_utils numbering: 0 GPU, 1 CPU, 2 default
  call->out.preferred_device = exec.preferred_device < 0 ? 0 : exec.preferred_device;

  Check(TRITONSERVER_InferenceRequestNew(out_req, server_, exec.model_name.c_str(),
                                         exec.model_version),
        nullptr);
  TRITONSERVER_InferenceRequest* req = *out_req;
  Check(TRITONSERVER_InferenceRequestSetId(req, exec.request_id.c_str()), nullptr);
  if (!exec.correlation_id.is_string) {
    Check(TRITONSERVER_InferenceRequestSetCorrelationId(req, exec.correlation_id.u64), nullptr);
  } else {
    const std::string corr(exec.correlation_id.str);  // NUL-terminated for Triton
    Check(TRITONSERVER_InferenceRequestSetCorrelationIdString(req, corr.c_str()), nullptr);
  }
  Check(TRITONSERVER_InferenceRequestSetFlags(req, exec.flags), nullptr);
  if (exec.timeout_us > 0) {
    Check(TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(req, exec.timeout_us), nullptr);
  }
  SetParameters(req, exec.parameters);
  for (const std::string& name : exec.requested_outputs) {
    Check(TRITONSERVER_InferenceRequestAddRequestedOutput(req, name.c_str()), nullptr);
  }
  for (const ipc::TensorDesc& t : exec.inputs) AddInput(session, t, call, req);
}

void BlsService::Start(BlsCall* call, TRITONSERVER_InferenceRequest* req, uint64_t parent_token) {
  Check(TRITONSERVER_InferenceRequestSetReleaseCallback(req, RequestRelease, call), nullptr);
  Check(TRITONSERVER_InferenceRequestSetResponseCallback(req, BlsAllocator(), &call->out,
                                                         ResponseComplete, call),
        nullptr);
  call->request = req;
  table_->Add(call);
  TRITONSERVER_InferenceTrace* trace = ChildTrace(parent_token);
  if (cuda::trace::kOn) call->started_ns = cuda::trace::NowNs();
  TRITONSERVER_Error* err = TRITONSERVER_ServerInferAsync(server_, req, trace);
  if (err != nullptr) {
    if (trace != nullptr) TakeMessage(TRITONSERVER_InferenceTraceDelete(trace));
    table_->Remove(call);
    call->request = nullptr;  // deleted by the caller with req
    Check(err, nullptr);
  }
}

bool WaitBlsIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(g_calls_mu);
  return g_calls_cv.wait_for(lock, timeout, [] { return g_calls == 0; });
}

void BlsService::OnCancel(StubSession& session, const ipc::Message& msg) {
  table_->Cancel(&session, msg.id);
}

void BlsService::OnStubGone(StubSession& session) { table_->CancelAll(&session); }

}  // namespace pybackend
