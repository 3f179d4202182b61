// Per-instance state: its stub session, the requests the stub may still talk about, and the
// async handlers (response sends, cancellation queries, stub death).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/model_state.h"
#include "backend/request_registry.h"
#include "backend/stub_session.h"
#include "triton/tritonbackend.h"

namespace pybackend {

class InstanceState : public AsyncHandler {
 public:
  // Starts the stub and initializes the model in it. Throws BackendError.
  static std::unique_ptr<InstanceState> Create(TRITONBACKEND_ModelInstance* instance,
                                               ModelState* model);
  ~InstanceState() override;

  // FINALIZE the stub, fail what still waits on it, release everything. Idempotent.
  void Finalize();
  // nullptr when the stub is alive; INTERNAL "Stub process '<name>' is not healthy." if not.
  TRITONSERVER_Error* Ready();

  TRITONBACKEND_ModelInstance* instance = nullptr;
  ModelState* model = nullptr;
  std::string name;
  std::string kind;  // "CPU", "GPU", ...
  int32_t device_id = 0;
  bool has_is_ready = false;
  bool is_async_execute = false;
  uint64_t next_batch_id = 1;

  StubSession& session() { return *session_; }
  RequestRegistry& registry() { return registry_; }

  // AsyncHandler (monitor thread).
  void OnSend(const ipc::Message& msg) override;
  void OnIsCancelled(const ipc::Message& msg) override;
  void OnStubGone() override;

 private:
  InstanceState() = default;
  // Sends an error FINAL to every request that was released with an open factory.
  void FailDetached(const std::string& message);

  RequestRegistry registry_;
  std::unique_ptr<StubSession> session_;
  bool finalized_ = false;
};

}  // namespace pybackend
