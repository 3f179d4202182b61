#include "backend/model_control.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/error.h"
#include "backend/logging.h"
#include "backend/thread_name.h"
#include "ipc/codec.h"
#include "ipc/messages/bls.h"
#include "ipc/messages/rpc.h"

namespace pybackend {
namespace {

std::mutex g_mu;
std::condition_variable g_cv;
int g_running = 0;  // load/unload threads still running

// Answers with `ok` (the kind's payload) unless `err`, which it deletes.
void Reply(StubSession& s, uint64_t id, TRITONSERVER_Error* err, std::vector<uint8_t> ok) {
  std::vector<uint8_t> reply = std::move(ok);
  if (err != nullptr) {
    reply = ipc::EncodeErrorReply(TRITONSERVER_ErrorCode(err), TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
  }
  std::string error;
  if (!s.alive()) return;
  if (!s.async().Send(ipc::MessageKind::REPLY, id, reply,
                      static_cast<int>(s.options().timeout.count()), &error)) {
    PB_LOG_ERROR(s.log_prefix() + "cannot answer a model-control request: " + error);
  }
}

TRITONSERVER_Error* Load(TRITONSERVER_Server* server, const std::vector<uint8_t>& body) {
  ipc::ModelLoadMsg load = ipc::DecodeModelLoad(body);
  std::vector<TRITONSERVER_Parameter*> params;
  if (!load.config.empty()) {
    params.push_back(
        TRITONSERVER_ParameterNew("config", TRITONSERVER_PARAMETER_STRING, load.config.c_str()));
  }
  for (const ipc::ModelLoadMsg::File& f : load.files) {
    params.push_back(TRITONSERVER_ParameterBytesNew(f.path.c_str(), f.data, f.size));
  }
  TRITONSERVER_Error* err = TRITONSERVER_ServerLoadModelWithParameters(
      server, load.model_name.c_str(), const_cast<const TRITONSERVER_Parameter**>(params.data()),
      params.size());
  for (TRITONSERVER_Parameter* p : params) TRITONSERVER_ParameterDelete(p);
  return err;
}

TRITONSERVER_Error* Unload(TRITONSERVER_Server* server, const std::vector<uint8_t>& body) {
  ipc::ModelUnloadMsg unload = ipc::DecodeModelUnload(body);
  const char* name = unload.model_name.c_str();
  return unload.unload_dependents ? TRITONSERVER_ServerUnloadModelAndDependents(server, name)
                                  : TRITONSERVER_ServerUnloadModel(server, name);
}

}  // namespace

bool HandleModelControl(StubSession& session, TRITONSERVER_Server* server,
                        const ipc::Message& msg) {
  auto kind = static_cast<ipc::MessageKind>(msg.kind);
  if (kind == ipc::MessageKind::MODEL_READY) {
    TRITONSERVER_Error* err = nullptr;
    bool ready = false;
    try {
      ipc::ModelReadyMsg m = ipc::DecodeModelReady(msg.body);
      err = TRITONSERVER_ServerModelIsReady(server, m.model_name.c_str(), m.version, &ready);
    } catch (const std::exception& e) {
      err = NewError(TRITONSERVER_ERROR_INTERNAL, e.what());
    }
    Reply(session, msg.id, err, ipc::EncodeFlagReply(ready));
    return true;
  }
  if (kind != ipc::MessageKind::MODEL_LOAD && kind != ipc::MessageKind::MODEL_UNLOAD) return false;
  // Loading may take as long as the model's initialize: off the monitor thread. The thread
  // keeps the session (and so the channel it answers on) alive.
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_running;
  }
  std::thread([s = session.shared_from_this(), server, kind, id = msg.id, body = msg.body] {
    NameThisThread("pb_model_ctl");
    TRITONSERVER_Error* err = nullptr;
    try {
      err = kind == ipc::MessageKind::MODEL_LOAD ? Load(server, body) : Unload(server, body);
    } catch (const std::exception& e) {
      err = NewError(TRITONSERVER_ERROR_INTERNAL, e.what());
    }
    Reply(*s, id, err, ipc::EncodeEmptyReply());
    std::lock_guard<std::mutex> lock(g_mu);
    --g_running;
    g_cv.notify_all();
  }).detach();
  return true;
}

bool WaitModelControlIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(g_mu);
  return g_cv.wait_for(lock, timeout, [] { return g_running == 0; });
}

}  // namespace pybackend
