// Requests the stub may still talk about, by token. The executor creates an entry per
// request of a batch; the monitor looks them up for SEND and IS_CANCELLED. An entry lives
// until its request is released and, when it has a response factory, until FINAL was sent.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "triton/tritonbackend.h"

namespace pybackend {

struct RequestState {
  std::mutex mu;  // serialises executor and monitor work on this request
  uint64_t token = 0;
  const void* session = nullptr;  // the StubSession that got this request (identity only)
  TRITONBACKEND_Request* request = nullptr;  // valid until `released`
  TRITONBACKEND_ResponseFactory* factory = nullptr;
  bool released = false;
  bool closed = false;         // FINAL went out from this state, by whichever path
  bool sent_response = false;  // at least one response went out
  bool failed = false;         // an error of ours (not the model's own) went out (statistics)
  // Released with RESCHEDULE (decoupled): a sender kept from this execution may still send
  // through `factory` until FINAL, or until the stub reports its objects gone.
  bool rescheduled = false;
  // The stub reported the objects gone (SENDER_DROPPED) before the executor released the
  // request: the executor ends it, knowing by then whether it was rescheduled.
  bool dropped = false;
  uint32_t release_flags = TRITONSERVER_REQUEST_RELEASE_ALL;
  // Outputs the client asked for; responses drop the others. Empty: keep everything.
  std::unordered_set<std::string> requested_outputs;
  // Set once the request was rescheduled: shared by the states of all its executions, it
  // says whether FINAL went out for the request from any of them (RescheduledRequests).
  std::shared_ptr<std::atomic<bool>> request_final;

  // FINAL went out for the request: nothing may be sent for it any more (caller holds mu).
  bool Done() const { return closed || (request_final != nullptr && request_final->load()); }
  // FINAL went out from this state (caller holds mu).
  void MarkFinal() {
    closed = true;
    if (request_final != nullptr) request_final->store(true);
  }
  // Deletes the factory if any (caller holds mu).
  void DeleteFactory();
  // A new response, from the factory when there is one (decoupled, or a sender taken),
  // else from the request while it is not released. Returns "" or the error text.
  std::string NewResponse(TRITONBACKEND_Response** resp);
};

// Requests released with RESCHEDULE, until Triton sends them back to execute. A request that
// comes back is the same request: whether its FINAL went out carries over to the new
// execution. A model may send FINAL and then ask for RESCHEDULE (NVIDIA's qa
// request_rescheduling_cases does), or answer from a thread while the request comes back:
// any response or flag sent after the request's FINAL reaches a finished response stream,
// which crashes tritonserver 2.51 (SIGSEGV in TRITONBACKEND_ResponseSend). Model-wide: the
// request may come back to another instance.
class RescheduledRequests {
 public:
  // `st` is released with RESCHEDULE next (caller holds st.mu; st.request still valid).
  void Put(RequestState& st);
  // The request's FINAL flag when `request` is one that was rescheduled, else nullptr.
  std::shared_ptr<std::atomic<bool>> Take(TRITONBACKEND_Request* request);

 private:
  struct Entry {
    std::shared_ptr<std::atomic<bool>> final_flag;
    // A request Triton released itself while it waited (cancelled) never comes back, and
    // a new request may get its address: its id and correlation id tell them apart.
    std::string identity;
  };
  std::mutex mu_;
  std::unordered_map<TRITONBACKEND_Request*, Entry> map_;
  // map_.size(), read without the lock: every request of every batch asks, almost always
  // of an empty map (no model rescheduling anything).
  std::atomic<size_t> size_{0};
};

class RequestRegistry {
 public:
  std::shared_ptr<RequestState> Create(TRITONBACKEND_Request* request, const void* session);
  std::shared_ptr<RequestState> Find(uint64_t token);
  void Remove(uint64_t token);
  std::vector<std::shared_ptr<RequestState>> Snapshot();
  size_t size();

 private:
  std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<RequestState>> map_;
};

}  // namespace pybackend
