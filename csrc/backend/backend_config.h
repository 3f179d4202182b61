// The --backend-config=python,<key>=<value> settings: their defaults and the one table that
// parses them (backend_config.cc), which also names the keys a misspelt one is compared with.
#pragma once

#include <cstdint>
#include <string>

#include "backend/lane_spin.h"

namespace pybackend {

struct BackendConfig {
  uint64_t shm_default_byte_size = 1 << 20;
  uint64_t shm_growth_byte_size = 1 << 20;
  uint64_t shm_max_byte_size = 0;  // ours: bound on each arena (0 = none)
  int64_t stub_timeout_seconds = 30;
  int64_t shm_message_queue_size = 1000;  // accepted for compatibility, unused
  int64_t thread_pool_size = 32;
  std::string shm_region_prefix = "triton_python_backend_shm_region_";
  std::string python_executable;            // ours: interpreter for the stubs
  uint64_t inline_threshold = 4096;         // ours: tensors up to this size travel in the message
  int64_t ipc_spin_us = kLaneSpinAuto;      // ours: poll before sleeping on sync (lane_spin.h)
  int64_t ipc_bls_spin_us = kLaneSpinAuto;  // ours: a BLS call's answer polled (lane_spin.h)
  int64_t execute_timeout_seconds = 0;      // ours: 0 = an execute may take as long as it needs
  // ours: bound on a stub's load (model.py's import, auto_complete_config, initialize); 0 =
  // none, as the original's (a model that loads weights for minutes loads).
  int64_t initialize_timeout_seconds = 0;
  // ours: bound on a stub's finalize; 0 = none, as the original's (a model that saves its
  // state for minutes in finalize is not killed).
  int64_t finalize_timeout_seconds = 0;
  bool stub_restart = true;  // ours: replace a dead stub with a new one
  bool ipc_lane = true;      // ours: EXECUTE/RESULT through shared memory (ipc/lane.h)
  int64_t stub_restart_max_backoff_ms = 30000;  // ours: the longest pause between restarts
  bool thread_budget = true;     // ours: OMP_NUM_THREADS etc. per instance when unset (UV-13)
  bool instance_metrics = true;  // ours: pybackend_* Prometheus metrics per instance (UV-38)
  std::string backend_directory;
};

// Parses the JSON text of a backend config message into `config` (exposed for tests); throws
// BackendError with the original's messages. Unknown keys are ignored, as by the original,
// with a warning (naming the setting meant, for a near miss).
void ParseBackendConfig(const std::string& json_text, BackendConfig* config);

}  // namespace pybackend
