#include "backend/model_state.h"

#include <sys/stat.h>

#include <cstdlib>

#include "backend/bls_cycles.h"
#include "backend/cores.h"
#include "backend/error.h"
#include "backend/execution_env.h"
#include "backend/lane_spin.h"
#include "backend/logging.h"
#include "backend/thread_budget.h"
#include "cuda/device_holds.h"
#include "ipc/protocol.h"

namespace pybackend {
namespace {

// parameters { key: K value { string_value: V } } as JSON.
bool GetParameter(const json::Value& config, const std::string& key, std::string* value) {
  const json::Value* params = config.Find("parameters");
  if (params == nullptr) return false;
  const json::Value* p = params->Find(key);
  if (p == nullptr) return false;
  const json::Value* sv = p->Find("string_value");
  if (sv == nullptr || !sv->is_string()) return false;
  *value = sv->AsString();
  return true;
}

void ReplaceAll(std::string* s, const std::string& from, const std::string& to) {
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size())) {
    s->replace(at, from.size(), to);
  }
}

// A `triton_python_backend_stub` that a user built for the original (it runs a model with
// another Python) and left next to the model: the original would run it, we never do. One
// line per model load says so and names what chooses the interpreter here.
void NoteUnusedStubFile(const ModelState& m) {
  for (const std::string& dir : {m.repository, m.VersionDir()}) {
    std::string path = dir + "/triton_python_backend_stub";
    struct stat st = {};
    if (stat(path.c_str(), &st) != 0) continue;
    PB_LOG_WARN("model '" + m.name + "': " + path +
                " is not needed and is not used: pybackend has no stub binary, its stubs run " +
                m.python +
                "; to run this model with another Python, set the model parameter "
                "EXECUTION_ENV_PATH (or --backend-config=python,python-executable=<path> for "
                "every model)");
    return;
  }
}

}  // namespace

std::unique_ptr<ModelState> ModelState::Create(TRITONBACKEND_Model* model) {
  auto state = std::make_unique<ModelState>();
  state->model = model;
  const char* name = nullptr;
  Check(TRITONBACKEND_ModelName(model, &name), "TRITONBACKEND_ModelName");
  state->name = name;
  Check(TRITONBACKEND_ModelVersion(model, &state->version), "TRITONBACKEND_ModelVersion");
  PB_LOG_VERBOSE("TRITONBACKEND_ModelInitialize: " + state->name + " (version " +
                 std::to_string(state->version) + ")");
  TRITONBACKEND_ArtifactType type;
  const char* location = nullptr;
  Check(TRITONBACKEND_ModelRepository(model, &type, &location), "TRITONBACKEND_ModelRepository");
  if (type != TRITONBACKEND_ARTIFACT_FILESYSTEM) {
    Throw(TRITONSERVER_ERROR_UNSUPPORTED,
          "unsupported artifact type for model '" + state->name + "'");
  }
  state->repository = location;
  TRITONBACKEND_Backend* backend = nullptr;
  Check(TRITONBACKEND_ModelBackend(model, &backend), "TRITONBACKEND_ModelBackend");
  void* vstate = nullptr;
  Check(TRITONBACKEND_BackendState(backend, &vstate), "TRITONBACKEND_BackendState");
  state->backend = static_cast<BackendState*>(vstate);

  state->ReadConfig();
  state->ReadParameters();
  NoteUnusedStubFile(*state);
  bool auto_complete = false;
  Check(TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete),
        "TRITONBACKEND_ModelAutoCompleteConfig");
  // An attached model's process wrote its whole configuration and is already running: no
  // early stub, nothing to complete.
  if (!state->attach_socket.empty()) return state;
  // Shared instances connect to one host process instead (instance_host.h).
  if (state->host == nullptr) state->SpawnSpare();
  if (auto_complete) {
    state->AutoComplete();
    state->ReadConfig();  // decoupled, max_batch_size may have changed
  }
  PB_LOG_VERBOSE("model configuration:\n" + json::Pretty(state->config_text));
  return state;
}

ModelState::~ModelState() {
  std::shared_ptr<StubSession> spare;
  {
    std::lock_guard<std::mutex> lock(spare_mu_);
    spare.swap(spare_);
  }
  if (spare != nullptr) spare->Discard();  // no instance came for it (failed load, count 0)
}

void ModelState::SpawnSpare() {
  // Triton names instances "<group name>_<index>" and fills in the group names before the
  // backend sees the config, so the first instance's name is known now.
  const json::Value* groups = config.Find("instance_group");
  if (groups == nullptr || !groups->is_array() || groups->items().empty()) return;
  const json::Value& first = groups->items().front();
  const json::Value* count = first.Find("count");
  if (count != nullptr && count->is_number() && count->AsInt() < 1) return;
  std::string group_name = first.GetString("name");
  if (group_name.empty()) return;
  auto spare = std::make_shared<StubSession>(MakeSessionOptions(group_name + "_0"), nullptr);
  ThreadPlacement placement = CurrentThreadPlacement();
  try {
    spare->Spawn();
  } catch (const std::exception& e) {
    // The instance spawns its own stub and reports the same failure in its own phase.
    PB_LOG_VERBOSE("model '" + name + "': no early stub: " + e.what());
    return;
  }
  std::lock_guard<std::mutex> lock(spare_mu_);
  spare_ = std::move(spare);
  spare_placement_ = std::move(placement);
}

std::shared_ptr<StubSession> ModelState::TakeSpare(const std::string& instance_name,
                                                   int gpu_device) {
  std::shared_ptr<StubSession> spare;
  bool ours = false;
  ThreadPlacement then_placement;
  {
    std::lock_guard<std::mutex> lock(spare_mu_);
    if (spare_ == nullptr) return nullptr;
    ++spare_asked_;
    ours = spare_->options().instance_name == instance_name;
    // Every instance has asked and none had the name we guessed: it is nobody's, and must
    // not live until the model is unloaded.
    if (!ours && spare_asked_ < CountInstances(config)) return nullptr;
    spare.swap(spare_);
    then_placement = spare_placement_;
  }
  // Spawned with the options of this model at load time: if anything that shapes the stub
  // process has changed since, start a fresh one. That includes the CPU affinity and NUMA
  // memory policy it inherited: the instance's own thread carries its group's host_policy,
  // which the original's stub, spawned there, inherits.
  SessionOptions now = MakeSessionOptions(instance_name, gpu_device);
  const SessionOptions& then = spare->options();
  if (!ours || now.python != then.python || now.env != then.env ||
      now.package_parent != then.package_parent || CurrentThreadPlacement() != then_placement) {
    spare->Discard();
    return nullptr;
  }
  return spare;
}

void ModelState::ReadConfig() {
  TRITONSERVER_Message* msg = nullptr;
  Check(TRITONBACKEND_ModelConfig(model, 1, &msg), "TRITONBACKEND_ModelConfig");
  const char* buf = nullptr;
  size_t len = 0;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(msg, &buf, &len);
  if (err == nullptr) config_text.assign(buf, len);
  TRITONSERVER_MessageDelete(msg);
  Check(err, "TRITONSERVER_MessageSerializeToJson");
  try {
    config = json::Value::Parse(config_text);
  } catch (const json::ParseError& e) {
    Throw(TRITONSERVER_ERROR_INTERNAL,
          "model '" + name + "': cannot parse the model configuration: " + e.what());
  }
  decoupled = false;
  if (const json::Value* policy = config.Find("model_transaction_policy")) {
    if (const json::Value* d = policy->Find("decoupled"); d != nullptr && d->is_bool()) {
      decoupled = d->AsBool();
    }
  }
  max_batch_size = 0;
  if (const json::Value* m = config.Find("max_batch_size"); m != nullptr && m->is_number()) {
    max_batch_size = m->AsInt();
  }
  queue_expires = bls_cycles::QueueExpires(config);
  std::string file = config.GetString("default_model_filename");
  model_filename = file.empty() ? "model.py" : file;
}

void ModelState::ReadParameters() {
  std::string value;
  std::string budget;
  GetParameter(config, "THREAD_BUDGET", &budget);
  thread_budget = ThreadBudget(name, config, budget, backend->config.thread_budget);
  if (thread_budget > 0) {
    PB_LOG_VERBOSE("model '" + name + "': thread budget " + std::to_string(thread_budget) +
                   " per instance (" + std::to_string(UsableCores()) + " usable cores, " +
                   std::to_string(CountInstances(config)) +
                   " instances); set where unset: OMP_NUM_THREADS, MKL_NUM_THREADS, ...");
  }
  LaneSpin spin =
      DecideLaneSpin(backend->config.ipc_spin_us, UsableCores(), CountInstances(config));
  lane_spin_us = spin.micros;
  PB_LOG_VERBOSE("model '" + name + "': sync spin " +
                 (spin.micros > 0 ? std::to_string(spin.micros) + " us" : std::string("off")) +
                 " (" + spin.reason + ")");
  LaneSpin bls = DecideBlsSpin(backend->config.ipc_bls_spin_us, lane_spin_us);
  bls_spin_us = bls.micros;
  PB_LOG_VERBOSE("model '" + name + "': BLS answer spin " +
                 (bls.micros > 0 ? std::to_string(bls.micros) + " us" : std::string("off")) + " (" +
                 bls.reason + ")");
  force_cpu_only_inputs = true;
  if (GetParameter(config, "FORCE_CPU_ONLY_INPUT_TENSORS", &value)) {
    if (value == "yes") {
      force_cpu_only_inputs = true;
    } else if (value == "no") {
      force_cpu_only_inputs = false;
    } else {
      Throw(TRITONSERVER_ERROR_UNSUPPORTED,
            "Incorrect value for FORCE_CPU_ONLY_INPUT_TENSORS: " + value + "'");
    }
  }
  if (force_cpu_only_inputs) {
    PB_LOG_VERBOSE("Forcing CPU only input tensors.");
  } else {
    PB_LOG_VERBOSE(
        "Input tensors can be both in CPU and GPU. FORCE_CPU_ONLY_INPUT_TENSORS is off.");
  }

  isolate_gpu = false;
  if (GetParameter(config, "ISOLATE_GPU", &value)) {
    if (value == "yes" || value == "true" || value == "1") {
      isolate_gpu = true;
    } else if (!(value == "no" || value == "false" || value == "0" || value.empty())) {
      Throw(TRITONSERVER_ERROR_INVALID_ARG, "model '" + name +
                                                "': incorrect value for ISOLATE_GPU: '" + value +
                                                "' (expected \"yes\" or \"no\")");
    }
  }

  debug.clear();
  if (!GetParameter(config, "PYBACKEND_DEBUG", &debug)) {
    const char* env = getenv("PYBACKEND_DEBUG");
    debug = env != nullptr ? env : "";
  }
  if (debug == "off" || debug == "0") debug.clear();
  if (!debug.empty()) {
    int instances = CountInstances(config);
    if (instances != 1) {
      // Breakpoints must stop one known process, and tritonserver creates the instances
      // the config names (it ignores a backend's change of instance_group).
      Throw(TRITONSERVER_ERROR_INVALID_ARG,
            "model '" + name + "': PYBACKEND_DEBUG=" + debug +
                " debugs one instance, and the configuration has " + std::to_string(instances) +
                ": set instance_group [ { count: 1 } ] while debugging");
    }
    PB_LOG_WARN("model '" + name + "': debug mode (PYBACKEND_DEBUG=" + debug +
                "): no stub or execute timeouts, so a stub stopped at a breakpoint is not "
                "restarted. Not for production.");
  }

  attach_socket.clear();
  GetParameter(config, "PYBACKEND_ATTACH_SOCKET", &attach_socket);

  std::string mode;
  GetParameter(config, "PYBACKEND_INSTANCE_PROCESS", &mode);
  instance_process = ParseInstanceProcess(name, mode);
  if (instance_process != InstanceProcess::kOwn && isolate_gpu) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG,
          "model '" + name +
              "': ISOLATE_GPU gives each instance a process that sees only its "
              "own device, and PYBACKEND_INSTANCE_PROCESS=" +
              mode + " puts the instances in one process: choose one of the two");
  }

  python = backend->DefaultPython();
  exec_env = ExecutionEnv();
  if (GetParameter(config, "EXECUTION_ENV_PATH", &value) && !value.empty()) {
    ReplaceAll(&value, "$$TRITON_MODEL_DIRECTORY", repository);
    PB_LOG_INFO("Using Python execution env " + value);
    exec_env = PrepareExecutionEnv(name, repository, value, *backend);
    python = exec_env.python;
  }

  host.reset();
  if (instance_process != InstanceProcess::kOwn && attach_socket.empty()) {
    SessionOptions o = MakeSessionOptions(name);
    HostOptions h;
    h.model_name = name;
    h.mode = instance_process;
    h.spawn.python = o.python;
    h.spawn.pythonpath_prepend = o.package_parent;
    h.spawn.env = o.env;
    h.spawn.env_unset = o.env_unset;
    h.timeout = o.timeout;
    h.init_timeout = o.init_timeout;
    host = std::make_shared<InstanceHost>(std::move(h));
  }
}

json::Value ModelState::InitArgs(const std::string& phase, const std::string& instance_name,
                                 const std::string& kind, int32_t device_id) const {
  const BackendConfig& c = backend->config;
  json::Value a = json::Value::Object();
  a.Set("protocol_version", static_cast<int64_t>(ipc::PROTOCOL_VERSION));
  a.Set("phase", phase);
  a.Set("model_name", name);
  a.Set("model_version", std::to_string(version));
  a.Set("model_repository", repository);
  a.Set("model_file", ModelFile());
  a.Set("version_dir", VersionDir());
  a.Set("instance_name", instance_name);
  a.Set("instance_kind", kind);
  a.Set("device_id", std::to_string(device_id));
  a.Set("model_config", config_text);
  a.Set("decoupled", decoupled);
  a.Set("runtime_modeldir", backend->runtime_modeldir);
  a.Set("inline_threshold", static_cast<int64_t>(c.inline_threshold));
  a.Set("shm_default_byte_size", static_cast<int64_t>(c.shm_default_byte_size));
  a.Set("shm_growth_byte_size", static_cast<int64_t>(c.shm_growth_byte_size));
  a.Set("shm_max_byte_size", static_cast<int64_t>(c.shm_max_byte_size));
  a.Set("log_verbose", LogEnabled(TRITONSERVER_LOG_VERBOSE) ? 1 : 0);
  // The instance's stub takes the debugger, not the auto-complete stub before it.
  a.Set("debug", phase != "auto_complete" ? debug : std::string());
  return a;
}

SessionOptions ModelState::MakeSessionOptions(const std::string& instance_name,
                                              int gpu_device) const {
  const BackendConfig& c = backend->config;
  SessionOptions o;
  o.model_name = name;
  o.model_version = version;
  o.instance_name = instance_name;
  o.python = python;
  o.package_parent = backend->package_parent;
  o.backend_library = backend->library_path;
  o.shm_prefix = c.shm_region_prefix;
  o.shm_default_byte_size = c.shm_default_byte_size;
  o.shm_growth_byte_size = c.shm_growth_byte_size;
  o.shm_max_byte_size = c.shm_max_byte_size;
  o.timeout = std::chrono::milliseconds(c.stub_timeout_seconds * 1000);
  // Debug mode: a stub may sit at a breakpoint for as long as its developer needs (a day
  // here; the waits' millisecond counts stay within an int).
  if (c.initialize_timeout_seconds > 0) {
    o.init_timeout = std::chrono::milliseconds(c.initialize_timeout_seconds * 1000);
  }
  if (c.finalize_timeout_seconds > 0) {
    o.finalize_timeout = std::chrono::milliseconds(c.finalize_timeout_seconds * 1000);
  }
  if (!debug.empty()) {
    o.timeout = std::chrono::hours(24);
    o.init_timeout = std::chrono::milliseconds(-1);
    o.finalize_timeout = std::chrono::milliseconds(-1);
  }
  o.spin_us = lane_spin_us;
  o.lane = c.ipc_lane;
  o.env = ThreadBudgetEnv(thread_budget);
  // The stub's side of the same decision (pybackend/stub/main.py), always set: one rule.
  o.env.emplace_back("PYBACKEND_STUB_SPIN_US", std::to_string(lane_spin_us));
  o.env.emplace_back("PYBACKEND_STUB_BLS_SPIN_US", std::to_string(bls_spin_us));
  // The lending pool likewise: the stub keeps its mappings of lent memory exactly when our
  // holds keep the memory (a mapping kept of memory we free would outlive it).
  o.env.emplace_back("PYBACKEND_GPU_LEND_POOL", cuda::DeviceHolds::PoolFromEnv() ? "1" : "0");
  // The original's stub embeds Python, which never coerces the C locale (PEP 538): a server
  // run without a locale leaves the model's locale.getlocale() at (None, None), as NVIDIA's
  // qa env test checks. `python -m` would coerce it to C.UTF-8; off unless the user chose.
  if (std::getenv("PYTHONCOERCECLOCALE") == nullptr) {
    o.env.emplace_back("PYTHONCOERCECLOCALE", "0");
  }
  o.attach_socket = attach_socket;
  if (!exec_env.python.empty()) {
    // Only pybackend from the server's environment: its site-packages would shadow the
    // execution environment's own numpy and the rest.
    o.package_parent = exec_env.pythonpath;
    o.env.insert(o.env.end(), exec_env.env.begin(), exec_env.env.end());
    o.env_unset = exec_env.unset;
  }
  if (isolate_gpu && gpu_device >= 0) {
    // The stub sees one device, its own: it is device 0 there, and PYBACKEND_ISOLATED_DEVICE
    // tells the stub which device that is in our numbering (pybackend/utils/cuda_driver.py).
    // Our numbering is tritonserver's, itself filtered by its own CUDA_VISIBLE_DEVICES.
    std::string visible = std::to_string(gpu_device);
    if (const char* parent = getenv("CUDA_VISIBLE_DEVICES"); parent != nullptr && *parent) {
      std::string list = parent;
      size_t start = 0;
      for (int i = 0; start <= list.size(); ++i) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        if (i == gpu_device) {
          visible = list.substr(start, comma - start);
          break;
        }
        start = comma + 1;
      }
    }
    o.env.emplace_back("CUDA_VISIBLE_DEVICES", visible);
    o.env.emplace_back("PYBACKEND_ISOLATED_DEVICE", std::to_string(gpu_device));
  }
  return o;
}

void ModelState::AutoComplete() {
  SessionOptions opts = MakeSessionOptions(name);
  // A shared process imports model.py for auto-complete too: the instances find it imported.
  opts.host = host;
  StubSession session(std::move(opts), nullptr);
  json::Value reply = session.Start(InitArgs("auto_complete", name, "AUTO", 0));
  const json::Value* ok = reply.Find("ok");
  if (ok == nullptr || !ok->is_bool() || !ok->AsBool()) {
    std::string error = reply.GetString("error", "auto-complete failed without a message");
    session.Finalize();
    error += "\nThis happened in phase auto_complete of model '" + name + "' version " +
             std::to_string(version) + " (" + ModelFile() +
             "). Fix the error above, then load the model again.";
    Throw(TRITONSERVER_ERROR_INTERNAL, error);
  }
  std::string new_config = reply.GetString("model_config");
  std::string fin = session.Finalize();
  if (!fin.empty()) PB_LOG_WARN("model '" + name + "' auto-complete stub: " + fin);
  if (new_config.empty()) return;
  TRITONSERVER_Message* msg = nullptr;
  Check(TRITONSERVER_MessageNewFromSerializedJson(&msg, new_config.data(), new_config.size()),
        "auto-completed model configuration");
  TRITONSERVER_Error* err = TRITONBACKEND_ModelSetConfig(model, 1, msg);
  TRITONSERVER_MessageDelete(msg);
  Check(err, nullptr);
}

}  // namespace pybackend
