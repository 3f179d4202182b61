// A model's instances in one process (model parameter PYBACKEND_INSTANCE_PROCESS, docs/
// instances.md): the host process, started by the first instance that needs it, and the
// private channels each instance's StubSession gets into it.
//
// `shared`: the host (python -m pybackend.stub.host) runs each instance's stub loop on a
// thread of its own. `fork`: the host imports model.py once, then forks one child per
// instance, which serves as a normal stub. Either way the instance's session speaks the
// normal protocol on a sync/async socketpair whose other ends travel to the host over the
// control socket (its fd 3): nothing is reachable by anyone else.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/json.h"
#include "backend/stub_process.h"
#include "ipc/channel.h"

namespace pybackend {

enum class InstanceProcess { kOwn, kShared, kFork };

// "own" / "shared" / "fork" (throws BackendError INVALID_ARG naming the valid values).
InstanceProcess ParseInstanceProcess(const std::string& model, const std::string& value);
const char* InstanceProcessName(InstanceProcess mode);

// How to start the host: the model's interpreter and environment, like a stub's.
struct HostOptions {
  std::string model_name;
  InstanceProcess mode = InstanceProcess::kShared;
  SpawnOptions spawn;  // python, PYTHONPATH, environment (args are set by the host)
  std::chrono::milliseconds timeout{30000};  // stub-timeout-seconds
  // initialize-timeout-seconds (< 0: none): the host's answer for an instance includes
  // importing model.py under fork, so it is a load's wait, not a start's.
  std::chrono::milliseconds init_timeout{-1};
};

class HostGeneration;

class InstanceHost {
 public:
  explicit InstanceHost(HostOptions opts);
  ~InstanceHost();  // closes the control socket (the host exits), kills and reaps it
  InstanceHost(const InstanceHost&) = delete;
  InstanceHost& operator=(const InstanceHost&) = delete;

  // Starts the host if no live one serves, hands it the far ends of a fresh sync/async pair
  // for `instance` (with its INIT arguments: a fork host imports model.py from them) and
  // returns the process to watch for that instance: the shared host, or the fork child.
  // *sync and *async are our ends. Throws BackendError naming model, instance and cause.
  std::unique_ptr<StubProcess> Connect(const std::string& instance, const json::Value& init_args,
                                       ipc::UniqueFd* sync, ipc::UniqueFd* async);
  // The pid of the live host (-1 when none): for logs and tests.
  pid_t pid();

 private:
  std::shared_ptr<HostGeneration> StartLocked();

  HostOptions opts_;
  std::mutex mu_;  // one Connect at a time: the control socket carries one request each
  std::shared_ptr<HostGeneration> current_;
};

}  // namespace pybackend
