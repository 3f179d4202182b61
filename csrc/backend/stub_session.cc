#include "backend/stub_session.h"

#include <poll.h>

#include <optional>

#include "backend/error.h"
#include "backend/logging.h"
#include "backend/monitor.h"
#include "ipc/codec.h"
#include "ipc/messages/free.h"
#include "ipc/messages/session.h"

namespace pybackend {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kStderrTailLines = 20;

std::string Seconds(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + " s";
  return std::to_string(ms.count()) + " ms";
}

}  // namespace

StubSession::StubSession(SessionOptions opts, AsyncHandler* handler)
    : opts_(std::move(opts)),
      handler_(handler),
      log_prefix_(InstanceLogPrefix(opts_.model_name, opts_.instance_name)),
      metrics_(opts_.instance_name),
      ledger_(opts_.shm_prefix + opts_.instance_name, opts_.shm_default_byte_size,
              opts_.shm_growth_byte_size,
              [this](const std::string& text) { PB_LOG_WARN(log_prefix_ + text); }) {
  ledger_.arena().set_max_size(opts_.shm_max_byte_size, "the backend config shm-max-byte-size");
}

StubSession::~StubSession() {
  if (process_ != nullptr && !process_->Poll()) {
    process_->Kill();
    process_->WaitExit(std::chrono::milliseconds(5000));
  }
  if (monitor_ != nullptr) monitor_->Stop();
  monitor_.reset();
  metrics_.Clear();  // a model's custom metrics leave the endpoint with its stub
  sync_.reset();
  async_.reset();
  process_.reset();
  ledger_.Teardown();  // the stub is gone: whatever it held of ours and we of its goes now
}

void StubSession::Spawn() {
  SpawnOptions so;
  so.python = opts_.python;
  so.args = {"-m", "pybackend.stub", "--instance", opts_.instance_name};
  so.env = {{"PYBACKEND_SYNC_FD", std::to_string(ipc::SYNC_FD)},
            {"PYBACKEND_ASYNC_FD", std::to_string(ipc::ASYNC_FD)},
            {"PYBACKEND_INSTANCE", opts_.instance_name},
            {"PYTHONUNBUFFERED", "1"},
            {"PYTHONDONTWRITEBYTECODE", "1"}};
  so.pythonpath_prepend = opts_.package_parent;
  so.env.insert(so.env.end(), opts_.env.begin(), opts_.env.end());
  so.env_unset = opts_.env_unset;

  if (opts_.lane && ipc::Lane::Supported()) {
    // Made before the monitor starts: MarkDead (on the monitor thread) rings it.
    try {
      lane_ = std::make_unique<ipc::Lane>("pybackend-lane-" + opts_.instance_name);
    } catch (const std::exception& e) {
      PB_LOG_WARN(log_prefix_ + "no sync lane (" + e.what() + "); using the socket only");
    }
  }
  ipc::UniqueFd sync_fd, async_fd;
  if (!opts_.attach_socket.empty()) {
    Attach();
    return;
  }
  process_ = StubProcess::Spawn(so, &sync_fd, &async_fd);
  sync_ = MakeChannel(sync_fd.Release(), "sync");
  async_ = MakeChannel(async_fd.Release(), "async");
  monitor_ = std::make_unique<Monitor>(this);
  monitor_->Start();
  PB_LOG_VERBOSE(log_prefix_ + "started stub pid " + std::to_string(process_->pid()) + ": " +
                 opts_.python + " -m pybackend.stub --instance " + opts_.instance_name);
}

void StubSession::Attach() {
  ipc::UniqueFd sync_fd, async_fd, peer_async;
  std::string what = "model '" + opts_.model_name + "' instance '" + opts_.instance_name + "'";
  process_ = StubProcess::Attach(opts_.attach_socket, what, &sync_fd, &async_fd, &peer_async);
  sync_ = MakeChannel(sync_fd.Release(), "sync");
  async_ = MakeChannel(async_fd.Release(), "async");
  json::Value hello = json::Value::Object();
  hello.Set("model_name", opts_.model_name);
  hello.Set("model_version", static_cast<int64_t>(opts_.model_version));
  hello.Set("instance_name", opts_.instance_name);
  std::vector<uint8_t> body = ipc::EncodeJson(hello.Dump());
  std::string error;
  if (!sync_->Send(ipc::MessageKind::ATTACH, 0, body.data(), body.size(),
                   static_cast<int>(opts_.timeout.count()), &error, peer_async.get())) {
    Throw(TRITONSERVER_ERROR_UNAVAILABLE,
          "cannot attach " + what + " to the process at '" + opts_.attach_socket + "': " + error);
  }
  peer_async.Reset();  // theirs now: EOF on it means that process is gone
  monitor_ = std::make_unique<Monitor>(this);
  monitor_->Start();
  SetStderrClosed();  // no pipes: its output goes wherever that process writes it
  PB_LOG_VERBOSE(log_prefix_ + "attached to pid " + std::to_string(process_->pid()) + " at " +
                 opts_.attach_socket);
}

void StubSession::Discard() {
  if (process_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    finalizing_ = true;  // its end is ours: no crash report
  }
  process_->Kill();
  process_->WaitExit(std::chrono::milliseconds(5000));
  StopMonitor();
}

json::Value StubSession::Start(const json::Value& init_args) {
  if (process_ == nullptr && opts_.host != nullptr) ConnectHost(init_args);
  if (process_ == nullptr) Spawn();

  const std::string what =
      "Failed to start the Python stub for model '" + opts_.model_name + "' version " +
      std::to_string(opts_.model_version) +
      (opts_.instance_name == opts_.model_name ? std::string()
                                               : ", instance '" + opts_.instance_name + "'") +
      " (phase " + init_args.GetString("phase", "initialize") + "): ";
  auto fail = [&](Wait w, const std::string& step, const std::string& error) {
    if (w == Wait::kTimeout) {
      MarkDead("it did not answer " + step + " in time");
      bool load = step == "INIT_REPLY";  // model.py's import and initialize
      Throw(TRITONSERVER_ERROR_INTERNAL,
            what + "no " + step + " from the stub within " +
                Seconds(load ? opts_.init_timeout : opts_.timeout) + " (backend config " +
                (load ? "initialize-timeout-seconds" : "stub-timeout-seconds") + "). " +
                DeathDetail());
    }
    if (w == Wait::kDead) {
      // The original's text for a stub lost while it loads (qa L0_backend_python greps the
      // server log for it, model init_exit), then what we know of the death.
      Throw(TRITONSERVER_ERROR_INTERNAL, what + "Stub process '" + opts_.instance_name +
                                             "' is not healthy. It went away before sending " +
                                             step + ". " + DeathDetail());
    }
    MarkDead(error);
    Throw(TRITONSERVER_ERROR_INTERNAL, what + error + ". " + DeathDetail());
  };

  auto deadline = Clock::now() + opts_.timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  ipc::Message msg;
  std::string error;
  Wait w = WaitSync(ipc::MessageKind::HELLO, left(), &msg, &error);
  if (w != Wait::kOk) fail(w, "HELLO", error);
  uint32_t version = 0, pid = 0;
  std::string py_version, np_version;
  try {
    ipc::HelloMsg hello = ipc::DecodeHello(msg.body);
    version = hello.protocol_version;
    pid = hello.pid;
    py_version = std::move(hello.python_version);
    np_version = std::move(hello.numpy_version);
  } catch (const ipc::DecodeError& e) {
    fail(Wait::kError, "HELLO", std::string("malformed HELLO: ") + e.what());
  }
  if (version != ipc::PROTOCOL_VERSION) {
    MarkDead("protocol version mismatch");
    Throw(TRITONSERVER_ERROR_INTERNAL,
          what + "protocol version mismatch: the backend library " + opts_.backend_library +
              " speaks version " + std::to_string(ipc::PROTOCOL_VERSION) +
              " but the stub (pybackend found by " + opts_.python + " with PYTHONPATH starting " +
              (opts_.package_parent.empty() ? "<unchanged>" : opts_.package_parent) +
              ") speaks version " + std::to_string(version) +
              ". Install the backend library and the pybackend package from the same release.");
  }
  PB_LOG_VERBOSE(log_prefix_ + "stub pid " + std::to_string(pid) + " ready: Python " + py_version +
                 ", numpy " + np_version);

  if (lane_ != nullptr) {
    // From here on the stub sleeps on the lane's bell; both sides count socket messages.
    if (!sync_->Send(ipc::MessageKind::LANE, 0, nullptr, 0, static_cast<int>(left().count()),
                     &error, lane_->fd())) {
      fail(Wait::kError, "INIT_REPLY", error);
    }
    sync_->AttachLane(lane_.get());
    lane_active_ = true;
  }

  std::vector<uint8_t> init = ipc::EncodeJson(init_args.Dump());
  if (!sync_->Send(ipc::MessageKind::INIT, 0, init.data(), init.size(),
                   static_cast<int>(left().count()), &error)) {
    fail(Wait::kError, "INIT_REPLY", error);
  }
  // The load itself (model.py's import, auto_complete_config or initialize) may take as long
  // as it takes, as on the original (weights loaded for minutes), unless an operator bounds
  // it; a stub that dies, or stays stopped past stub-timeout-seconds, still ends the wait.
  w = WaitSync(ipc::MessageKind::INIT_REPLY, opts_.init_timeout, &msg, &error);
  if (w != Wait::kOk) fail(w, "INIT_REPLY", error);
  json::Value reply;
  try {
    reply = json::Value::Parse(ipc::DecodeJson(msg.body));
  } catch (const std::exception& e) {
    fail(Wait::kError, "INIT_REPLY", std::string("malformed INIT_REPLY: ") + e.what());
  }
  AwaitLogsBefore(reply, "INIT_REPLY");
  return reply;
}

void StubSession::AwaitLogsBefore(const json::Value& reply, const char* step) {
  // What the model logged before the reply (initialize's Logger lines, the load error's
  // text) travels on async, the reply on sync: the load or unload must not complete before
  // the monitor has logged it, or a caller reading the log, or switching logging off, right
  // after the load misses lines (the original has that race). The reply's async_seq counts
  // the async messages sent before it, as RESULT's does.
  const json::Value* seq = reply.Find("async_seq");
  if (seq == nullptr || !seq->is_int()) return;
  if (!WaitAsyncProcessed(static_cast<uint32_t>(seq->AsInt()), opts_.timeout)) {
    PB_LOG_WARN(log_prefix_ + "log messages sent before " + step + " did not arrive within " +
                Seconds(opts_.timeout) + "; some of the stub's lines may follow later");
  }
}

std::string StubSession::Finalize() {
  if (process_ == nullptr) return "";
  std::string result;
  bool replied = false;
  if (alive()) {
    std::string error;
    ipc::Message msg;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      finalizing_ = true;  // it exits after FINALIZE_REPLY: that EOF is no crash
    }
    ledger_.SendReturns(*sync_, static_cast<int>(opts_.timeout.count()), &error);
    if (sync_->Send(ipc::MessageKind::FINALIZE, 0, nullptr, 0,
                    static_cast<int>(opts_.timeout.count()), &error)) {
      // The model's finalize may take as long as it takes (saving state), as on the
      // original, unless an operator bounds it; a stub that dies, or stays stopped past
      // stub-timeout-seconds, still ends the wait.
      Wait w = WaitSync(ipc::MessageKind::FINALIZE_REPLY, opts_.finalize_timeout, &msg, &error);
      if (w == Wait::kOk) {
        replied = true;
        try {
          json::Value v = json::Value::Parse(ipc::DecodeJson(msg.body));
          if (const json::Value* e = v.Find("error"); e != nullptr && e->is_string()) {
            result = e->AsString();
          }
          AwaitLogsBefore(v, "FINALIZE_REPLY");
        } catch (const std::exception& e) {
          result = std::string("malformed FINALIZE_REPLY: ") + e.what();
        }
      } else if (w == Wait::kTimeout) {
        PB_LOG_WARN(log_prefix_ + "no FINALIZE_REPLY within " + Seconds(opts_.finalize_timeout) +
                    " (backend config finalize-timeout-seconds); killing the stub");
      }
    }
  }
  if (!replied) {
    process_->Kill();  // hung, gone or confused: no point waiting for a clean exit
    process_->WaitExit(std::chrono::milliseconds(5000));
  } else if (!process_->WaitExit(opts_.timeout)) {
    PB_LOG_WARN(log_prefix_ + "the stub did not exit within " + Seconds(opts_.timeout) +
                " after FINALIZE; killing it");
    process_->Kill();
    process_->WaitExit(std::chrono::milliseconds(5000));
  }
  // Let the monitor log the stub's last output before it stops, and handle what it sent on
  // async before its FINALIZE_REPLY (finalize's Logger lines): the async EOF comes after
  // them. An instance of a shared process has no exit to wait for, only that EOF.
  {
    std::unique_lock<std::mutex> lock(state_mu_);
    state_cv_.wait_for(lock, std::chrono::milliseconds(1000),
                       [&] { return stderr_closed_ && async_closed_; });
  }
  MarkDead("finalized");
  monitor_->Stop();
  return result;
}

std::string StubSession::StubRole() const {
  // The auto-complete stub is named after the model; instance stubs after their instance.
  if (opts_.instance_name == opts_.model_name) return " (auto-complete)";
  return ", instance '" + opts_.instance_name + "'";
}

void StubSession::StopMonitor() {
  if (monitor_ != nullptr) monitor_->Stop();
}

std::unique_ptr<ipc::Channel> StubSession::MakeChannel(int fd, const char* name) {
  // Indirect bodies: ours allocated from the ledger's arena, the stub's read from its
  // segments and queued for return like any other block of the stub's we are done with.
  return std::make_unique<ipc::Channel>(fd, name, &ledger_.arena(), &ledger_.peers(),
                                        ledger_.returns());
}

bool StubSession::StoppedTooLong(bool quiet_slice, std::optional<Clock::time_point>* since) {
  // A stopped stub (SIGSTOP, SIGTSTP) is alive but will never answer: give up on it after
  // stub-timeout-seconds even where the wait itself has no bound (execute-timeout-seconds 0).
  if (!quiet_slice) return false;
  if (!process_->Stopped()) {
    since->reset();
    return false;
  }
  auto now = Clock::now();
  if (!*since) *since = now;
  if (now - **since < opts_.timeout) return false;
  MarkDead("it was stopped (SIGSTOP or SIGTSTP) for longer than stub-timeout-seconds=" +
           Seconds(opts_.timeout));
  return true;
}

bool StubSession::HandleCommon(ipc::Message& msg) {
  using ipc::MessageKind;
  switch (static_cast<MessageKind>(msg.kind)) {
    case MessageKind::SEGMENT_ADD: {
      // owner: always the stub here
      ipc::SegmentAddMsg add = ipc::DecodeSegmentAdd(msg.body);
      if (!msg.fd) throw std::runtime_error("SEGMENT_ADD without an fd");
      ledger_.peers().Add(add.seg, add.size, msg.fd.Release());
      return true;
    }
    case MessageKind::SEGMENT_DROP: {
      ledger_.peers().Drop(ipc::DecodeSegmentDrop(msg.body).seg);
      return true;
    }
    case MessageKind::FREE: {
      ledger_.OnStubFree(ipc::DecodeFree(msg.body).blocks);
      return true;
    }
    case MessageKind::LOG: {
      ipc::LogMsg log = ipc::DecodeLog(msg.body);
      LogFromModel(log.level, log.file, log.line, log.message);
      return true;
    }
    default:
      return false;
  }
}

bool StubSession::alive() { return !dead_.load(std::memory_order_acquire); }

void StubSession::MarkDead(const std::string& reason, bool telling) {
  bool kill_it = false;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (!dead_.load()) {
      dead_reason_ = telling ? reason : "";
      dead_.store(true, std::memory_order_release);
      kill_it = !finalizing_;
    }
  }
  state_cv_.notify_all();
  if (lane_ != nullptr) lane_->WakeWaiter();  // a thread asleep on the lane checks alive()
  ledger_.OnStubDead();
  // A stub we gave up on (timeout, protocol error, closed channel) must not linger. But an
  // instance of a process the model's instances share whose end of the channel is closed
  // has ended by itself (its thread closes its channels as it ends): ending that process
  // would fail the other instances' requests for nothing.
  if (kill_it && process_ != nullptr && !(process_->hosted() && PeerClosed())) process_->Kill();
}

bool StubSession::PeerClosed() {
  if (sync_ == nullptr) return false;
  pollfd p{sync_->fd(), POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & POLLHUP) != 0;
}

std::string StubSession::DeathDetail() {
  std::string text;
  if (process_ != nullptr) {
    process_->WaitExit(std::chrono::milliseconds(1000));
    {
      std::unique_lock<std::mutex> lock(state_mu_);
      state_cv_.wait_for(lock, std::chrono::milliseconds(500), [&] { return stderr_closed_; });
    }
    text = "The stub (pid " + std::to_string(process_->pid()) + ") of model '" + opts_.model_name +
           "'" + StubRole() + " " + process_->ExitDescription();
  }
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (!dead_reason_.empty()) {
      text += " (" + dead_reason_ + ")";
    }
  }
  text += ".";
  std::string tail = StderrTail();
  if (tail.empty() && process_ != nullptr) tail = process_->HostTail();
  if (!tail.empty()) text += " Last lines of its stderr:\n" + tail;
  return text;
}

std::string StubSession::UnhealthyMessage(const std::string& next) {
  return "Stub process '" + opts_.instance_name + "' is not healthy. " + DeathDetail() + "\n" +
         (next.empty() ? "Fix the cause above, then unload and load the model (a load alone is "
                         "ignored while the model is loaded and unchanged) or restart the server "
                         "to start a new stub."
                       : next);
}

void StubSession::CountAsyncProcessed() {
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    ++async_processed_;
  }
  state_cv_.notify_all();
}

void StubSession::SetAsyncClosed() {
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    async_closed_ = true;
  }
  state_cv_.notify_all();
}

void StubSession::AppendStderrLine(const std::string& line) {
  std::lock_guard<std::mutex> lock(state_mu_);
  stderr_tail_.push_back(line);
  while (stderr_tail_.size() > kStderrTailLines) stderr_tail_.pop_front();
}

void StubSession::SetStderrClosed() {
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    stderr_closed_ = true;
  }
  state_cv_.notify_all();
}

std::string StubSession::StderrTail() {
  std::lock_guard<std::mutex> lock(state_mu_);
  std::string out;
  for (const auto& l : stderr_tail_) {
    out += "  ";
    out += l;
    out += "\n";
  }
  if (!out.empty()) out.pop_back();
  return out;
}

void StubSession::set_instance_metrics(std::shared_ptr<InstanceMetrics> metrics) {
  instance_metrics_ = metrics;
  ledger_.set_on_ipc_count([m = std::move(metrics)](size_t n) {
    if (m) m->SetIpcHandlesOpen(n);
  });
}

void StubSession::CountGpuCopy(cuda::Direction d) {
  if (instance_metrics_) instance_metrics_->GpuCopy(static_cast<int>(d));
}

}  // namespace pybackend
