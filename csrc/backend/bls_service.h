// Business Logic Scripting (spec 4.6): a stub's BLS_EXEC becomes a TRITONSERVER_InferenceRequest
// on the server the model lives in; every response of the callee travels back as BLS_RESPONSE
// on the async channel, its outputs written by the callee straight into our arena (the stub
// maps it) or, when small, carried inline. BLS_CANCEL cancels a call still in flight.
//
// Nothing here blocks the monitor thread that hands us the messages: the request is queued
// with TRITONSERVER_ServerInferAsync and Triton's threads run the callbacks.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "backend/request_registry.h"
#include "backend/stub_session.h"
#include "ipc/channel.h"
#include "ipc/messages/bls.h"
#include "triton/tritonserver_infer.h"

namespace pybackend {

struct BlsCall;

// The calls in flight, by (session, call id), for BLS_CANCEL and for stub death. Shared with
// the calls themselves because a call may outlive the instance that started it.
class BlsTable {
 public:
  void Add(BlsCall* call);
  void Remove(BlsCall* call);
  // Cancels the call if it is still in flight; false when it is unknown (finished).
  bool Cancel(const StubSession* session, uint64_t id);
  // Cancels every call of `session` (its stub is gone: nobody waits for the answers).
  void CancelAll(const StubSession* session);
  size_t size();

 private:
  std::mutex mu_;
  std::map<std::pair<const StubSession*, uint64_t>, BlsCall*> calls_;
};

class BlsService {
 public:
  // `model_name`/`instance_name`: the caller, for messages. `inline_threshold`: outputs up to
  // this size travel inside BLS_RESPONSE instead of the arena.
  // `registry`: the instance's requests, to find the parent of a traced BLS request.
  BlsService(TRITONSERVER_Server* server, std::string model_name, std::string instance_name,
             uint64_t inline_threshold, RequestRegistry* registry);

  // BLS_EXEC from `session`'s stub. Always answers: an error response with the FINAL flag
  // when the request could not be started. From the async channel (monitor thread) the
  // answers go on async; `on_sync`: the stub's execute thread sent it on sync while the
  // instance thread waits for RESULT (it waits for the answer there), so the answer goes on
  // sync as exactly one BLS_RESPONSE flagged FINAL: two messages could overtake each other
  // between the lane's slot and the socket.
  void OnExec(StubSession& session, const ipc::Message& msg, bool on_sync = false);
  // BLS_CANCEL (monitor thread).
  void OnCancel(StubSession& session, const ipc::Message& msg);
  // The stub of `session` is gone.
  void OnStubGone(StubSession& session);

  TRITONSERVER_Server* server() const { return server_; }

 private:
  // A child of the trace of the incoming request `token` (nullptr when it has none, or is
  // gone); owned by the caller until handed to ServerInferAsync.
  TRITONSERVER_InferenceTrace* ChildTrace(uint64_t token);
  // OnExec's steps once the message is decoded (ipc::DecodeBlsExec): whether the call may be
  // made (throws BackendError), then the Triton request for it (`*req` is set as soon as it
  // exists, so the caller deletes it on a throw), then its start.
  void Validate(const ipc::BlsExecMsg& exec, bool on_sync);
  void Build(StubSession& session, const ipc::BlsExecMsg& exec, BlsCall* call,
             TRITONSERVER_InferenceRequest** req);
  void Start(BlsCall* call, TRITONSERVER_InferenceRequest* req, uint64_t parent_token);

  TRITONSERVER_Server* server_;
  std::string model_name_;
  std::string instance_name_;
  uint64_t inline_threshold_;
  RequestRegistry* registry_;
  std::shared_ptr<BlsTable> table_;
};

// Waits (bounded) until Triton has finished with every BLS request of this library: their
// callbacks are our code. False on timeout.
bool WaitBlsIdle(std::chrono::milliseconds timeout);

// Sends a BLS_RESPONSE that carries only an error, flagged FINAL (on sync: see OnExec).
void SendBlsError(StubSession& session, bool on_sync, uint64_t id, TRITONSERVER_Error_Code code,
                  const std::string& message);

}  // namespace pybackend
