// Attach mode: the "stub" is a thread of a process that serves the model itself (the user's
// process under pybackend.pytriton) and listens on a Unix socket, instead of a
// `python -m pybackend.stub` we spawn. Everything after the connection is the normal
// protocol (docs/protocol.md, "Attach mode").
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backend/error.h"
#include "backend/stub_process.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace pybackend {

std::unique_ptr<StubProcess> StubProcess::Attach(const std::string& path, const std::string& what,
                                                 ipc::UniqueFd* sync, ipc::UniqueFd* async,
                                                 ipc::UniqueFd* peer_async) {
  auto fail = [&](const std::string& step, int err) {
    Throw(TRITONSERVER_ERROR_UNAVAILABLE,
          "cannot attach " + what + " to the process serving it at '" + path + "': " + step + ": " +
              std::strerror(err) +
              ". That process (the one that called Triton.bind) has ended or stopped serving "
              "this model; start it again, then load the model.");
  };
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) fail("socket path", ENAMETOOLONG);
  std::memcpy(addr.sun_path, path.data(), path.size());
  ipc::UniqueFd conn(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!conn) fail("socket", errno);
  if (connect(conn.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    fail("connect", errno);
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    fail("SO_PEERCRED", errno);
  }
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) fail("socketpair", errno);
  ipc::UniqueFd ours(sp[0]), theirs(sp[1]);

  std::unique_ptr<StubProcess> proc(new StubProcess());
  proc->attached_ = true;
  proc->pid_ = cred.pid;
  // pidfd_open works for any process: its end is seen at once, like a spawned stub's.
  int pfd = static_cast<int>(syscall(SYS_pidfd_open, cred.pid, 0));
  if (pfd >= 0) {
    fcntl(pfd, F_SETFD, FD_CLOEXEC);
    proc->pidfd_.Reset(pfd);
  }
  *sync = std::move(conn);
  *async = std::move(ours);
  *peer_async = std::move(theirs);
  return proc;
}

namespace {

// True once `pid` has ended; waits up to `wait_ms` on its pidfd (-1: none, probe only).
bool PeerEnded(int pidfd, pid_t pid, int wait_ms) {
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    return poll(&p, 1, wait_ms) == 1 && p.revents != 0;
  }
  return kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

bool StubProcess::PollAttachedLocked() {
  if (!reaped_ && PeerEnded(pidfd_.get(), pid_, 0)) reaped_ = true;
  return released_ || reaped_;
}

std::unique_ptr<StubProcess> StubProcess::Hosted(pid_t pid, HostedHooks hooks) {
  std::unique_ptr<StubProcess> proc(new StubProcess());
  proc->attached_ = true;
  proc->pid_ = pid;
  proc->hosted_ = std::make_unique<HostedHooks>(std::move(hooks));
  int pfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pfd >= 0) {
    fcntl(pfd, F_SETFD, FD_CLOEXEC);
    proc->pidfd_.Reset(pfd);
  }
  return proc;
}

std::string StubProcess::HostTail() {
  return hosted_ != nullptr && hosted_->tail ? hosted_->tail() : std::string();
}

std::string StubProcess::AttachedDescriptionLocked() {
  // Its sockets close a moment before its pidfd reports the exit: wait that moment, so a
  // dead process is not described as one that merely hung up.
  if (!reaped_ && PeerEnded(pidfd_.get(), pid_, 200)) reaped_ = true;
  if (hosted_ != nullptr) return hosted_->describe();
  // Not our child: its exit status is its parent's to read.
  if (reaped_) return "(an attached process, the one that called Triton.bind) has exited";
  return "(an attached process, the one that called Triton.bind) closed its connection or "
         "stopped serving the model";
}

}  // namespace pybackend
