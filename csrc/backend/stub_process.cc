#include "backend/stub_process.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "backend/error.h"
#include "ipc/protocol.h"

extern char** environ;

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace pybackend {
namespace {

// Child-side fds are moved to >= kHighFd first: then no dup2 below can clobber a source fd,
// and dup2(fd, fd) (which would keep FD_CLOEXEC) cannot happen.
constexpr int kHighFd = 10;

int MoveHigh(int fd) {
  if (fd >= kHighFd) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, kHighFd);
  int err = errno;
  close(fd);
  errno = err;
  return moved;
}

using AddCloseFromFn = int (*)(posix_spawn_file_actions_t*, int);

AddCloseFromFn AddCloseFrom() {
  // glibc >= 2.34; looked up at run time so the library also loads on older systems.
  static AddCloseFromFn fn = reinterpret_cast<AddCloseFromFn>(
      dlsym(RTLD_DEFAULT, "posix_spawn_file_actions_addclosefrom_np"));
  return fn;
}

std::string SignalName(int sig) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev != nullptr) return std::string("SIG") + abbrev;
#endif
  const char* desc = strsignal(sig);
  return desc != nullptr ? desc : "unknown signal";
}

}  // namespace

std::vector<std::string> BuildEnv(const SpawnOptions& opts) {
  std::vector<std::string> out;
  auto overridden = [&](const std::string& entry) {
    size_t eq = entry.find('=');
    std::string key = entry.substr(0, eq);
    if (key == "PYTHONPATH" && !opts.pythonpath_prepend.empty()) return true;
    for (const auto& k : opts.env_unset) {
      if (k == key) return true;
    }
    for (const auto& [k, v] : opts.env) {
      if (k == key) return true;
    }
    return false;
  };
  std::string old_pythonpath;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    if (entry.rfind("PYTHONPATH=", 0) == 0) old_pythonpath = entry.substr(11);
    if (!overridden(entry)) out.push_back(std::move(entry));
  }
  for (const auto& [k, v] : opts.env) out.push_back(k + "=" + v);
  if (!opts.pythonpath_prepend.empty()) {
    std::string pp = opts.pythonpath_prepend;
    if (!old_pythonpath.empty()) pp += ":" + old_pythonpath;
    out.push_back("PYTHONPATH=" + pp);
  }
  return out;
}

int SpawnWith(const SpawnOptions& opts, const posix_spawn_file_actions_t* fa,
              const posix_spawnattr_t* attr, pid_t* pid) {
  std::vector<std::string> argv_s{opts.python};
  argv_s.insert(argv_s.end(), opts.args.begin(), opts.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = BuildEnv(opts);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  return posix_spawnp(pid, opts.python.c_str(), fa, attr, argv.data(), envp.data());
}

std::unique_ptr<StubProcess> StubProcess::Spawn(const SpawnOptions& opts, ipc::UniqueFd* sync,
                                                ipc::UniqueFd* async) {
  auto fail = [&](const std::string& what, int err) {
    Throw(TRITONSERVER_ERROR_INTERNAL, "failed to start the Python stub '" + opts.python +
                                           "': " + what + ": " + std::strerror(err));
  };
  int sp_sync[2], sp_async[2], p_out[2], p_err[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp_sync) != 0) {
    fail("socketpair", errno);
  }
  ipc::UniqueFd sync_parent(sp_sync[0]), sync_child(MoveHigh(sp_sync[1]));
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp_async) != 0) {
    fail("socketpair", errno);
  }
  ipc::UniqueFd async_parent(sp_async[0]), async_child(MoveHigh(sp_async[1]));
  if (pipe2(p_out, O_CLOEXEC) != 0) fail("pipe", errno);
  ipc::UniqueFd out_read(p_out[0]), out_write(MoveHigh(p_out[1]));
  if (pipe2(p_err, O_CLOEXEC) != 0) fail("pipe", errno);
  ipc::UniqueFd err_read(p_err[0]), err_write(MoveHigh(p_err[1]));
  if (!sync_child || !async_child || !out_write || !err_write) fail("fcntl(F_DUPFD)", errno);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, err_write.get(), 2);
  posix_spawn_file_actions_adddup2(&fa, sync_child.get(), ipc::SYNC_FD);
  posix_spawn_file_actions_adddup2(&fa, async_child.get(), ipc::ASYNC_FD);
  if (AddCloseFrom() != nullptr) AddCloseFrom()(&fa, ipc::ASYNC_FD + 1);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  posix_spawnattr_setsigmask(&attr, &empty);   // server threads may block signals
  posix_spawnattr_setsigdefault(&attr, &all);  // and ignore SIGPIPE
  // Own process group: a Ctrl-C meant for the server does not kill stubs before the server
  // finalizes them. Parent death still ends the stub (EOF on its sockets).
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  pid_t pid = -1;
  int rc = SpawnWith(opts, &fa, &attr, &pid);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    Throw(TRITONSERVER_ERROR_INTERNAL,
          "failed to start the Python stub with interpreter '" + opts.python +
              "': " + std::strerror(rc) +
              " (choose the interpreter with the model parameter EXECUTION_ENV_PATH, the "
              "backend config python-executable or the environment variable PYBACKEND_PYTHON)");
  }

  std::unique_ptr<StubProcess> proc(new StubProcess());
  proc->pid_ = pid;
  int pfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pfd >= 0) {
    fcntl(pfd, F_SETFD, FD_CLOEXEC);
    proc->pidfd_.Reset(pfd);
  }
  proc->stdout_ = std::move(out_read);
  proc->stderr_ = std::move(err_read);
  for (int fd : {proc->stdout_.get(), proc->stderr_.get()}) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  *sync = std::move(sync_parent);
  *async = std::move(async_parent);
  return proc;  // the child ends close here, so EOF means the stub is gone
}

StubProcess::~StubProcess() {
  if (!Poll()) {
    Kill();
    WaitExit(std::chrono::milliseconds(5000));
  }
}

bool StubProcess::PollLocked() {
  if (attached_) return PollAttachedLocked();
  if (reaped_) return true;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_ = status;
    return true;
  }
  if (r < 0 && errno == ECHILD) {
    // Someone else reaped it (a SIGCHLD handler of the host process): it is gone.
    reaped_ = true;
    status_ = -1;
    return true;
  }
  return false;
}

bool StubProcess::Poll() {
  std::lock_guard<std::mutex> lock(mu_);
  return PollLocked();
}

bool StubProcess::exited() { return Poll(); }

bool StubProcess::Stopped() {
  if (Poll()) return false;
  std::ifstream f("/proc/" + std::to_string(pid_) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // "<pid> (<comm>) <state> ...": comm may hold spaces and ')', so look after the last ')'.
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'T';
}

std::string StubProcess::ExitDescription() {
  std::lock_guard<std::mutex> lock(mu_);
  if (attached_) return AttachedDescriptionLocked();
  if (!PollLocked()) return "is still running";
  if (status_ == -1) return "exited (status unknown)";
  if (WIFEXITED(status_)) return "exited with code " + std::to_string(WEXITSTATUS(status_));
  if (WIFSIGNALED(status_)) {
    int sig = WTERMSIG(status_);
    return "was killed by signal " + std::to_string(sig) + " (" + SignalName(sig) + ")";
  }
  return "ended with status " + std::to_string(status_);
}

bool StubProcess::WaitExit(std::chrono::milliseconds timeout) {
  if (attached_) {
    // Only its serving thread ends (it closed or will close the channels): nothing to wait for.
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    return true;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (Poll()) return true;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    if (pidfd_) {
      pollfd p{pidfd_.get(), POLLIN, 0};
      poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<long long>(left, 10)));
    }
  }
}

void StubProcess::Kill() {
  std::lock_guard<std::mutex> lock(mu_);
  if (attached_) {
    // The user's process: closing the channels ends its serving thread. A process shared
    // by a model's instances ends as a whole (a thread cannot be stopped alone).
    if (hosted_ != nullptr && !released_ && !reaped_) hosted_->kill();
    released_ = true;
    return;
  }
  if (PollLocked()) return;
  kill(pid_, SIGKILL);  // not reaped yet, so the pid is still ours
}

}  // namespace pybackend
