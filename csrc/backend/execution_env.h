// EXECUTION_ENV_PATH: the Python environment a model's stubs run in. Resolving it (a
// directory, or an archive unpacked once into a cache) is done by
// `python -m pybackend.execution_env`, run at model load with the backend's own interpreter.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pybackend {

class BackendState;

struct ExecutionEnv {
  std::string prefix;      // the environment's directory ("" when the model has none)
  std::string python;      // <prefix>/bin/python3
  std::string pythonpath;  // holds pybackend only: first on the stubs' PYTHONPATH
  std::vector<std::pair<std::string, std::string>> env;  // VIRTUAL_ENV, PATH, ...
  std::vector<std::string> unset;                        // PYTHONHOME
};

// `value` is the parameter with $$TRITON_MODEL_DIRECTORY already replaced; a relative path
// is taken from `model_dir`. Throws BackendError (INVALID_ARG) with the helper's reason.
ExecutionEnv PrepareExecutionEnv(const std::string& model, const std::string& model_dir,
                                 const std::string& value, const BackendState& backend);

}  // namespace pybackend
