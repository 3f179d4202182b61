// The per-stub monitor thread: reads the async channel (logs, frees, segments, response
// sends, cancellation queries), the stub's stdout/stderr pipes and its pidfd, and does the
// periodic work (returning the stub's blocks, releasing idle arena segments). A poll timeout
// of 50 ms paces the periodic work while there is some (1 s otherwise, so idle instances cost
// nothing); an eventfd stops the thread at once.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "ipc/channel.h"

namespace pybackend {

class StubSession;

class Monitor {
 public:
  explicit Monitor(StubSession* session);
  ~Monitor();
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  void Start();
  void Stop();  // idempotent; joins the thread

 private:
  void Run();
  void DrainAsync();
  // Reads what is available on a pipe; returns false on EOF.
  bool ReadPipe(int fd, std::string* partial, bool is_stderr);
  void EmitLine(const std::string& line, bool is_stderr);
  void Periodic();

  StubSession* s_;
  ipc::UniqueFd stop_fd_;
  std::thread thread_;
  std::string out_partial_;
  std::string err_partial_;
  bool async_open_ = true;
  std::chrono::steady_clock::time_point last_periodic_;
};

}  // namespace pybackend
