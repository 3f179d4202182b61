#include "backend/instance_host.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backend/error.h"
#include "backend/host_output.h"
#include "backend/logging.h"
#include "backend/monitor.h"
#include "backend/placement.h"
#include "backend/stub_session.h"
#include "backend/thread_name.h"
#include "ipc/lane.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

namespace pybackend {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kTailLines = 20;
constexpr size_t kMaxReply = 1 << 16;

int PidfdOpen(pid_t pid) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

}  // namespace

InstanceProcess ParseInstanceProcess(const std::string& model, const std::string& value) {
  if (value.empty() || value == "own") return InstanceProcess::kOwn;
  if (value == "shared") return InstanceProcess::kShared;
  if (value == "fork") return InstanceProcess::kFork;
  Throw(TRITONSERVER_ERROR_INVALID_ARG,
        "model '" + model + "': incorrect value for PYBACKEND_INSTANCE_PROCESS: '" + value +
            "' (expected \"own\" (one process per instance, the default), \"shared\" (one "
            "process, one thread per instance) or \"fork\" (model.py imported once, one forked "
            "process per instance); docs/instances.md)");
}

const char* InstanceProcessName(InstanceProcess mode) {
  switch (mode) {
    case InstanceProcess::kShared:
      return "shared";
    case InstanceProcess::kFork:
      return "fork";
    default:
      return "own";
  }
}

// One started host process: it, its control socket, the thread that logs its output and
// keeps the tail of its stderr, and whether the backend ended it (and for whom). Sessions
// keep the generation they were served by, so a death is described after a restart too.
class HostGeneration {
 public:
  HostGeneration(const HostOptions& opts, std::unique_ptr<StubProcess> proc, ipc::UniqueFd control)
      : opts_(opts), proc_(std::move(proc)), control_(std::move(control)), stop_(eventfd(0, 0)) {
    pipes_ = std::thread([this] {
      NameThisThread("pb_host_pipes");
      ReadPipes();
    });
  }

  ~HostGeneration() {
    control_.Reset();  // EOF on its fd 3: the host exits (and its fork children with it)
    if (!proc_->WaitExit(std::chrono::milliseconds(2000))) {
      proc_->Kill();
      proc_->WaitExit(std::chrono::milliseconds(5000));
    }
    uint64_t one = 1;
    ssize_t ignored = write(stop_.get(), &one, sizeof(one));
    (void)ignored;
    pipes_.join();
  }

  StubProcess& proc() { return *proc_; }
  int control() const { return control_.get(); }
  bool Usable() { return !killed_.load() && !proc_->Poll(); }

  // Ends the whole process for `instance` (a thread cannot be stopped alone). Once.
  void Kill(const std::string& instance) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (killed_.load() || proc_->Poll()) return;
      killed_for_ = instance;
      killed_.store(true);
    }
    PB_LOG_WARN("model '" + opts_.model_name +
                "': ending the process shared by its instances (pid " +
                std::to_string(proc_->pid()) + ") because instance '" + instance +
                "' had to be stopped; every instance it served restarts");
    proc_->Kill();
  }

  // "(in the process ... ) was killed by signal 9 (SIGKILL): ..."
  std::string Describe() {
    bool ended = proc_->WaitExit(std::chrono::milliseconds(1000));
    std::string text = "(in the process pid " + std::to_string(proc_->pid()) + " that model '" +
                       opts_.model_name +
                       "' shares among its instances, PYBACKEND_INSTANCE_PROCESS=" +
                       InstanceProcessName(opts_.mode) + ") " + proc_->ExitDescription();
    if (!ended) {
      // Only the instance's thread ended (it closed its channels): say so, not just that the
      // process runs.
      text +=
          ", and this instance's thread in it has ended (its stderr below says why); the "
          "other instances go on serving";
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (killed_.load()) {
      text += ": the backend ended that process because instance '" + killed_for_ +
              "' had to be stopped, and a thread cannot be stopped alone, so every instance "
              "it served is restarted";
    }
    return text;
  }

  std::string Tail() {
    // Its last words arrive on the pipe a moment after its death shows.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(500), [&] { return pipes_closed_; });
    std::string out;
    for (const auto& l : tail_) out += "  " + l + "\n";
    if (!out.empty()) out.pop_back();
    return out;
  }

 private:
  void ReadPipes() {
    enum { kOut, kErr, kStop, kCount };
    pollfd fds[kCount] = {
        {proc_->stdout_fd(), POLLIN, 0}, {proc_->stderr_fd(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    std::string partial[2];
    while (fds[kOut].fd >= 0 || fds[kErr].fd >= 0) {
      if (poll(fds, kCount, -1) < 0 && errno != EINTR) break;
      if (fds[kStop].revents) break;
      for (int i : {kOut, kErr}) {
        if (fds[i].fd < 0 || fds[i].revents == 0) continue;
        char buf[4096];
        ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n > 0) partial[i].append(buf, static_cast<size_t>(n));
        size_t nl;
        while ((nl = partial[i].find('\n')) != std::string::npos ||
               (n <= 0 && !partial[i].empty())) {
          std::string line = partial[i].substr(0, nl);
          partial[i].erase(0, nl == std::string::npos ? std::string::npos : nl + 1);
          if (!line.empty() && line.back() == '\r') line.pop_back();
          std::string said = LogHostLine(opts_.model_name, line, i == kErr);
          if (i == kErr) {
            std::lock_guard<std::mutex> lock(mu_);
            tail_.push_back(std::move(said));
            while (tail_.size() > kTailLines) tail_.pop_front();
          }
        }
        if (n <= 0) fds[i].fd = -1;  // EOF
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      pipes_closed_ = true;
    }
    cv_.notify_all();
  }

  HostOptions opts_;
  std::unique_ptr<StubProcess> proc_;
  ipc::UniqueFd control_;
  ipc::UniqueFd stop_;
  std::thread pipes_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> killed_{false};
  std::string killed_for_;
  std::deque<std::string> tail_;
  bool pipes_closed_ = false;
};

InstanceHost::InstanceHost(HostOptions opts) : opts_(std::move(opts)) {}

InstanceHost::~InstanceHost() {
  std::lock_guard<std::mutex> lock(mu_);
  current_.reset();  // sessions may still hold it; the last one ends the process
}

pid_t InstanceHost::pid() {
  std::lock_guard<std::mutex> lock(mu_);
  return current_ != nullptr ? current_->proc().pid() : -1;
}

std::shared_ptr<HostGeneration> InstanceHost::StartLocked() {
  SpawnOptions so = opts_.spawn;
  so.args = {"-m",     "pybackend.stub.host",          "--model", opts_.model_name,
             "--mode", InstanceProcessName(opts_.mode)};
  so.env.emplace_back("PYTHONUNBUFFERED", "1");
  so.env.emplace_back("PYTHONDONTWRITEBYTECODE", "1");
  ipc::UniqueFd control, unused;
  std::unique_ptr<StubProcess> proc = StubProcess::Spawn(so, &control, &unused);
  PB_LOG_VERBOSE("model '" + opts_.model_name + "': started the process its instances share (" +
                 InstanceProcessName(opts_.mode) + "), pid " + std::to_string(proc->pid()));
  return std::make_shared<HostGeneration>(opts_, std::move(proc), std::move(control));
}

std::unique_ptr<StubProcess> InstanceHost::Connect(const std::string& instance,
                                                   const json::Value& init_args,
                                                   ipc::UniqueFd* sync, ipc::UniqueFd* async) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string mode = InstanceProcessName(opts_.mode);
  const std::string what = "model '" + opts_.model_name + "', instance '" + instance +
                           "' (PYBACKEND_INSTANCE_PROCESS=" + mode + ")";
  if (current_ == nullptr || !current_->Usable()) {
    current_.reset();  // a dead or ended one: sessions that knew it still describe it
    current_ = StartLocked();
  }
  std::shared_ptr<HostGeneration> gen = current_;
  auto fail = [&](const std::string& why) -> void {
    std::string text = "cannot start " + what + " in the process the instances share: " + why;
    if (!gen->Usable()) {
      text += ". That process " + gen->Describe();
      std::string tail = gen->Tail();
      if (!tail.empty()) text += ". Last lines of its stderr:\n" + tail;
    }
    Throw(TRITONSERVER_ERROR_INTERNAL, text);
  };

  int sp_sync[2], sp_async[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp_sync) != 0) {
    fail(std::string("socketpair: ") + std::strerror(errno));
  }
  ipc::UniqueFd ours_sync(sp_sync[0]), theirs_sync(sp_sync[1]);
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp_async) != 0) {
    fail(std::string("socketpair: ") + std::strerror(errno));
  }
  ipc::UniqueFd ours_async(sp_async[0]), theirs_async(sp_async[1]);

  json::Value req = json::Value::Object();
  req.Set("instance", instance);
  req.Set("init", init_args);
  // This is the instance's own thread (or its restarter, which inherited from it): its
  // host_policy placement, which the instance's thread or child takes on (placement.h).
  req.Set("placement", CurrentThreadPlacement().ToJson());
  std::string body = req.Dump();
  iovec iov{body.data(), body.size()};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof(cbuf);
  cmsghdr* c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  int pass[2] = {theirs_sync.get(), theirs_async.get()};
  std::memcpy(CMSG_DATA(c), pass, sizeof(pass));
  if (sendmsg(gen->control(), &mh, MSG_NOSIGNAL) < 0) {
    fail(std::string("sending the channels: ") + std::strerror(errno));
  }
  theirs_sync.Reset();  // the host's now: EOF on ours means it is gone
  theirs_async.Reset();

  // The reply: {"pid": N} (the host itself, or the fork child) or {"error": "..."}. Under
  // fork it comes after the host imported model.py: a load's wait, bounded only by
  // initialize-timeout-seconds (none by default, as a load on the original).
  const bool bounded = opts_.init_timeout.count() >= 0;
  auto deadline = Clock::now() + (bounded ? opts_.init_timeout : std::chrono::milliseconds(0));
  std::string reply;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (bounded && left.count() <= 0) {
      gen->Kill(instance);
      fail("no answer within initialize-timeout-seconds=" +
           std::to_string(opts_.init_timeout.count() / 1000) +
           " s (importing model.py takes longer? raise initialize-timeout-seconds)");
    }
    int slice = bounded ? static_cast<int>(std::min<int64_t>(left.count(), 1000)) : 1000;
    pollfd fds[2] = {{gen->control(), POLLIN, 0}, {gen->proc().pidfd(), POLLIN, 0}};
    int n = poll(fds, 2, slice);
    if (n < 0 && errno != EINTR) fail(std::string("poll: ") + std::strerror(errno));
    if (fds[0].revents & POLLIN) {
      std::string buf(kMaxReply, '\0');
      ssize_t got = recv(gen->control(), buf.data(), buf.size(), 0);
      if (got > 0) {
        reply.assign(buf.data(), static_cast<size_t>(got));
        break;
      }
      fail("the process closed its control socket");
    }
    if (fds[0].revents != 0 || fds[1].revents != 0 || (fds[1].fd < 0 && !gen->Usable())) {
      fail("the process ended");
    }
  }
  json::Value v;
  try {
    v = json::Value::Parse(reply);
  } catch (const std::exception& e) {
    fail(std::string("malformed answer: ") + e.what());
  }
  std::string error = v.GetString("error");
  if (!error.empty()) Throw(TRITONSERVER_ERROR_INTERNAL, what + ": " + error);
  const json::Value* pid_v = v.Find("pid");
  if (pid_v == nullptr || !pid_v->is_number()) fail("answer without a pid: " + reply);
  pid_t pid = static_cast<pid_t>(pid_v->AsInt());

  StubProcess::HostedHooks hooks;
  hooks.tail = [gen] { return gen->Tail(); };
  if (opts_.mode == InstanceProcess::kFork) {
    // A child of the host: ends alone (SIGKILL through its pidfd, never a reused pid).
    auto child = std::make_shared<ipc::UniqueFd>(PidfdOpen(pid));
    hooks.kill = [child] {
      if (*child) syscall(SYS_pidfd_send_signal, child->get(), SIGKILL, nullptr, 0);
    };
    std::string model = opts_.model_name;
    hooks.describe = [gen, model, pid] {
      return "(pid " + std::to_string(pid) + ", forked for this instance by the process pid " +
             std::to_string(gen->proc().pid()) + " that imported model '" + model +
             "' once, PYBACKEND_INSTANCE_PROCESS=fork) has ended (its exit status is in the "
             "lines below)";
    };
  } else {
    hooks.kill = [gen, instance] { gen->Kill(instance); };
    hooks.describe = [gen] { return gen->Describe(); };
  }
  *sync = std::move(ours_sync);
  *async = std::move(ours_async);
  return StubProcess::Hosted(pid, std::move(hooks));
}

// StubSession::Spawn for an instance of a shared process (the session's part of the above).
void StubSession::ConnectHost(const json::Value& init_args) {
  if (opts_.lane && ipc::Lane::Supported()) {
    try {
      lane_ = std::make_unique<ipc::Lane>("pybackend-lane-" + opts_.instance_name);
    } catch (const std::exception& e) {
      PB_LOG_WARN(log_prefix_ + "no sync lane (" + e.what() + "); using the socket only");
    }
  }
  ipc::UniqueFd sync_fd, async_fd;
  process_ = opts_.host->Connect(opts_.instance_name, init_args, &sync_fd, &async_fd);
  sync_ = MakeChannel(sync_fd.Release(), "sync");
  async_ = MakeChannel(async_fd.Release(), "async");
  monitor_ = std::make_unique<Monitor>(this);
  monitor_->Start();
  SetStderrClosed();  // no pipes of its own: the host's output is logged by its generation
  PB_LOG_VERBOSE(log_prefix_ + "served by pid " + std::to_string(process_->pid()) + " (" +
                 "PYBACKEND_INSTANCE_PROCESS)");
}

}  // namespace pybackend
