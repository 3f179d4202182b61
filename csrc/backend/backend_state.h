// Backend-wide state: the parsed --backend-config=python,... settings and where this
// library and the pybackend package live.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend_config.h"
#include "backend/instance_metrics.h"
#include "triton/tritonbackend.h"

namespace pybackend {

class BackendState {
 public:
  // Parses the backend config; throws BackendError with the spec's messages.
  static std::unique_ptr<BackendState> Create(TRITONBACKEND_Backend* backend);

  BackendConfig config;
  std::string name;            // "python" or a python-based backend's name
  std::string location;        // TRITONBACKEND_BackendArtifacts
  std::string library_path;    // this .so
  std::string library_dir;     // its directory
  std::string package_parent;  // directory holding the pybackend package ("" if not found)
  // runtime_modeldir for InitArgs: "DEFAULT", or the dir of a python-based backend's model.py.
  std::string runtime_modeldir = "DEFAULT";
  // The families of the per-instance metrics (null when instance-metrics=false).
  std::unique_ptr<InstanceMetricFamilies> instance_metric_families;

  // The interpreter when the model does not name one: backend config python-executable,
  // env PYBACKEND_PYTHON, the python_executable file next to the library, python3.
  std::string DefaultPython() const;
};

}  // namespace pybackend
