#include "backend/instance_state.h"

#include "backend/dropped_sender.h"
#include "backend/error.h"
#include "backend/logging.h"
#include "backend/model_control.h"
#include "backend/response_writer.h"
#include "backend/thread_name.h"
#include "ipc/codec.h"
#include "ipc/messages/execute.h"
#include "ipc/messages/rpc.h"

namespace pybackend {

namespace {
constexpr std::chrono::milliseconds kFirstBackoff{500};
// A stub that ran this long before dying starts the backoff from the beginning again.
constexpr std::chrono::seconds kStableRun{60};
}  // namespace

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
  st->restart_enabled_ = model->backend->config.stub_restart;
  TRITONSERVER_Server* server = nullptr;
  Check(TRITONBACKEND_ModelServer(model->model, &server), "TRITONBACKEND_ModelServer");
  st->bls_ = std::make_unique<BlsService>(server, model->name, st->name,
                                          model->backend->config.inline_threshold, &st->registry_);

  st->metrics = std::make_shared<InstanceMetrics>(model->backend->instance_metric_families.get(),
                                                  model->name, model->version, st->name);
  st->session_ = st->StartSession();
  st->started_at_ = std::chrono::steady_clock::now();
  st->metrics->SetReady(true);
  if (st->restart_enabled_)
    st->restarter_ = std::thread([s = st.get()] {
      NameThisThread("pb_restarter");
      s->RestartLoop();
    });
  PB_LOG_INFO("TRITONBACKEND_ModelInstanceInitialize: " + st->name + " (" + st->kind + " device " +
              std::to_string(st->device_id) + ")");
  return st;
}

std::shared_ptr<StubSession> InstanceState::StartSession() {
  int gpu_device = kind == "GPU" ? device_id : -1;
  std::shared_ptr<StubSession> session = model->TakeSpare(name, gpu_device);
  if (session != nullptr) {
    session->set_handler(this);
  } else {
    SessionOptions opts = model->MakeSessionOptions(name, gpu_device);
    opts.host = model->host;  // PYBACKEND_INSTANCE_PROCESS shared/fork: served by it
    session = std::make_shared<StubSession>(std::move(opts), this);
  }
  session->set_instance_metrics(metrics);
  {
    // A load has no time bound by default (initialize-timeout-seconds): Finalize ends a
    // restart's start that is still loading instead of waiting for it.
    std::lock_guard<std::mutex> lock(mu_);
    starting_ = session;
  }
  struct Started {
    InstanceState* st;
    ~Started() {
      std::lock_guard<std::mutex> lock(st->mu_);
      st->starting_.reset();
    }
  } started{this};
  json::Value reply = session->Start(model->InitArgs("initialize", name, kind, device_id));
  const json::Value* ok = reply.Find("ok");
  if (ok == nullptr || !ok->is_bool() || !ok->AsBool()) {
    std::string error = reply.GetString("error", "initialize failed without a message");
    // The stub logged the error itself and waits for FINALIZE; finalizing it also drains
    // its stderr so the tail below is complete.
    session->Finalize();
    std::string tail = session->StderrTail();
    if (!tail.empty()) error += "\nLast lines of the stub's stderr:\n" + tail;
    error += "\nThis happened in phase initialize of model '" + model->name + "' version " +
             std::to_string(model->version) + ", instance '" + name + "' (" + model->ModelFile() +
             "). Fix the error above, then load the model again.";
    Throw(TRITONSERVER_ERROR_INTERNAL, error);
  }
  try {
    // The instance's reservation at load, as the original's one region per stub: our first
    // segment (the stub makes its own segments only as outputs need them).
    session->ledger().Reserve();
  } catch (const ipc::ArenaError& e) {
    // Not fatal: the original only truncates its region to that size (pages come on first
    // touch), so its load does not fail on memory either. The first request that needs
    // shared memory tries again and fails with the figures if it still cannot.
    PB_LOG_WARN(session->log_prefix() + "could not reserve shm-default-byte-size (" +
                std::to_string(model->backend->config.shm_default_byte_size) +
                " bytes) of shared memory at load: " + e.what());
  }
  if (const json::Value* v = reply.Find("has_is_ready"); v != nullptr && v->is_bool()) {
    has_is_ready = v->AsBool();
  }
  if (const json::Value* v = reply.Find("is_async_execute"); v != nullptr && v->is_bool()) {
    is_async_execute = v->AsBool();
  }
  return session;
}

InstanceState::~InstanceState() { Finalize(); }

std::shared_ptr<StubSession> InstanceState::session() {
  std::lock_guard<std::mutex> lock(mu_);
  return session_;
}

void InstanceState::Finalize() {
  std::shared_ptr<StubSession> s;
  std::shared_ptr<StubSession> starting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finalized_) return;
    finalized_ = true;
    stopping_ = true;  // the FINALIZE below must not look like a crash to the restarter
    s = session_;
    starting = starting_;
  }
  cv_.notify_all();
  // A restart's new stub still loading (no time bound by default) is ended, not waited for.
  if (starting != nullptr) starting->MarkDead("the model instance is being unloaded");
  if (restarter_.joinable()) restarter_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = session_;
  }
  if (s != nullptr) {
    std::string error = s->Finalize();
    if (!error.empty()) PB_LOG_WARN(s->log_prefix() + "finalize: " + error);
    // The monitor calls back into this object: stop it before the session goes.
    s->StopMonitor();
  }
  FailDetached(nullptr, [this] {
    return "Model instance '" + name +
           "' was unloaded before the response sender sent "
           "TRITONSERVER_RESPONSE_COMPLETE_FINAL.";
  });
  std::lock_guard<std::mutex> lock(mu_);
  session_.reset();
}

std::shared_ptr<StubSession> InstanceState::SessionForBatch(std::string* report) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::seconds(model->backend->config.stub_timeout_seconds);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (!unreported_death_.empty()) {
      report->swap(unreported_death_);
      unreported_death_.clear();
      return nullptr;
    }
    std::shared_ptr<StubSession> dead = session_;
    if (dead == nullptr || dead->alive() || !restart_enabled_ || stopping_ || restart_failed_) {
      return dead;
    }
    // Also woken when the death is noticed (OnStubGone): this batch may be the one to tell.
    bool changed = cv_.wait_until(lock, deadline, [&] {
      return stopping_ || restart_failed_ || session_ != dead || !unreported_death_.empty();
    });
    if (!changed) return dead;  // the batch fails with the death, after the bound
  }
}

TRITONSERVER_Error* InstanceState::Ready() {
  std::shared_ptr<StubSession> s = session();
  if (s != nullptr && s->alive()) return nullptr;
  std::string msg =
      s != nullptr ? UnhealthyMessage(*s) : "Stub process '" + name + "' is not healthy.";
  return NewError(TRITONSERVER_ERROR_INTERNAL, msg);
}

std::string InstanceState::UnhealthyMessage(StubSession& s) {
  bool restarting = false;
  std::string failed;  // the last restart attempt's error: the state the instance is in now
  if (restart_enabled_) {
    std::lock_guard<std::mutex> lock(mu_);
    restarting = !stopping_;
    if (restart_failed_) failed = restart_error_;
  }
  if (!restarting) return s.UnhealthyMessage();
  if (!failed.empty()) {
    return s.UnhealthyMessage(
        "A new stub is being started for this instance (backend config stub-restart); the last "
        "attempt failed: " +
        failed + " If this keeps happening, fix the causes above.");
  }
  return s.UnhealthyMessage(
      "A new stub is being started for this instance (backend config stub-restart); if this "
      "keeps happening, fix the cause above.");
}

int InstanceState::FailDetached(const void* owner, const std::function<std::string()>& message) {
  int failed = 0;
  std::string text;
  bool described = false;
  for (auto& st : registry_.Snapshot()) {
    std::lock_guard<std::mutex> lock(st->mu);
    if (owner != nullptr && st->session != owner) continue;
    if (!st->released) continue;  // the executor owns it and fails it itself
    // A rescheduled request comes back to a new stub; only its kept sender died here.
    if (!st->Done() && st->factory != nullptr && !st->rescheduled) {
      TRITONBACKEND_Response* resp = nullptr;
      std::string err = TakeMessage(TRITONBACKEND_ResponseNewFromFactory(&resp, st->factory));
      if (err.empty()) {
        if (!described) {
          text = message();
          described = true;
        }
        SendErrorResponse(resp, TRITONSERVER_ERROR_INTERNAL, text,
                          TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      } else {
        PB_LOG_ERROR("model instance '" + name + "': " + err);
      }
      st->MarkFinal();
      ++failed;
    }
    st->DeleteFactory();
    registry_.Remove(st->token);
  }
  return failed;
}

bool InstanceState::OnOther(StubSession& s, const ipc::Message& msg) {
  switch (static_cast<ipc::MessageKind>(msg.kind)) {
    case ipc::MessageKind::BLS_EXEC:
      bls_->OnExec(s, msg);
      return true;
    case ipc::MessageKind::BLS_CANCEL:
      bls_->OnCancel(s, msg);
      return true;
    default:
      return HandleModelControl(s, bls_->server(), msg);
  }
}

bool InstanceState::OnSyncCall(StubSession& s, const ipc::Message& msg) {
  if (msg.kind != static_cast<uint16_t>(ipc::MessageKind::BLS_EXEC)) return false;
  bls_->OnExec(s, msg, /*on_sync=*/true);
  return true;
}

void InstanceState::OnStubGone(StubSession& s) {
  bls_->OnStubGone(s);
  bool told = FailDetached(&s, [&] { return UnhealthyMessage(s); }) > 0 ||
              running_batches.load() > 0 || death_told_by_batch.load() == &s;
  bool current = false;
  bool restart = false;
  std::string report;
  bool may_restart = false;
  if (!told && restart_enabled_) {
    std::lock_guard<std::mutex> lock(mu_);
    may_restart = !stopping_ && session_.get() == &s;
  }
  // Only a death that restarts the instance is described here: a finalized one's (the end
  // of every instance of a shared process that lives on) needs no words, and describing it
  // waits for that process.
  if (may_restart) {
    report = s.UnhealthyMessage(
        "It died while no request was running, and this request, the first one since, reports "
        "it. A new stub is started for this instance (backend config stub-restart): the "
        "requests that follow wait for it and are served by it.");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    current = !stopping_ && session_.get() == &s;
    restart = current && restart_enabled_;
    if (restart) restart_wanted_ = true;
    if (restart && !told) unreported_death_ = std::move(report);
  }
  cv_.notify_all();
  if (current) metrics->SetReady(false);
  // An idle stub that dies fails no request: the log is the only place that says how it
  // ended. (A stub that dies while starting is reported by whoever started it.)
  if (current) {
    PB_LOG_ERROR("model '" + model->name + "', instance '" + name + "': " + s.DeathDetail() +
                 (restart ? ""
                          : "\nbackend config stub-restart is off: unload and load the model "
                            "to start a new stub."));
  }
}

void InstanceState::RestartLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || restart_wanted_; });
    if (stopping_) return;
    restart_wanted_ = false;
    auto now = std::chrono::steady_clock::now();
    if (now - started_at_ >= kStableRun || backoff_.count() == 0) {
      backoff_ = kFirstBackoff;
    } else {
      backoff_ =
          std::min(backoff_ * 2,
                   std::chrono::milliseconds(model->backend->config.stub_restart_max_backoff_ms));
    }
    PB_LOG_WARN("model '" + model->name + "', instance '" + name +
                "': the stub is gone; starting a new one in " + std::to_string(backoff_.count()) +
                " ms");
    if (cv_.wait_for(lock, backoff_, [&] { return stopping_; })) return;
    lock.unlock();
    std::shared_ptr<StubSession> fresh;
    std::string error;
    try {
      fresh = StartSession();
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    started_at_ = std::chrono::steady_clock::now();
    if (fresh == nullptr && stopping_) return;  // ended by Finalize while it loaded
    if (fresh == nullptr) {
      PB_LOG_ERROR("model '" + model->name + "', instance '" + name +
                   "': restarting the stub failed: " + error);
      restart_wanted_ = true;  // try again after a longer backoff
      restart_failed_ = true;  // meanwhile batches fail at once instead of waiting
      restart_error_ = error;
      cv_.notify_all();
      continue;
    }
    if (stopping_) {
      // Finalize started meanwhile: it finalizes session_, so this one goes here.
      lock.unlock();
      fresh->Finalize();
      fresh->StopMonitor();
      return;
    }
    std::shared_ptr<StubSession> old = std::move(session_);
    session_ = std::move(fresh);
    restart_failed_ = false;
    restart_error_.clear();
    unreported_death_.clear();  // nobody met the dead stub: nothing to report any more
    cv_.notify_all();           // batches waiting in SessionForBatch
    ++restarts_;
    metrics->Restarted();
    metrics->SetReady(true);
    PB_LOG_INFO("model '" + model->name + "', instance '" + name +
                "': a new stub is serving (restart " + std::to_string(restarts_) + ")");
    lock.unlock();
    old.reset();  // joins the dead stub's monitor (it has finished) unless a batch holds it
    lock.lock();
  }
}

void InstanceState::OnSend(StubSession& s, const ipc::Message& msg) {
  ipc::SendMsg send = ipc::DecodeSend(msg.body);
  uint64_t token = send.token;
  uint32_t send_flags = send.send_flags;
  bool has_response = send.has_response;
  ipc::ResponseBody& body = send.response;
  bool final_flag = (send_flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  const std::string where = "model '" + model->name + "', instance '" + name + "': ";

  std::shared_ptr<RequestState> st = registry_.Find(token);
  if (st == nullptr) {
    PB_LOG_ERROR(where + "response sent for an unknown or finished request (token " +
                 std::to_string(token) + ") dropped");
    s.ledger().DoneWith(body);
    return;
  }
  std::lock_guard<std::mutex> lock(st->mu);
  if (st->Done()) {
    PB_LOG_ERROR(where + "response sent after the request's final response dropped");
  } else if (has_response) {
    TRITONBACKEND_Response* resp = nullptr;
    std::string err = st->NewResponse(&resp);
    if (err.empty()) {
      if (!SendResponse(resp, body, *st, s, send_flags)) st->failed = true;
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
    st->MarkFinal();
    st->DeleteFactory();
    if (st->released) registry_.Remove(token);
  }
  s.ledger().DoneWith(body);
}

void InstanceState::OnIsCancelled(StubSession& s, const ipc::Message& msg) {
  uint64_t token = ipc::DecodeToken(msg.body);
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
  std::vector<uint8_t> reply = err.empty()
                                   ? ipc::EncodeFlagReply(cancelled)
                                   : ipc::EncodeErrorReply(TRITONSERVER_ERROR_INTERNAL, err);
  std::string send_err;
  if (!s.async().Send(ipc::MessageKind::REPLY, msg.id, reply,
                      static_cast<int>(s.options().timeout.count()), &send_err)) {
    PB_LOG_ERROR(s.log_prefix() + send_err);
  }
}

void InstanceState::OnSenderDropped(StubSession& s, const ipc::Message& msg) {
  uint64_t token = ipc::DecodeToken(msg.body);
  std::shared_ptr<RequestState> st = registry_.Find(token);
  if (st == nullptr) return;  // finished meanwhile
  std::lock_guard<std::mutex> lock(st->mu);
  if (!st->released) {
    // The executor ends it once it knows whether the request is rescheduled.
    st->dropped = true;
    return;
  }
  // A rescheduled execution's objects are gone: the request itself comes back.
  if (!st->rescheduled) EndDroppedRequest(*st, model->decoupled, model->name, name);
  st->closed = true;
  st->DeleteFactory();
  registry_.Remove(token);
  (void)s;
}

}  // namespace pybackend
