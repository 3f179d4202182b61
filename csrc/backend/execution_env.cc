#include "backend/execution_env.h"

#include "backend/backend_state.h"
#include "backend/error.h"
#include "backend/helper_process.h"
#include "backend/json.h"
#include "backend/logging.h"

namespace pybackend {

ExecutionEnv PrepareExecutionEnv(const std::string& model, const std::string& model_dir,
                                 const std::string& value, const BackendState& backend) {
  SpawnOptions helper;
  helper.python = backend.DefaultPython();
  helper.args = {"-m", "pybackend.execution_env", "--model-dir", model_dir, value};
  helper.pythonpath_prepend = backend.package_parent;
  helper.env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
  HelperResult r;
  try {
    r = RunHelper(helper);
  } catch (const BackendError& e) {
    Throw(TRITONSERVER_ERROR_INTERNAL, "model '" + model + "': EXECUTION_ENV_PATH '" + value +
                                           "' cannot be prepared: " + e.message());
  }
  if (!r.ok()) {
    std::string why = r.err;
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    if (why.empty()) why = "python -m pybackend.execution_env " + r.Describe();
    Throw(TRITONSERVER_ERROR_INVALID_ARG, "model '" + model + "': " + why);
  }
  ExecutionEnv env;
  try {
    json::Value doc = json::Value::Parse(r.out);
    env.prefix = doc.GetString("prefix");
    env.python = doc.GetString("python");
    env.pythonpath = doc.GetString("pythonpath");
    if (const json::Value* vars = doc.Find("env")) {
      for (const auto& [k, v] : vars->members()) env.env.emplace_back(k, v.AsString());
    }
    if (const json::Value* unset = doc.Find("unset")) {
      for (const auto& k : unset->items()) env.unset.push_back(k.AsString());
    }
    std::string note = doc.GetString("note");
    if (!note.empty()) PB_LOG_INFO("model '" + model + "': EXECUTION_ENV_PATH: " + note);
  } catch (const json::ParseError& e) {
    Throw(TRITONSERVER_ERROR_INTERNAL, "model '" + model +
                                           "': python -m pybackend.execution_env printed no "
                                           "JSON (" +
                                           e.what() + "): " + r.out + r.err);
  }
  if (env.python.empty()) {
    Throw(TRITONSERVER_ERROR_INTERNAL,
          "model '" + model + "': python -m pybackend.execution_env named no interpreter");
  }
  return env;
}

}  // namespace pybackend
