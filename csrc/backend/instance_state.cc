#include "backend/instance_state.h"

#include "backend/error.h"
#include "backend/logging.h"
#include "backend/response_writer.h"
#include "ipc/codec.h"

namespace pybackend {

std::unique_ptr<InstanceState> InstanceState::Create(TRITONBACKEND_ModelInstance* instance,
                                                     ModelState* model) {
  std::unique_ptr<InstanceState> st(new InstanceState());
  st->instance = instance;
  st->model = model;
  const char* name = nullptr;
  Check(TRITONBACKEND_ModelInstanceName(instance, &name), "TRITONBACKEND_ModelInstanceName");
  st->name = name;
  TRITONSERVER_InstanceGroupKind kind;
  Check(TRITONBACKEND_ModelInstanceKind(instance, &kind), "TRITONBACKEND_ModelInstanceKind");
  st->kind = TRITONSERVER_InstanceGroupKindString(kind);
  Check(TRITONBACKEND_ModelInstanceDeviceId(instance, &st->device_id),
        "TRITONBACKEND_ModelInstanceDeviceId");

  st->session_ = std::make_unique<StubSession>(model->MakeSessionOptions(st->name), st.get());
  json::Value reply =
      st->session_->Start(model->InitArgs("initialize", st->name, st->kind, st->device_id));
  const json::Value* ok = reply.Find("ok");
  if (ok == nullptr || !ok->is_bool() || !ok->AsBool()) {
    std::string error = reply.GetString("error", "initialize failed without a message");
    // The stub logged the error itself and waits for FINALIZE; finalizing it also drains
    // its stderr so the tail below is complete.
    st->finalized_ = true;
    st->session_->Finalize();
    std::string tail = st->session_->StderrTail();
    if (!tail.empty()) error += "\nLast lines of the stub's stderr:\n" + tail;
    Throw(TRITONSERVER_ERROR_INTERNAL, error);
  }
  if (const json::Value* v = reply.Find("has_is_ready"); v != nullptr && v->is_bool()) {
    st->has_is_ready = v->AsBool();
  }
  if (const json::Value* v = reply.Find("is_async_execute"); v != nullptr && v->is_bool()) {
    st->is_async_execute = v->AsBool();
  }
  PB_LOG_INFO("TRITONBACKEND_ModelInstanceInitialize: " + st->name + " (" + st->kind + " device " +
              std::to_string(st->device_id) + ")");
  return st;
}

InstanceState::~InstanceState() { Finalize(); }

void InstanceState::Finalize() {
  if (session_ == nullptr) return;
  if (!finalized_) {
    finalized_ = true;
    std::string error = session_->Finalize();
    if (!error.empty()) PB_LOG_WARN(session_->log_prefix() + "finalize: " + error);
  }
  // The monitor calls back into this object: stop it before the session goes.
  session_->StopMonitor();
  FailDetached("Model instance '" + name +
               "' was unloaded before the response sender sent "
               "TRITONSERVER_RESPONSE_COMPLETE_FINAL.");
  session_.reset();
}

TRITONSERVER_Error* InstanceState::Ready() {
  if (session_ != nullptr && session_->alive()) return nullptr;
  std::string msg = session_ != nullptr ? session_->UnhealthyMessage()
                                        : "Stub process '" + name + "' is not healthy.";
  return NewError(TRITONSERVER_ERROR_INTERNAL, msg);
}

void InstanceState::FailDetached(const std::string& message) {
  for (auto& st : registry_.Snapshot()) {
    std::lock_guard<std::mutex> lock(st->mu);
    if (!st->released) continue;  // the executor owns it and fails it itself
    if (!st->closed && st->factory != nullptr) {
      TRITONBACKEND_Response* resp = nullptr;
      std::string err = TakeMessage(TRITONBACKEND_ResponseNewFromFactory(&resp, st->factory));
      if (err.empty()) {
        SendErrorResponse(resp, TRITONSERVER_ERROR_INTERNAL, message,
                          TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      } else {
        PB_LOG_ERROR("model instance '" + name + "': " + err);
      }
      st->closed = true;
    }
    st->DeleteFactory();
    registry_.Remove(st->token);
  }
}

void InstanceState::OnStubGone() { FailDetached(session_->UnhealthyMessage()); }

void InstanceState::OnSend(const ipc::Message& msg) {
  ipc::Reader r(msg.body.data(), msg.body.size());
  uint64_t token = r.U64();
  uint32_t send_flags = r.U32();
  bool has_response = r.U8() != 0;
  ipc::ResponseBody body;
  if (has_response) body = ipc::ReadResponseBody(r);
  bool final_flag = (send_flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  const std::string where = "model '" + model->name + "', instance '" + name + "': ";

  std::shared_ptr<RequestState> st = registry_.Find(token);
  if (st == nullptr) {
    PB_LOG_ERROR(where + "response sent for an unknown or finished request (token " +
                 std::to_string(token) + ") dropped");
    ReturnStubBlocks(body, session_->frees());
    return;
  }
  std::lock_guard<std::mutex> lock(st->mu);
  if (st->closed) {
    PB_LOG_ERROR(where + "response sent after the request's final response dropped");
  } else if (has_response) {
    TRITONBACKEND_Response* resp = nullptr;
    std::string err;
    if (st->factory != nullptr) {
      err = TakeMessage(TRITONBACKEND_ResponseNewFromFactory(&resp, st->factory));
    } else if (!st->released) {
      err = TakeMessage(TRITONBACKEND_ResponseNew(&resp, st->request));
    } else {
      err = "the request was already released";
    }
    if (err.empty()) {
      if (!SendResponse(resp, body, *st, *session_, send_flags)) st->failed = true;
      st->sent_response = true;
    } else {
      PB_LOG_ERROR(where + "cannot create a response: " + err);
    }
  } else if (final_flag) {
    std::string err;
    if (st->factory != nullptr) {
      err = TakeMessage(TRITONBACKEND_ResponseFactorySendFlags(st->factory, send_flags));
    } else if (!st->released) {
      // Flags alone travel through a factory only.
      TRITONBACKEND_ResponseFactory* f = nullptr;
      err = TakeMessage(TRITONBACKEND_ResponseFactoryNew(&f, st->request));
      if (err.empty()) {
        err = TakeMessage(TRITONBACKEND_ResponseFactorySendFlags(f, send_flags));
        TakeMessage(TRITONBACKEND_ResponseFactoryDelete(f));
      }
    } else {
      err = "the request was already released";
    }
    if (!err.empty()) PB_LOG_ERROR(where + "cannot send the final flag: " + err);
  }
  if (final_flag && !st->closed) {
    st->closed = true;
    st->DeleteFactory();
    if (st->released) registry_.Remove(token);
  }
  ReturnStubBlocks(body, session_->frees());
}

void InstanceState::OnIsCancelled(const ipc::Message& msg) {
  ipc::Reader r(msg.body.data(), msg.body.size());
  uint64_t token = r.U64();
  bool cancelled = false;
  std::string err;
  if (std::shared_ptr<RequestState> st = registry_.Find(token)) {
    std::lock_guard<std::mutex> lock(st->mu);
    if (st->factory != nullptr) {
      err = TakeMessage(TRITONBACKEND_ResponseFactoryIsCancelled(st->factory, &cancelled));
    } else if (!st->released) {
      err = TakeMessage(TRITONBACKEND_RequestIsCancelled(st->request, &cancelled));
    }
  }
  ipc::Writer w;
  if (err.empty()) {
    w.U8(1);
    w.U8(cancelled ? 1 : 0);
  } else {
    w.U8(0);
    w.U32(TRITONSERVER_ERROR_INTERNAL);
    w.Str(err);
  }
  std::string send_err;
  if (!session_->async().Send(ipc::MessageKind::REPLY, msg.id, w.data(), w.size(),
                              static_cast<int>(session_->options().timeout.count()), &send_err)) {
    PB_LOG_ERROR(session_->log_prefix() + send_err);
  }
}

}  // namespace pybackend
