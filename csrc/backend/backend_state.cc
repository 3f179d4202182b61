#include "backend/backend_state.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <fstream>

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

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  if (realpath(p.c_str(), buf) == nullptr) return p;
  return buf;
}

std::string Dirname(const std::string& p) {
  size_t slash = p.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

bool IsFile(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

void AnchorForDladdr() {}

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
  return key == "auto-complete-config" || key == "backend-directory" ||
         key == "min-compute-capability" || key == "default-max-batch-size";
}

// The original ignores keys it does not know, so we do too; but a misspelt key (the queue
// size's underscores, a hyphen for an underscore) silently does nothing, so say so.
void WarnUnknownKey(const std::string& key) {
  static const char* const kKnown[] = {"shm-default-byte-size",  "shm-growth-byte-size",
                                       "shm-max-byte-size",      "stub-timeout-seconds",
                                       "shm_message_queue_size", "thread-pool-size",
                                       "shm-region-prefix-name", "python-executable",
                                       "inline-threshold",       "ipc-spin-us",
                                       "execute-spin-us",        "execute-timeout-seconds",
                                       "stub-restart",           "ipc-lane",
                                       "instance-metrics",       "stub-restart-max-backoff-seconds",
                                       "thread-budget"};
  auto fold = [](std::string s) {
    for (char& ch : s) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(ch));
    return s;
  };
  std::string hint;
  for (const char* known : kKnown) {
    if (fold(known) == fold(key)) hint = std::string("; did you mean '") + known + "'?";
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
    if (key == "shm-default-byte-size") {
      int64_t n = ParseInt(key, value);
      // The check is 1 MiB; the text says 4 MiB. Both are what the original does.
      if (n < (1 << 20)) {
        Throw(TRITONSERVER_ERROR_INVALID_ARG, "shm-default-byte-size can't be smaller than 4 MiBs");
      }
      c->shm_default_byte_size = static_cast<uint64_t>(n);
    } else if (key == "shm-growth-byte-size") {
      int64_t n = ParseInt(key, value);
      if (n <= 0) {
        Throw(TRITONSERVER_ERROR_INVALID_ARG,
              "shm-growth-byte-size can't be smaller than or equal to zero.");
      }
      c->shm_growth_byte_size = static_cast<uint64_t>(n);
    } else if (key == "shm-max-byte-size") {
      int64_t n = ParseInt(key, value);
      if (n < 0) Throw(TRITONSERVER_ERROR_INVALID_ARG, "shm-max-byte-size can't be negative.");
      c->shm_max_byte_size = static_cast<uint64_t>(n);
    } else if (key == "stub-timeout-seconds") {
      int64_t n = ParseInt(key, value);
      if (n <= 0) {
        Throw(TRITONSERVER_ERROR_INVALID_ARG,
              "stub-timeout-seconds can't be smaller than or equal to zero.");
      }
      c->stub_timeout_seconds = ClampSeconds(key, n);
    } else if (key == "shm_message_queue_size") {
      c->shm_message_queue_size = ParseInt(key, value);
    } else if (key == "thread-pool-size") {
      int64_t n = ParseInt(key, value);
      if (n < 1) Throw(TRITONSERVER_ERROR_INVALID_ARG, "thread-pool-size can't be less than 1.");
      c->thread_pool_size = n;
    } else if (key == "shm-region-prefix-name") {
      if (value.empty()) {
        Throw(TRITONSERVER_ERROR_INVALID_ARG,
              "shm-region-prefix-name must at least contain one character.");
      }
      c->shm_region_prefix = value;
    } else if (key == "python-executable") {
      c->python_executable = value;
    } else if (key == "inline-threshold") {
      int64_t n = ParseInt(key, value);
      if (n < 0) Throw(TRITONSERVER_ERROR_INVALID_ARG, "inline-threshold can't be negative.");
      c->inline_threshold = static_cast<uint64_t>(n);
    } else if (key == "ipc-spin-us" || key == "execute-spin-us") {
      // execute-spin-us: the earlier name, from when only the backend's side polled.
      if (value == "auto") {
        c->ipc_spin_us = kLaneSpinAuto;
      } else {
        int64_t n = ParseInt(key, value);
        if (n < 0 || n > 1000000) {
          Throw(TRITONSERVER_ERROR_INVALID_ARG,
                key + " must be \"auto\" or between 0 and 1000000 (microseconds, 0 = off).");
        }
        c->ipc_spin_us = n;
      }
    } else if (key == "execute-timeout-seconds") {
      int64_t n = ParseInt(key, value);
      if (n < 0) {
        Throw(TRITONSERVER_ERROR_INVALID_ARG, "execute-timeout-seconds can't be negative.");
      }
      c->execute_timeout_seconds = ClampSeconds(key, n);
    } else if (key == "stub-restart" || key == "ipc-lane" || key == "instance-metrics") {
      bool on;
      if (value == "true" || value == "1" || value == "yes" || value == "on") {
        on = true;
      } else if (value == "false" || value == "0" || value == "no" || value == "off") {
        on = false;
      } else {
        Throw(TRITONSERVER_ERROR_INVALID_ARG,
              "backend config '" + key + "' must be true or false, got '" + value + "'");
      }
      (key == "stub-restart" ? c->stub_restart
       : key == "ipc-lane"   ? c->ipc_lane
                             : c->instance_metrics) = on;
    } else if (key == "stub-restart-max-backoff-seconds") {
      int64_t n = ParseInt(key, value);
      if (n <= 0) {
        Throw(TRITONSERVER_ERROR_INVALID_ARG,
              "stub-restart-max-backoff-seconds can't be smaller than or equal to zero.");
      }
      c->stub_restart_max_backoff_ms = ClampSeconds(key, n) * 1000;
    } else if (key == "thread-budget") {
      if (value == "true" || value == "1" || value == "yes" || value == "on") {
        c->thread_budget = true;
      } else if (value == "false" || value == "0" || value == "no" || value == "off") {
        c->thread_budget = false;
      } else {
        Throw(TRITONSERVER_ERROR_INVALID_ARG,
              "backend config 'thread-budget' must be true or false, got '" + value + "'");
      }
    } else if (key == "backend-directory") {
      c->backend_directory = value;
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

std::unique_ptr<BackendState> BackendState::Create(TRITONBACKEND_Backend* backend) {
  auto state = std::make_unique<BackendState>();
  const char* name = nullptr;
  Check(TRITONBACKEND_BackendName(backend, &name), "TRITONBACKEND_BackendName");
  state->name = name != nullptr ? name : "python";

  TRITONSERVER_Message* msg = nullptr;
  Check(TRITONBACKEND_BackendConfig(backend, &msg), "TRITONBACKEND_BackendConfig");
  const char* buf = nullptr;
  size_t len = 0;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(msg, &buf, &len);
  std::string text = err == nullptr ? std::string(buf, len) : "{}";
  // The backend config message belongs to Triton (unlike a model config): no delete here.
  Check(err, "TRITONSERVER_MessageSerializeToJson");
  PB_LOG_VERBOSE("backend configuration:\n" + text);
  ParseBackendConfig(text, &state->config);
  PB_LOG_VERBOSE("Shared memory configuration is shm-default-byte-size=" +
                 std::to_string(state->config.shm_default_byte_size) +
                 ",shm-growth-byte-size=" + std::to_string(state->config.shm_growth_byte_size) +
                 ",stub-timeout-seconds=" + std::to_string(state->config.stub_timeout_seconds));

  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&AnchorForDladdr), &info) != 0 && info.dli_fname) {
    state->library_path = RealPath(info.dli_fname);
    state->library_dir = Dirname(state->library_path);
  }
  if (state->config.instance_metrics) {
    state->instance_metric_families = std::make_unique<InstanceMetricFamilies>();
  }
  // <package>/backends/python/libtriton_python.so: the package is two levels up. A copy of
  // this library in a python-based backend's own directory (backends/<runtime>/, which the
  // original lets a runtime ship) has no package beside it: backends/python's serves then.
  std::string package = RealPath(state->library_dir + "/../..");
  if (!IsFile(package + "/stub/__main__.py") && !state->config.backend_directory.empty()) {
    std::string ours = RealPath(state->config.backend_directory + "/python/../..");
    if (IsFile(ours + "/stub/__main__.py")) package = ours;
  }
  if (IsFile(package + "/stub/__main__.py")) {
    state->package_parent = Dirname(package);
  } else {
    PB_LOG_VERBOSE("no pybackend package at " + package +
                   "; the stub's interpreter must have pybackend installed");
  }

  TRITONBACKEND_ArtifactType type;
  const char* location = nullptr;
  Check(TRITONBACKEND_BackendArtifacts(backend, &type, &location),
        "TRITONBACKEND_BackendArtifacts");
  state->location = location != nullptr ? location : "";
  // A python-based backend (backends/<name>/model.py) loads us with its own directory as
  // artifacts: with no library of its own, ours from backends/python; with one (the original's
  // "custom backend's artifacts take priority", e.g. a copy of ours with its own
  // python_executable), that copy. As the original: any directory but
  // <backend-directory>/python that holds a model.py.
  std::string python_dir = state->config.backend_directory.empty()
                               ? state->library_dir
                               : RealPath(state->config.backend_directory + "/python");
  if (!state->location.empty() && RealPath(state->location) != python_dir &&
      IsFile(state->location + "/model.py")) {
    state->runtime_modeldir = state->location;
  }
  return state;
}

std::string BackendState::DefaultPython() const {
  if (!config.python_executable.empty()) return config.python_executable;
  const char* env = std::getenv("PYBACKEND_PYTHON");
  if (env != nullptr && *env != '\0') return env;
  std::ifstream f(library_dir + "/python_executable");
  std::string line;
  if (f && std::getline(f, line)) {
    line = Trim(line);
    if (!line.empty()) return line;
  }
  return "python3";
}

}  // namespace pybackend
