// Per-instance state: its current stub session, the requests stubs may still talk about, the
// async handlers (response sends, cancellation queries, stub death) and the restarter that
// replaces a dead stub with a new one (with backoff) while the instance stays loaded.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backend/bls_cycles.h"
#include "backend/bls_service.h"
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

  // Stops restarting, FINALIZEs the stub, fails what still waits on it. Idempotent.
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
  std::shared_ptr<InstanceMetrics> metrics;  // pybackend_* series of this instance
  // This instance in the BLS cycle registry (bls_cycles.h), for every execute.
  std::shared_ptr<bls_cycles::InstanceSlot> bls_slot;

  // The current session; a batch keeps the one it started with even if a restart replaces it.
  std::shared_ptr<StubSession> session();
  // The session a new batch runs on. While a dead stub is being replaced, waits for the new
  // one (at most stub-timeout-seconds; a dead session comes back when the wait ends without
  // one, and the batch fails with its death). Returns nullptr with `*report` set when the
  // batch must fail instead: it is the first to meet a stub that died with no request
  // running, before the new stub serves, and it reports that death (the original's restart
  // failed the request that met the dead stub and served the next ones; NVIDIA's qa
  // `restart` test asserts exactly that).
  // nullptr with `*report` empty: the instance is finalized.
  std::shared_ptr<StubSession> SessionForBatch(std::string* report);
  // Batches inside ExecuteBatch now: a stub that dies while this is 0 died idle...
  std::atomic<int> running_batches{0};
  // ...unless a batch that ran on it already ended with its death (the batch can notice the
  // death before the monitor does): the last session whose death a batch reported.
  std::atomic<const StubSession*> death_told_by_batch{nullptr};
  RequestRegistry& registry() { return registry_; }
  // The message for requests that meet a dead stub (says whether a new one is coming).
  std::string UnhealthyMessage(StubSession& s);

  // AsyncHandler (monitor threads).
  void OnSend(StubSession& s, const ipc::Message& msg) override;
  void OnIsCancelled(StubSession& s, const ipc::Message& msg) override;
  void OnSenderDropped(StubSession& s, const ipc::Message& msg) override;
  void OnStubGone(StubSession& s) override;
  // BLS (bls_service.h) and model control (model_control.h) requests.
  bool OnOther(StubSession& s, const ipc::Message& msg) override;
  bool OnSyncCall(StubSession& s, const ipc::Message& msg) override;

 private:
  InstanceState() = default;
  // Spawns a stub and initializes the model in it; throws BackendError (with the stub's
  // error text and stderr tail when initialize failed).
  std::shared_ptr<StubSession> StartSession();
  void RestartLoop();
  // Sends an error FINAL to every released request with an open factory that belongs to
  // `owner` (every session when null). Returns how many requests it failed. `message` is
  // called once, only when there is one: describing a stub can wait for its process (a
  // shared one outlives a finalized instance, so that wait would be spent for nothing).
  int FailDetached(const void* owner, const std::function<std::string()>& message);

  RequestRegistry registry_;
  std::unique_ptr<BlsService> bls_;
  std::mutex mu_;  // guards session_ and the restart fields
  std::condition_variable cv_;
  std::shared_ptr<StubSession> session_;
  // The session StartSession is loading (initialize), for Finalize to end a restart's.
  std::shared_ptr<StubSession> starting_;
  bool finalized_ = false;
  bool stopping_ = false;
  bool restart_wanted_ = false;
  bool restart_failed_ = false;   // the last restart attempt failed: batches fail at once
  std::string restart_error_;     // why it failed, for the requests that fail meanwhile
  std::string unreported_death_;  // an idle stub's death, for the next batch (SessionForBatch)
  bool restart_enabled_ = true;
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point started_at_;
  uint64_t restarts_ = 0;
  std::thread restarter_;
};

}  // namespace pybackend
