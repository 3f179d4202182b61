// Per-model state: the model config as Triton normalised it, the settings the backend reads
// from it, the interpreter for the stubs, and auto-complete (spec section 2.1).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "backend/backend_state.h"
#include "backend/execution_env.h"
#include "backend/instance_host.h"
#include "backend/json.h"
#include "backend/placement.h"
#include "backend/request_registry.h"
#include "backend/stub_session.h"
#include "triton/tritonbackend.h"

namespace pybackend {

class ModelState {
 public:
  // Reads the config, runs auto-complete when Triton asks for it. Throws BackendError.
  static std::unique_ptr<ModelState> Create(TRITONBACKEND_Model* model);
  ~ModelState();

  TRITONBACKEND_Model* model = nullptr;
  BackendState* backend = nullptr;
  std::string name;
  uint64_t version = 0;
  std::string repository;  // the model directory <repo>/<model>
  std::string config_text;
  json::Value config;
  bool decoupled = false;
  int64_t max_batch_size = 0;
  // Triton's queue for this model fails a request that waited too long (QueueExpires).
  bool queue_expires = false;
  std::string model_filename = "model.py";
  bool force_cpu_only_inputs = true;
  // Model parameter ISOLATE_GPU (docs/gpu.md): a KIND_GPU instance's stub sees only its own
  // device (CUDA_VISIBLE_DEVICES), so neither it nor its libraries touch another GPU (UV-28).
  bool isolate_gpu = false;
  std::string python;     // interpreter for this model's stubs
  ExecutionEnv exec_env;  // EXECUTION_ENV_PATH, prepared (empty fields when unset)
  // Threads per instance for OMP_NUM_THREADS etc. (0: off).
  int thread_budget = 0;
  int lane_spin_us = 0;  // both sides of the sync channel poll this long (lane_spin.h)
  int bls_spin_us = 0;   // a stub polls this long for the answer of a BLS call on sync
  // PYBACKEND_DEBUG (model parameter, else the server's environment): "" when off, else
  // how the first instance's stub offers a debugger (pdb, debugpy[:[HOST:]PORT],
  // debugpy-wait[...]). Debug mode needs one instance and lifts the stub and execute
  // timeouts, so a model stopped at a breakpoint is not taken for a hung one.
  std::string debug;
  // PYBACKEND_ATTACH_SOCKET: instances attach to the process listening there (pybackend.pytriton)
  std::string attach_socket;
  // PYBACKEND_INSTANCE_PROCESS (docs/instances.md): own (default), shared or fork; for the
  // last two, the process the instances share (started by the first instance that connects).
  InstanceProcess instance_process = InstanceProcess::kOwn;
  std::shared_ptr<InstanceHost> host;
  // Requests released with RESCHEDULE until they come back, to any instance.
  RescheduledRequests rescheduled;

  std::string VersionDir() const { return repository + "/" + std::to_string(version); }
  std::string ModelFile() const { return VersionDir() + "/" + model_filename; }

  json::Value InitArgs(const std::string& phase, const std::string& instance_name,
                       const std::string& kind, int32_t device_id) const;
  // `gpu_device`: the device of a KIND_GPU instance, -1 for any other.
  SessionOptions MakeSessionOptions(const std::string& instance_name, int gpu_device = -1) const;

  // The first instance's stub, spawned (not initialized) before auto-complete so that its
  // interpreter starts in parallel with the auto-complete stub: at model load the two
  // stub starts overlap instead of running one after the other. The instance named
  // `instance_name` takes it; anyone else gets nullptr (and spawns its own).
  std::shared_ptr<StubSession> TakeSpare(const std::string& instance_name, int gpu_device = -1);

 private:
  void SpawnSpare();

  std::mutex spare_mu_;
  std::shared_ptr<StubSession> spare_;
  int spare_asked_ = 0;  // instances that asked for it
  // The placement of the thread that spawned it (the model's load thread): an instance
  // created under another host_policy takes its own stub instead (placement.h).
  ThreadPlacement spare_placement_;

  void ReadConfig();
  void ReadParameters();
  void AutoComplete();
};

}  // namespace pybackend
