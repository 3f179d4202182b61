// The stub as an operating-system process: spawning it (posix_spawn, socketpairs on fds 3
// and 4, stdout/stderr pipes, stdin /dev/null), watching it (pidfd, or waitpid polling where
// pidfd_open is missing), reaping it and describing how it ended.
#pragma once

#include <spawn.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ipc/channel.h"

namespace pybackend {

struct SpawnOptions {
  std::string python;                                    // interpreter (path or name on PATH)
  std::vector<std::string> args;                         // after the interpreter
  std::vector<std::pair<std::string, std::string>> env;  // set/override in the server's env
  std::string pythonpath_prepend;                        // put first on PYTHONPATH ("" = none)
  std::vector<std::string> env_unset;                    // removed from the server's env
};

// The child's environment: the server's, less env_unset, with env and PYTHONPATH applied.
std::vector<std::string> BuildEnv(const SpawnOptions& opts);

// posix_spawnp of opts.python with opts.args in BuildEnv(opts); `attr` may be null. Returns
// posix_spawnp's result (0 or an errno value).
int SpawnWith(const SpawnOptions& opts, const posix_spawn_file_actions_t* fa,
              const posix_spawnattr_t* attr, pid_t* pid);

class StubProcess {
 public:
  // Throws BackendError (INTERNAL) when the process cannot be started. On success the
  // backend ends of the sync and async socketpairs are returned in *sync and *async.
  static std::unique_ptr<StubProcess> Spawn(const SpawnOptions& opts, ipc::UniqueFd* sync,
                                            ipc::UniqueFd* async);
  // Attach mode: connects to the Unix SOCK_SEQPACKET socket `path` that a process serving the
  // model itself listens on (pybackend.pytriton). The connection becomes *sync; *async is
  // our end of a fresh socketpair whose other end, *peer_async, the caller passes to that
  // process with ATTACH. The process is watched (pidfd of the peer) but never killed: it is
  // the user's. Throws BackendError (UNAVAILABLE) naming `what` when nobody listens.
  static std::unique_ptr<StubProcess> Attach(const std::string& path, const std::string& what,
                                             ipc::UniqueFd* sync, ipc::UniqueFd* async,
                                             ipc::UniqueFd* peer_async);
  // An instance served by a process the model's instances share (instance_host.h): watched
  // through pidfd_open(`pid`) like an attached one; `kill` ends what serves it (the shared
  // process, or a fork child), `describe` says how it ended and `tail` gives the last lines
  // of that process's stderr.
  struct HostedHooks {
    std::function<void()> kill;
    std::function<std::string()> describe;
    std::function<std::string()> tail;
  };
  static std::unique_ptr<StubProcess> Hosted(pid_t pid, HostedHooks hooks);
  // The hosting process's stderr tail ("" for any other kind).
  std::string HostTail();
  bool attached() const { return attached_; }
  bool hosted() const { return hosted_ != nullptr; }
  ~StubProcess();  // kills (SIGKILL) and reaps a process that is still running
  StubProcess(const StubProcess&) = delete;
  StubProcess& operator=(const StubProcess&) = delete;

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }  // -1 where pidfd_open is unavailable
  int stdout_fd() const { return stdout_.get(); }
  int stderr_fd() const { return stderr_.get(); }

  // Reaps the process if it has exited (non-blocking). True once it has exited.
  bool Poll();
  bool exited();
  // True while the process is stopped by a signal (state 'T' in /proc/<pid>/stat); a
  // debugger's tracing stop ('t') does not count.
  bool Stopped();
  // "exited with code 1" / "was killed by signal 9 (SIGKILL)" / "is still running".
  std::string ExitDescription();
  // Waits (bounded) for the process to exit and reaps it. True if it exited.
  bool WaitExit(std::chrono::milliseconds timeout);
  // SIGKILL unless already reaped (never signals a pid that may have been reused).
  void Kill();

 private:
  StubProcess() = default;
  bool PollLocked();
  // Attach mode (stub_attach.cc): "exited" means the peer process ended or we let go of it
  // (Kill, or WaitExit after FINALIZE: its serving thread ends, not the process).
  bool PollAttachedLocked();
  std::string AttachedDescriptionLocked();

  std::mutex mu_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  bool attached_ = false;  // not our child: never signalled, never reaped
  bool released_ = false;  // attach mode: we are done with it
  // Set for an instance of a shared process.
  std::unique_ptr<HostedHooks> hosted_;
  int status_ = 0;
  ipc::UniqueFd pidfd_;
  ipc::UniqueFd stdout_;
  ipc::UniqueFd stderr_;
};

}  // namespace pybackend
