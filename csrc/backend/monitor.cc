#include "backend/monitor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "backend/logging.h"
#include "backend/stub_session.h"
#include "backend/thread_name.h"
#include "ipc/codec.h"
#include "ipc/messages/session.h"

namespace pybackend {
namespace {

constexpr int kPollMs = 50;
// With nothing to flush or release an idle instance only needs a rare wake-up.
constexpr int kIdlePollMs = 1000;
constexpr auto kPeriodic = std::chrono::milliseconds(50);
// After the stub died, keep reading its pipes this long for the last words on stderr (a
// child of the stub may hold them open; requests still open wait for this, within 1 s).
constexpr auto kPipeGrace = std::chrono::milliseconds(500);
constexpr size_t kMaxLine = 64 * 1024;

}  // namespace

Monitor::Monitor(StubSession* session)
    : s_(session), stop_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

Monitor::~Monitor() { Stop(); }

void Monitor::Start() {
  last_periodic_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] {
    NameThisThread("pb_monitor");
    MemoryLedger::OnMonitorThread();  // the FREEs it handles are what Lend waits for
    Run();
  });
}

void Monitor::Stop() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  ssize_t ignored = write(stop_fd_.get(), &one, sizeof(one));
  (void)ignored;
  thread_.join();
}

void Monitor::Run() {
  StubProcess* proc = s_->process();
  enum { kAsync, kOut, kErr, kPid, kStop, kCount };
  pollfd fds[kCount];
  fds[kAsync] = {s_->async().fd(), POLLIN, 0};
  fds[kOut] = {proc->stdout_fd(), POLLIN, 0};
  fds[kErr] = {proc->stderr_fd(), POLLIN, 0};
  fds[kPid] = {proc->pidfd(), POLLIN, 0};
  fds[kStop] = {stop_fd_.get(), POLLIN, 0};
  bool gone_reported = false;
  bool async_drained = false;
  std::chrono::steady_clock::time_point dead_since{};

  while (true) {
    bool busy = fds[kPid].fd < 0 || s_->ledger().HasWork() || !s_->alive();
    int n = poll(fds, kCount, busy ? kPollMs : kIdlePollMs);
    if (n < 0 && errno != EINTR) {
      PB_LOG_ERROR(s_->log_prefix() + "monitor poll failed: " + std::strerror(errno));
      break;
    }
    if (fds[kStop].revents) break;
    if (fds[kAsync].fd >= 0 && fds[kAsync].revents) {
      DrainAsync();
      if (!async_open_) fds[kAsync].fd = -1;
    }
    if (fds[kOut].fd >= 0 && fds[kOut].revents) {
      if (!ReadPipe(fds[kOut].fd, &out_partial_, false)) fds[kOut].fd = -1;
    }
    if (fds[kErr].fd >= 0 && fds[kErr].revents) {
      if (!ReadPipe(fds[kErr].fd, &err_partial_, true)) {
        fds[kErr].fd = -1;
        s_->SetStderrClosed();
      }
    }
    if (fds[kPid].fd >= 0 && fds[kPid].revents) {
      fds[kPid].fd = -1;
      proc->Poll();
      s_->MarkDead("the stub process ended", false);
    } else if (fds[kPid].fd < 0 && !s_->dead_ && proc->Poll()) {
      s_->MarkDead("the stub process ended", false);  // no pidfd on this kernel: polled
    }

    if (!s_->alive() && !async_drained) {
      // Whatever the stub said before dying is already queued: handle it first so sends
      // made just before the crash still reach their clients.
      if (fds[kAsync].fd >= 0) DrainAsync();
      fds[kAsync].fd = -1;
      s_->SetAsyncClosed();
      async_drained = true;
      dead_since = std::chrono::steady_clock::now();
    }
    if (async_drained) {
      // Read the pipes to their end (bounded) so error messages carry the stub's last words.
      bool pipes_done = fds[kOut].fd < 0 && fds[kErr].fd < 0;
      if (!gone_reported &&
          (pipes_done || std::chrono::steady_clock::now() - dead_since > kPipeGrace)) {
        if (!out_partial_.empty()) EmitLine(out_partial_, false);
        if (!err_partial_.empty()) EmitLine(err_partial_, true);
        out_partial_.clear();
        err_partial_.clear();
        s_->SetStderrClosed();
        fds[kOut].fd = fds[kErr].fd = fds[kPid].fd = -1;  // only the stop event is left
        gone_reported = true;
        if (s_->handler() != nullptr) s_->handler()->OnStubGone(*s_);
        s_->ledger().OnStubGone();
      }
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    if (now - last_periodic_ >= kPeriodic) {
      last_periodic_ = now;
      Periodic();
    }
  }
}

void Monitor::DrainAsync() {
  ipc::Channel& ch = s_->async();
  // Bounded batch so pipes and periodic work are not starved by a chatty stub.
  for (int i = 0; i < 256; ++i) {
    ipc::Message msg;
    std::string error;
    auto st = ch.Recv(&msg, &error);
    if (st == ipc::Channel::RecvStatus::kWouldBlock) return;
    if (st == ipc::Channel::RecvStatus::kClosed) {
      async_open_ = false;
      s_->MarkDead("the stub closed its async channel", false);
      return;
    }
    if (st == ipc::Channel::RecvStatus::kError) {
      PB_LOG_ERROR(s_->log_prefix() + error);
      async_open_ = false;
      s_->MarkDead("protocol error on the async channel: " + error);
      return;
    }
    try {
      if (CustomMetrics::IsMetricKind(msg.kind)) {
        s_->metrics().Handle(*s_, msg);
      } else if (!s_->HandleCommon(msg)) {
        AsyncHandler* h = s_->handler();
        switch (static_cast<ipc::MessageKind>(msg.kind)) {
          case ipc::MessageKind::SEND:
            if (h != nullptr) {
              h->OnSend(*s_, msg);
            } else {
              PB_LOG_ERROR(s_->log_prefix() + "response sent outside of an instance ignored");
            }
            break;
          case ipc::MessageKind::IS_CANCELLED:
            if (h != nullptr) h->OnIsCancelled(*s_, msg);
            break;
          case ipc::MessageKind::SENDER_DROPPED:
            if (h != nullptr) h->OnSenderDropped(*s_, msg);
            break;
          default:
            if (h != nullptr && h->OnOther(*s_, msg)) break;
            PB_LOG_WARN(s_->log_prefix() + "unexpected " + ipc::KindName(msg.kind) +
                        " message on the async channel ignored");
        }
      }
    } catch (const std::exception& e) {
      PB_LOG_ERROR(s_->log_prefix() + "failed to handle " + ipc::KindName(msg.kind) +
                   " from the stub: " + e.what());
    }
    s_->CountAsyncProcessed();
  }
}

bool Monitor::ReadPipe(int fd, std::string* partial, bool is_stderr) {
  char buf[4096];
  for (int i = 0; i < 16; ++i) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    if (n == 0) {
      if (!partial->empty()) EmitLine(*partial, is_stderr);
      partial->clear();
      return false;
    }
    partial->append(buf, static_cast<size_t>(n));
    size_t start = 0;
    while (true) {
      size_t nl = partial->find('\n', start);
      if (nl == std::string::npos) break;
      EmitLine(partial->substr(start, nl - start), is_stderr);
      start = nl + 1;
    }
    partial->erase(0, start);
    if (partial->size() > kMaxLine) {
      EmitLine(*partial, is_stderr);
      partial->clear();
    }
  }
  return true;
}

void Monitor::EmitLine(const std::string& raw, bool is_stderr) {
  std::string line = raw;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (is_stderr) {
    s_->AppendStderrLine(line);
    PB_LOG_ERROR(s_->log_prefix() + line);
  } else {
    PB_LOG_INFO(s_->log_prefix() + line);
  }
}

void Monitor::Periodic() {
  if (!s_->alive()) return;
  std::string error;
  int timeout_ms = static_cast<int>(s_->options().timeout.count());
  MemoryLedger& ledger = s_->ledger();
  if (ledger.KeepaliveDue(kPeriodic)) {
    // Idle since a RESULT that referenced the stub's blocks: a FREE on sync makes the stub
    // drop them (no batch in flight: we hold the batch lock, so it cannot follow an EXECUTE).
    std::unique_lock<std::mutex> batch(s_->batch_mutex(), std::try_to_lock);
    if (batch.owns_lock() && ledger.TakeKeepalive() &&
        !ledger.SendReturns(s_->sync(), timeout_ms, &error, true)) {
      PB_LOG_WARN(s_->log_prefix() + error);
    }
  }
  // Whatever else we are done with goes back on async (no batch to ride on right now).
  if (!ledger.SendReturns(s_->async(), timeout_ms, &error)) {
    PB_LOG_WARN(s_->log_prefix() + error);
  }
  for (uint32_t seg : ledger.ReleaseIdleSegments()) {
    if (!s_->async().Send(ipc::MessageKind::SEGMENT_DROP, 0,
                          ipc::EncodeSegmentDrop({ipc::Owner::BACKEND, seg}), timeout_ms, &error)) {
      PB_LOG_WARN(s_->log_prefix() + error);
    }
  }
}

}  // namespace pybackend
