#include "backend/helper_process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backend/error.h"
#include "ipc/channel.h"

namespace pybackend {

bool HelperResult::ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string HelperResult::Describe() const {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended with status " + std::to_string(status);
}

HelperResult RunHelper(const SpawnOptions& opts) {
  int p_out[2], p_err[2];
  if (pipe2(p_out, O_CLOEXEC) != 0 || pipe2(p_err, O_CLOEXEC) != 0) {
    Throw(TRITONSERVER_ERROR_INTERNAL, std::string("pipe: ") + std::strerror(errno));
  }
  ipc::UniqueFd out_read(p_out[0]), out_write(p_out[1]), err_read(p_err[0]), err_write(p_err[1]);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, err_write.get(), 2);
  pid_t pid = -1;
  int rc = SpawnWith(opts, &fa, nullptr, &pid);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    Throw(TRITONSERVER_ERROR_INTERNAL, "cannot run '" + opts.python + "': " + std::strerror(rc));
  }
  out_write.Reset();  // only the child's copies remain: EOF once it exits
  err_write.Reset();

  HelperResult result;
  pollfd fds[2] = {{out_read.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open = 2;
  char buf[4096];
  while (open > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // poll ignores negative fds
        --open;
      }
    }
  }
  while (waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

}  // namespace pybackend
