// StubSession's sync channel: sending on it (through the lane's slot when one is active) and
// waiting for the stub's answer there, bounded, while noticing a stub that died or was stopped.
#include <poll.h>

#include <cerrno>
#include <optional>

#include "backend/stub_session.h"
#include "cuda/trace.h"

namespace pybackend {

using Clock = std::chrono::steady_clock;

std::optional<std::chrono::milliseconds> StubSession::NextSlice(Clock::time_point deadline,
                                                                bool bounded) {
  // Wake up now and then even without a bound: to notice a stopped stub, and to poll the
  // process where there is no pidfd.
  auto slice = std::chrono::milliseconds(process_->pidfd() < 0 ? 100 : 1000);
  if (bounded) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    slice = std::min(slice, left + std::chrono::milliseconds(1));
  }
  return slice;
}

StubSession::Wait StubSession::RecvFailed(ipc::Channel::RecvStatus st, const std::string& error) {
  if (st == ipc::Channel::RecvStatus::kClosed) {
    MarkDead("the stub closed its sync channel", false);
    return Wait::kDead;
  }
  MarkDead("protocol error: " + error);
  return Wait::kError;
}

StubSession::Wait StubSession::WaitReadable(int fd, Clock::time_point deadline, bool bounded) {
  StubProcess* proc = process_.get();
  std::optional<Clock::time_point> stopped_since;
  while (true) {
    std::optional<std::chrono::milliseconds> slice = NextSlice(deadline, bounded);
    if (!slice) return Wait::kTimeout;
    pollfd fds[2] = {{fd, POLLIN, 0}, {proc->pidfd(), POLLIN, 0}};
    int n = poll(fds, proc->pidfd() >= 0 ? 2 : 1, static_cast<int>(slice->count()));
    if (n < 0 && errno != EINTR) return Wait::kError;
    if (fds[0].revents) return Wait::kOk;
    if (StoppedTooLong(n == 0, &stopped_since)) return Wait::kDead;
    bool gone = (proc->pidfd() >= 0 && fds[1].revents) || (proc->pidfd() < 0 && proc->Poll());
    if (gone || !alive()) {
      // Anything it sent before exiting is already queued on our socket.
      pollfd again{fd, POLLIN, 0};
      if (poll(&again, 1, 0) > 0) return Wait::kOk;
      MarkDead("the stub process ended", false);
      return Wait::kDead;
    }
  }
}

bool StubSession::SendSync(ipc::MessageKind kind, uint64_t id, const uint8_t* body, size_t len,
                           std::string* error) {
  int timeout_ms = static_cast<int>(opts_.timeout.count());
  std::lock_guard<std::mutex> lock(sync_send_mu_);
  if (lane_active_) {
    // New segments first, on the socket: the stub reads counted socket messages first.
    if (!sync_->AnnounceSegments(timeout_ms, error)) return false;
    if (lane_->Post(kind, id, body, len)) return true;
  }
  return sync_->Send(kind, id, body, len, timeout_ms, error);
}

void StubSession::WakeForResult() {
  if (opts_.spin_us <= 0 || !lane_active_) return;
  rearm_spin_.store(true, std::memory_order_release);
  lane_->Nudge();  // the waiter, if asleep, wakes without a message and polls again
}

StubSession::Wait StubSession::NextSyncFromLane(ipc::Message* out, Clock::time_point deadline,
                                                bool bounded, Clock::time_point spin_until,
                                                std::string* error) {
  StubProcess* proc = process_.get();
  std::optional<Clock::time_point> stopped_since;
  while (true) {
    uint32_t seen = lane_->UpBell();
    bool gone = !alive();
    if (lane_->SocketPending() || gone) {
      auto st = sync_->Recv(out, error);
      if (st == ipc::Channel::RecvStatus::kOk) {
        lane_->SocketRead();
        return Wait::kOk;
      }
      if (st != ipc::Channel::RecvStatus::kWouldBlock) return RecvFailed(st, *error);
      // Counted but not readable yet: the count is bumped after the send returns, so this
      // only happens when it is gone.
    }
    if (lane_->Take(out)) return Wait::kOk;
    if (gone) return Wait::kDead;  // the monitor saw it go, and rang the bell
    if (opts_.spin_us > 0) {
      if (rearm_spin_.exchange(false, std::memory_order_acq_rel)) {
        cuda::trace::Count("lane.rearm");
        spin_until = Clock::now() + std::chrono::microseconds(opts_.spin_us);
      }
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(spin_until - Clock::now());
      if (left.count() > 0 && lane_->Spin(seen, left)) continue;
      // WakeForResult during that poll (its nudge wakes only a sleeper): poll afresh.
      if (rearm_spin_.load(std::memory_order_acquire)) continue;
    }
    std::optional<std::chrono::milliseconds> slice = NextSlice(deadline, bounded);
    if (!slice) return Wait::kTimeout;
    auto before = Clock::now();
    {
      // With the stage timers on, each sleep is one event: how many wake-ups a request pays.
      cuda::trace::Stage sleep("lane.sleep");
      lane_->Wait(seen, *slice);
    }
    bool quiet = lane_->UpBell() == seen && Clock::now() - before >= *slice;
    if (StoppedTooLong(quiet, &stopped_since)) return Wait::kDead;
    if (proc->pidfd() < 0 && proc->Poll()) MarkDead("the stub process ended", false);
  }
}

StubSession::Wait StubSession::WaitSync(ipc::MessageKind want, std::chrono::milliseconds timeout,
                                        ipc::Message* out, std::string* error, bool just_sent) {
  bool bounded = timeout.count() >= 0;
  auto deadline = Clock::now() + (bounded ? timeout : std::chrono::milliseconds(0));
  auto spin_until = Clock::now() + std::chrono::microseconds(opts_.spin_us);
  if (just_sent && opts_.spin_us <= 0 && !lane_active_) {
    Wait w = WaitReadable(sync_->fd(), deadline, bounded);
    if (w != Wait::kOk) return w;
  }
  while (true) {
    if (lane_active_) {
      Wait w = NextSyncFromLane(out, deadline, bounded, spin_until, error);
      if (w != Wait::kOk) return w;
    } else {
      auto st = sync_->Recv(out, error);
      if (st == ipc::Channel::RecvStatus::kWouldBlock) {
        // A short busy-poll first saves the cost of waking a sleeping CPU for fast replies.
        if (opts_.spin_us > 0 && Clock::now() < spin_until) continue;
        Wait w = WaitReadable(sync_->fd(), deadline, bounded);
        if (w != Wait::kOk) return w;
        continue;
      }
      if (st != ipc::Channel::RecvStatus::kOk) return RecvFailed(st, *error);
    }
    if (out->kind == static_cast<uint16_t>(want)) return Wait::kOk;
    if (HandleCommon(*out)) continue;
    if (want == ipc::MessageKind::RESULT &&
        out->kind == static_cast<uint16_t>(ipc::MessageKind::BLS_EXEC)) {
      // A BLS call from the thread running execute: started here, answered on sync.
      AsyncHandler* h = handler();
      if (h != nullptr && h->OnSyncCall(*this, *out)) {
        // The RESULT now comes after the call's answer and the rest of execute: a fresh wait,
        // with a fresh spin (the first one has mostly run out while the stub built the call).
        spin_until = Clock::now() + std::chrono::microseconds(opts_.spin_us);
        continue;
      }
    }
    *error = std::string("unexpected ") + ipc::KindName(out->kind) +
             " on the sync channel while waiting for " + ipc::KindName(static_cast<uint16_t>(want));
    MarkDead("protocol error: " + *error);
    return Wait::kError;
  }
}

bool StubSession::WaitAsyncProcessed(uint32_t seq, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_mu_);
  return state_cv_.wait_for(lock, timeout, [&] {
    return static_cast<int32_t>(async_processed_ - seq) >= 0 || async_closed_;
  }) && static_cast<int32_t>(async_processed_ - seq) >= 0;
}

}  // namespace pybackend
