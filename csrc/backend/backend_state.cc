#include "backend/backend_state.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "backend/error.h"
#include "backend/logging.h"

namespace pybackend {
namespace {

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

}  // namespace

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
