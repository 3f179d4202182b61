#include "backend/backend_config.h"

#include <cctype>
#include <string>

#include "backend/error.h"
#include "backend/json.h"
#include "backend/logging.h"

namespace pybackend {
namespace {

int64_t ParseInt(const std::string& key, const std::string& value) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size()) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG,
          "backend config '" + key + "' must be an integer, got '" + value + "'");
  }
  return v;
}

bool ParseBool(const std::string& key, const std::string& value) {
  if (value == "true" || value == "1" || value == "yes" || value == "on") return true;
  if (value == "false" || value == "0" || value == "no" || value == "off") return false;
  Throw(TRITONSERVER_ERROR_INVALID_ARG,
        "backend config '" + key + "' must be true or false, got '" + value + "'");
  return false;
}

// The longest wait a seconds setting may ask for: the backend's waits take milliseconds as an
// int (poll, the socket sends), so more would wrap around to a negative or a short bound, and
// 10^10 s would already overflow a steady_clock deadline. 2147483 s is about 24.8 days.
constexpr int64_t kMaxWaitSeconds = 2147483;

// A seconds setting the original accepts at any positive size (stub-timeout-seconds is even
// unused there): an operator who means "never" writes a row of nines. Clamped, with a warning.
int64_t ClampSeconds(const std::string& key, int64_t n) {
  if (n <= kMaxWaitSeconds) return n;
  PB_LOG_WARN("backend config " + key + "=" + std::to_string(n) +
              " is longer than the longest wait the Python backend can keep (" +
              std::to_string(kMaxWaitSeconds) + " s, about 24 days); using " +
              std::to_string(kMaxWaitSeconds) + " s");
  return kMaxWaitSeconds;
}

// Keys Triton's core puts into every backend's config (tritonserver --backend-directory, ...).
bool IsGlobalKey(const std::string& key) {
  return key == "auto-complete-config" || key == "min-compute-capability" ||
         key == "default-max-batch-size";
}

template <int64_t BackendConfig::* Field>
void SetSpin(const std::string& key, const std::string& value, BackendConfig* c) {
  if (value == "auto") {
    c->*Field = kLaneSpinAuto;
    return;
  }
  int64_t n = ParseInt(key, value);
  if (n < 0 || n > 1000000) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG,
          key + " must be \"auto\" or between 0 and 1000000 (microseconds, 0 = off).");
  }
  c->*Field = n;
}

// A bound of ours in seconds where 0 means none (execute-, initialize-, finalize-timeout-
// seconds): a negative value is refused, a very long one clamped.
template <int64_t BackendConfig::* Field>
void SetBoundSeconds(const std::string& key, const std::string& value, BackendConfig* c) {
  int64_t n = ParseInt(key, value);
  if (n < 0) Throw(TRITONSERVER_ERROR_INVALID_ARG, key + " can't be negative.");
  c->*Field = ClampSeconds(key, n);
}

// Every setting of the backend: its key and what it does with a value. The texts of the
// original's settings are the original's.
struct Setting {
  const char* key;
  void (*apply)(const std::string& key, const std::string& value, BackendConfig* c);
};

constexpr Setting kSettings[] = {
    {"shm-default-byte-size",
     [](const std::string& key, const std::string& value, BackendConfig* c) {
       int64_t n = ParseInt(key, value);
       // The check is 1 MiB; the text says 4 MiB. Both are what the original does.
       if (n < (1 << 20)) {
         Throw(TRITONSERVER_ERROR_INVALID_ARG,
               "shm-default-byte-size can't be smaller than 4 MiBs");
       }
       c->shm_default_byte_size = static_cast<uint64_t>(n);
     }},
    {"shm-growth-byte-size",
     [](const std::string& key, const std::string& value, BackendConfig* c) {
       int64_t n = ParseInt(key, value);
       if (n <= 0) {
         Throw(TRITONSERVER_ERROR_INVALID_ARG,
               "shm-growth-byte-size can't be smaller than or equal to zero.");
       }
       c->shm_growth_byte_size = static_cast<uint64_t>(n);
     }},
    {"shm-max-byte-size",
     [](const std::string& key, const std::string& value, BackendConfig* c) {
       int64_t n = ParseInt(key, value);
       if (n < 0) Throw(TRITONSERVER_ERROR_INVALID_ARG, "shm-max-byte-size can't be negative.");
       c->shm_max_byte_size = static_cast<uint64_t>(n);
     }},
    {"stub-timeout-seconds",
     [](const std::string& key, const std::string& value, BackendConfig* c) {
       int64_t n = ParseInt(key, value);
       if (n <= 0) {
         Throw(TRITONSERVER_ERROR_INVALID_ARG,
               "stub-timeout-seconds can't be smaller than or equal to zero.");
       }
       c->stub_timeout_seconds = ClampSeconds(key, n);
     }},
    {"shm_message_queue_size",
     [](const std::string& key, const std::string& value, BackendConfig* c) {
       c->shm_message_queue_size = ParseInt(key, value);
     }},
    {"thread-pool-size",
     [](const std::string& key, const std::string& value, BackendConfig* c) {
       int64_t n = ParseInt(key, value);
       if (n < 1) Throw(TRITONSERVER_ERROR_INVALID_ARG, "thread-pool-size can't be less than 1.");
       c->thread_pool_size = n;
     }},
    {"shm-region-prefix-name",
     [](const std::string&, const std::string& value, BackendConfig* c) {
       if (value.empty()) {
         Throw(TRITONSERVER_ERROR_INVALID_ARG,
               "shm-region-prefix-name must at least contain one character.");
       }
       c->shm_region_prefix = value;
     }},
    {"python-executable", [](const std::string&, const std::string& value,
                             BackendConfig* c) { c->python_executable = value; }},
    {"inline-threshold",
     [](const std::string& key, const std::string& value, BackendConfig* c) {
       int64_t n = ParseInt(key, value);
       if (n < 0) Throw(TRITONSERVER_ERROR_INVALID_ARG, "inline-threshold can't be negative.");
       c->inline_threshold = static_cast<uint64_t>(n);
     }},
    {"ipc-spin-us", SetSpin<&BackendConfig::ipc_spin_us>},
    // The earlier name of ipc-spin-us, from when only the backend's side polled.
    {"execute-spin-us", SetSpin<&BackendConfig::ipc_spin_us>},
    {"ipc-bls-spin-us", SetSpin<&BackendConfig::ipc_bls_spin_us>},
    {"execute-timeout-seconds", SetBoundSeconds<&BackendConfig::execute_timeout_seconds>},
    {"initialize-timeout-seconds", SetBoundSeconds<&BackendConfig::initialize_timeout_seconds>},
    {"finalize-timeout-seconds", SetBoundSeconds<&BackendConfig::finalize_timeout_seconds>},
    {"stub-restart", [](const std::string& key, const std::string& value,
                        BackendConfig* c) { c->stub_restart = ParseBool(key, value); }},
    {"ipc-lane", [](const std::string& key, const std::string& value,
                    BackendConfig* c) { c->ipc_lane = ParseBool(key, value); }},
    {"instance-metrics", [](const std::string& key, const std::string& value,
                            BackendConfig* c) { c->instance_metrics = ParseBool(key, value); }},
    {"stub-restart-max-backoff-seconds",
     [](const std::string& key, const std::string& value, BackendConfig* c) {
       int64_t n = ParseInt(key, value);
       if (n <= 0) {
         Throw(TRITONSERVER_ERROR_INVALID_ARG,
               "stub-restart-max-backoff-seconds can't be smaller than or equal to zero.");
       }
       c->stub_restart_max_backoff_ms = ClampSeconds(key, n) * 1000;
     }},
    {"thread-budget", [](const std::string& key, const std::string& value,
                         BackendConfig* c) { c->thread_budget = ParseBool(key, value); }},
    // Triton's core passes its --backend-directory to every backend; ours finds its package
    // by it when this library is a copy in a python-based backend's directory.
    {"backend-directory", [](const std::string&, const std::string& value,
                             BackendConfig* c) { c->backend_directory = value; }},
};

// The original ignores keys it does not know, so we do too; but a misspelt key (the queue
// size's underscores, a hyphen for an underscore) silently does nothing, so say so.
void WarnUnknownKey(const std::string& key) {
  auto fold = [](std::string s) {
    for (char& ch : s) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(ch));
    return s;
  };
  std::string hint;
  for (const Setting& known : kSettings) {
    if (fold(known.key) == fold(key)) hint = std::string("; did you mean '") + known.key + "'?";
  }
  PB_LOG_WARN("backend config '" + key + "' is not a setting of the Python backend and is ignored" +
              hint + " (the settings are listed in pybackend's csrc/README.md)");
}

}  // namespace

void ParseBackendConfig(const std::string& json_text, BackendConfig* c) {
  json::Value doc;
  try {
    doc = json::Value::Parse(json_text);
  } catch (const json::ParseError& e) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG, std::string("backend config: ") + e.what());
  }
  const json::Value* cmdline = doc.Find("cmdline");
  if (cmdline == nullptr || !cmdline->is_object()) return;
  for (const auto& [key, v] : cmdline->members()) {
    std::string value = v.is_string() ? v.AsString() : v.Dump();
    const Setting* setting = nullptr;
    for (const Setting& s : kSettings) {
      if (key == s.key) setting = &s;
    }
    if (setting != nullptr) {
      setting->apply(key, value, c);
    } else if (!IsGlobalKey(key)) {
      WarnUnknownKey(key);
    }
  }
  if (c->shm_max_byte_size != 0 && c->shm_max_byte_size < c->shm_default_byte_size) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG,
          "shm-max-byte-size (" + std::to_string(c->shm_max_byte_size) +
              ") must be 0 (no limit) or at least shm-default-byte-size (" +
              std::to_string(c->shm_default_byte_size) + ")");
  }
}

}  // namespace pybackend
