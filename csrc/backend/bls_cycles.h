// BLS calls that could never be answered (docs/reliability.md, "BLS call cycles"): a model
// whose execute makes a blocking BLS call to itself, or through other models back to
// itself, while every instance of the target is itself blocked in such a call, waits
// forever (on the original too). The registry here sees every model of this backend library
// (one library serves all python models of the server) and answers such a call at once with
// an error naming the cycle and the fix, while a cycle that a free instance can serve runs.
//
// What it tracks, under one mutex: per model, its instances and which are inside execute;
// per BLS call in flight, who made it, whether the caller's execute thread blocks on it,
// which model it targets, which instance serves it (the callee request Triton hands our
// backend is the one we created), and the chain of models that led to the caller.
//
// Every execute of every model passes through Executing, so its common case is cheap: the
// instance is a slot the instance state holds (no name lookup or copy), and while no BLS
// call is in flight anywhere no request of the batch can be a callee request (one is
// registered by Begin before it is sent), so an execute only counts itself busy in the slot,
// with no lock and no copy. The registry's mutex is taken only when a BLS call is in flight.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/json.h"
#include "backend/request_registry.h"
#include "triton/tritonbackend.h"

namespace pybackend::bls_cycles {

// An instance as the registry knows it (its model and name; a reload's two generations of
// one name share it). The instance state holds it from AddInstance until it is deleted.
struct InstanceSlot;

// Whether Triton's queue for a model (its configuration as JSON) fails a BLS request that
// waited too long: a dynamic batcher whose policy for it (the default queue policy, or the
// default priority level's where there are levels) has a default_timeout_microseconds and
// the REJECT action (DELAY only moves the request back). Measured on tritonserver 2.51: a
// request's own timeout is taken only below such a default (allow_timeout_override), and
// ignored where there is none, with or without a dynamic batcher, so a queued call never
// expires by its timeout alone.
bool QueueExpires(const json::Value& config);

// An instance of ours was initialized / finalized. Keep the slot AddInstance returns for
// Executing, past RemoveInstance until the instance state goes. `queue_expires`: Triton's
// queue for the model fails a request that waits too long (QueueExpires above), so a
// call queued there ends on its own even while no instance can take it.
std::shared_ptr<InstanceSlot> AddInstance(const std::string& model, const std::string& instance,
                                          bool queue_expires = false);
// `queue_expires`: as given to AddInstance for this generation of the instance.
void RemoveInstance(const std::string& model, const std::string& instance,
                    bool queue_expires = false);

// While alive: the slot's instance is inside TRITONBACKEND_ModelInstanceExecute with these
// requests (the BLS calls among them are now served by it).
class Executing {
 public:
  Executing(InstanceSlot& slot, TRITONBACKEND_Request** requests, uint32_t count);
  ~Executing();
  Executing(const Executing&) = delete;
  Executing& operator=(const Executing&) = delete;

 private:
  InstanceSlot& slot_;
  // The requests of the batch that were BLS callee requests when execute began: the only
  // ones the registry can ever know. Usually none (then nothing is copied or locked).
  std::vector<const void*> served_;
};

// What Begin needs to know about a BLS call about to be started.
struct CallInfo {
  const void* call = nullptr;            // identity of the call until End
  const void* callee_request = nullptr;  // the TRITONSERVER_InferenceRequest we created
  const void* parent_request = nullptr;  // the caller's TRITONBACKEND_Request, if known
  std::string caller_model;
  std::string caller_instance;
  std::string callee_model;
  // The caller's execute thread waits for the answer (a sync exec()): only such calls can
  // block an instance for good. A call's timeout= does not make it end: Triton takes it
  // only where the target's queue policy has a timeout of its own (which AddInstance's
  // queue_expires tells), and ignores it everywhere else.
  bool blocking = false;
};

// "" when the call may go ahead (it is registered: End must follow); otherwise the error
// text for the caller, naming the cycle and the fix (nothing is registered).
std::string Begin(const CallInfo& info);
// The caller's request behind a BLS_EXEC's parent token (nullptr when unknown or released).
const void* ParentRequest(RequestRegistry* registry, uint64_t token);
// The call is answered (its FINAL response) or was never started. Idempotent.
void End(const void* call);

}  // namespace pybackend::bls_cycles
