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

namespace pybackend {
namespace {

std::mutex g_mu;
std::condition_variable g_cv;
int g_running = 0;  // load/unload threads still running

void Reply(StubSession& s, uint64_t id, TRITONSERVER_Error* err, const ipc::Writer* payload) {
  ipc::Writer w;
  if (err == nullptr) {
    w.U8(1);
    if (payload != nullptr) w.Raw(payload->data(), payload->size());
  } else {
    w.U8(0);
    w.U32(TRITONSERVER_ErrorCode(err));
    w.Str(TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
  }
  std::string error;
  if (!s.alive()) return;
  if (!s.async().Send(ipc::MessageKind::REPLY, id, w.data(), w.size(),
                      static_cast<int>(s.options().timeout.count()), &error)) {
    PB_LOG_ERROR(s.log_prefix() + "cannot answer a model-control request: " + error);
  }
}

TRITONSERVER_Error* Load(TRITONSERVER_Server* server, const std::vector<uint8_t>& body) {
  ipc::Reader r(body.data(), body.size());
  std::string name = r.Str();
  std::string config = r.Str();
  uint32_t n_files = r.U32();
  std::vector<TRITONSERVER_Parameter*> params;
  if (!config.empty()) {
    params.push_back(
        TRITONSERVER_ParameterNew("config", TRITONSERVER_PARAMETER_STRING, config.c_str()));
  }
  for (uint32_t i = 0; i < n_files; ++i) {
    std::string path = r.Str();
    uint32_t size = r.U32();
    const uint8_t* data = r.Bytes(size);
    params.push_back(TRITONSERVER_ParameterBytesNew(path.c_str(), data, size));
  }
  TRITONSERVER_Error* err = TRITONSERVER_ServerLoadModelWithParameters(
      server, name.c_str(), const_cast<const TRITONSERVER_Parameter**>(params.data()),
      params.size());
  for (TRITONSERVER_Parameter* p : params) TRITONSERVER_ParameterDelete(p);
  return err;
}

TRITONSERVER_Error* Unload(TRITONSERVER_Server* server, const std::vector<uint8_t>& body) {
  ipc::Reader r(body.data(), body.size());
  std::string name = r.Str();
  bool dependents = r.U8() != 0;
  return dependents ? TRITONSERVER_ServerUnloadModelAndDependents(server, name.c_str())
                    : TRITONSERVER_ServerUnloadModel(server, name.c_str());
}

}  // namespace

bool HandleModelControl(StubSession& session, TRITONSERVER_Server* server,
                        const ipc::Message& msg) {
  auto kind = static_cast<ipc::MessageKind>(msg.kind);
  if (kind == ipc::MessageKind::MODEL_READY) {
    TRITONSERVER_Error* err = nullptr;
    bool ready = false;
    try {
      ipc::Reader r(msg.body.data(), msg.body.size());
      std::string name = r.Str();
      int64_t version = r.I64();
      err = TRITONSERVER_ServerModelIsReady(server, name.c_str(), version, &ready);
    } catch (const std::exception& e) {
      err = NewError(TRITONSERVER_ERROR_INTERNAL, e.what());
    }
    ipc::Writer payload;
    payload.U8(ready ? 1 : 0);
    Reply(session, msg.id, err, &payload);
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
    Reply(*s, id, err, nullptr);
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
