// Requests the stub may still talk about, by token. The executor creates an entry per
// request of a batch; the monitor looks them up for SEND and IS_CANCELLED. An entry lives
// until its request is released and, when it has a response factory, until FINAL was sent.
#pragma once

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
  bool closed = false;         // FINAL went out, by whichever path
  bool sent_response = false;  // at least one response went out
  bool failed = false;         // an error of ours (not the model's own) went out (statistics)
  uint32_t release_flags = TRITONSERVER_REQUEST_RELEASE_ALL;
  // Outputs the client asked for; responses drop the others. Empty: keep everything.
  std::unordered_set<std::string> requested_outputs;

  // Deletes the factory if any (caller holds mu).
  void DeleteFactory();
  // A new response, from the factory when there is one (decoupled, or a sender taken),
  // else from the request while it is not released. Returns "" or the error text.
  std::string NewResponse(TRITONBACKEND_Response** resp);
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
