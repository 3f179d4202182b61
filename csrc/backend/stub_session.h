// One live stub and everything tied to its lifetime: the process, both channels, the memory
// shared with it (its MemoryLedger: our arena, the stub's segments, the blocks to return,
// device memory) and the monitor thread.
// Used for instance stubs and for the short-lived auto-complete stub alike.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/custom_metrics.h"
#include "backend/instance_metrics.h"
#include "backend/json.h"
#include "backend/memory_ledger.h"
#include "backend/stub_process.h"
#include "cuda/driver.h"
#include "ipc/channel.h"
#include "ipc/lane.h"

namespace pybackend {

class InstanceHost;
class Monitor;
class StubSession;

// What the monitor hands to the owner of the session (the instance).
class AsyncHandler {
 public:
  virtual ~AsyncHandler() = default;
  // `session` is the one whose stub sent the message (an instance may have restarted since).
  virtual void OnSend(StubSession& session, const ipc::Message& msg) = 0;
  virtual void OnIsCancelled(StubSession& session, const ipc::Message& msg) = 0;
  // Any other async message kind (BLS, model control, ...): true when it was handled.
  virtual bool OnOther(StubSession& session, const ipc::Message& msg) {
    (void)session;
    (void)msg;
    return false;
  }
  // A request the stub's execute thread made on sync while the backend waits for RESULT
  // (BLS_EXEC): called on the instance thread, answered on sync. True when handled.
  virtual bool OnSyncCall(StubSession& session, const ipc::Message& msg) {
    (void)session;
    (void)msg;
    return false;
  }
  // The stub garbage-collected an open request's sender (and request) without FINAL.
  virtual void OnSenderDropped(StubSession& session, const ipc::Message& msg) = 0;
  // Called once from the monitor thread after the stub is gone and the async channel has
  // been drained: fail whatever still waits on it.
  virtual void OnStubGone(StubSession& session) = 0;
};

struct SessionOptions {
  std::string model_name;
  uint64_t model_version = 0;
  std::string instance_name;  // also the stub's name ("<model>" for auto-complete)
  std::string python;
  std::string package_parent;   // prepended to the stub's PYTHONPATH ("" = none)
  std::string backend_library;  // our .so, for error messages
  std::string shm_prefix;
  uint64_t shm_default_byte_size = 1 << 20;
  uint64_t shm_growth_byte_size = 1 << 20;
  uint64_t shm_max_byte_size = 0;
  std::chrono::milliseconds timeout{30000};  // stub-timeout-seconds
  // initialize-timeout-seconds: how long the stub's load (INIT to INIT_REPLY: model.py's
  // import, auto_complete_config or initialize) may take; < 0: no bound, as the original's
  // (the stub's death or a stop past stub-timeout-seconds still ends the wait).
  std::chrono::milliseconds init_timeout{-1};
  // finalize-timeout-seconds: how long FINALIZE may wait for FINALIZE_REPLY (the model's
  // finalize); < 0: no bound, as the original's (the stub's death or a stop past
  // stub-timeout-seconds still ends the wait).
  std::chrono::milliseconds finalize_timeout{-1};
  int spin_us = 0;   // busy-poll before blocking on a reply
  bool lane = true;  // EXECUTE/RESULT through the shared-memory lane (where Lane::Supported)
  // Added to the stub's environment (the thread budget, an execution env's variables).
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> env_unset;  // removed from it (PYTHONHOME in an execution env)
  // Attach mode (model parameter PYBACKEND_ATTACH_SOCKET): connect to the process listening
  // here instead of spawning a stub ("" = spawn).
  std::string attach_socket;
  // PYBACKEND_INSTANCE_PROCESS shared/fork (instance_host.h): the instance is served by the
  // process its model's instances share (null: a stub of its own).
  std::shared_ptr<InstanceHost> host;
};

// Shared ownership: BLS calls keep the session of the stub that made them alive until Triton
// has finished with them (shared_from_this needs a session made with make_shared).
class StubSession : public std::enable_shared_from_this<StubSession> {
 public:
  enum class Wait { kOk, kTimeout, kDead, kError };

  StubSession(SessionOptions opts, AsyncHandler* handler);
  ~StubSession();  // stops the monitor, kills and reaps the stub if needed, unmaps all
  StubSession(const StubSession&) = delete;
  StubSession& operator=(const StubSession&) = delete;

  // Starts the stub process and its monitor without initializing it, so the interpreter
  // and its imports run while the backend does something else (a model starts its first
  // instance's stub before auto-complete). Start() calls it when nobody did. Throws
  // BackendError when the process cannot be started.
  void Spawn();
  bool spawned() const { return process_ != nullptr; }
  // Spawns the stub if needed and runs HELLO -> INIT -> INIT_REPLY. Returns the InitReply
  // (ok or not; the caller decides what a failed init means). Throws BackendError when the
  // stub could not be started, died, timed out or broke the protocol.
  json::Value Start(const json::Value& init_args);
  // Ends a stub that was spawned but never initialized, without the logs of a crash.
  void Discard();
  // Who gets the async messages; set before Start() on a session spawned without one.
  void set_handler(AsyncHandler* handler) { handler_.store(handler, std::memory_order_release); }
  // FINALIZE -> FINALIZE_REPLY -> exit, each bounded; kills the stub on any trouble.
  // Returns the stub's finalize error text ("" when none). Never throws.
  std::string Finalize();
  // Joins the monitor thread (idempotent); no AsyncHandler callback runs after it returns.
  void StopMonitor();

  // Sends a message on sync: through the lane's slot when it fits, else on the socket.
  // Thread-safe: the answer to a BLS call made on sync comes from one of Triton's threads.
  bool SendSync(ipc::MessageKind kind, uint64_t id, const uint8_t* body, size_t len,
                std::string* error);
  // Waits for the next sync message of kind `want` (handling segment/free/log messages that
  // arrive on sync meanwhile). timeout < 0: no time bound (the stub's death still ends it).
  // `just_sent`: the caller has just sent the request this answers, so nothing can be queued
  // yet: sleep first instead of trying a read that fails (one syscall less per round trip).
  Wait WaitSync(ipc::MessageKind want, std::chrono::milliseconds timeout, ipc::Message* out,
                std::string* error, bool just_sent = false);
  // The answer of a BLS call made on sync went out (from Triton's thread that ran the
  // callee): where the instance thread polls (spin_us > 0), it is woken to poll afresh for
  // the RESULT, which comes after the stub's rest of execute. Its first poll ran out during
  // the call, so without this the RESULT found it asleep: a wake-up per call on the critical
  // path, where this one overlaps the stub's work. No effect without the spin or the lane.
  void WakeForResult();
  // Waits until the monitor has processed `seq` async messages (wrap-around aware).
  bool WaitAsyncProcessed(uint32_t seq, std::chrono::milliseconds timeout);
  // Waits (bounded) until the async messages an INIT_REPLY or FINALIZE_REPLY counts in its
  // `async_seq` are handled: the stub's log lines come before the load or unload completes.
  void AwaitLogsBefore(const json::Value& reply, const char* step);

  // Handles SEGMENT_ADD / SEGMENT_DROP / FREE / LOG from either channel. False if `msg` is
  // none of them.
  bool HandleCommon(ipc::Message& msg);

  bool alive();
  // Marks the stub dead (EOF seen, protocol broken, timed out); the reason is kept for the
  // error messages.
  // `telling` is false for reasons the exit status already says (EOF, process ended).
  void MarkDead(const std::string& reason, bool telling = true);
  // True when the stub's end of the sync channel is closed (or shut down): it has gone.
  bool PeerClosed();
  // "<how it ended>. Last lines of its stderr: ..." (waits briefly for the exit and the
  // stderr pipe to drain so the text is complete).
  std::string DeathDetail();
  // "Stub process '<instance>' is not healthy." followed by the detail and `next` (what
  // happens now / what to do); the default tells the user to reload the model.
  std::string UnhealthyMessage(const std::string& next = "");

  const SessionOptions& options() const { return opts_; }
  ipc::Channel& sync() { return *sync_; }
  ipc::Channel& async() { return *async_; }
  // Every block, hold and mapping shared with this stub, and when each goes back.
  MemoryLedger& ledger() { return ledger_; }
  StubProcess* process() { return process_.get(); }
  AsyncHandler* handler() { return handler_.load(std::memory_order_acquire); }
  // The families and metrics this stub created (deleted when the session ends).
  CustomMetrics& metrics() { return metrics_; }
  const std::string& log_prefix() const { return log_prefix_; }
  // GPU tensors: the instance's series that count our copies and the ledger's IPC mappings.
  // Set by the instance before Start(); unset (auto-complete) nothing is counted.
  void set_instance_metrics(std::shared_ptr<InstanceMetrics> metrics);
  void CountGpuCopy(cuda::Direction d);

  // Held by the executor for a whole batch (EXECUTE ... RESULT read and answered), so the
  // monitor's idle-time FREE on sync (MemoryLedger::KeepaliveDue) can never land between an
  // EXECUTE and its RESULT.
  std::mutex& batch_mutex() { return batch_mu_; }

  // Called by the monitor.
  void CountAsyncProcessed();
  void SetAsyncClosed();
  void AppendStderrLine(const std::string& line);
  void SetStderrClosed();
  std::string StderrTail();

 private:
  friend class Monitor;
  std::string StubRole() const;
  std::unique_ptr<ipc::Channel> MakeChannel(int fd, const char* name);
  void Attach();  // Spawn() in attach mode: connect to the serving process
  // Spawn() for an instance of a shared process (instance_host.cc): a fork host needs the
  // INIT arguments to import model.py before it forks.
  void ConnectHost(const json::Value& init_args);
  Wait WaitReadable(int fd, std::chrono::steady_clock::time_point deadline, bool bounded);
  // How long the next sleep of a wait may last; nullopt when `deadline` has passed.
  std::optional<std::chrono::milliseconds> NextSlice(std::chrono::steady_clock::time_point deadline,
                                                     bool bounded);
  // After each sleep (`quiet_slice`: it ran its whole slice without news): true, with the
  // stub marked dead, once it has been stopped (SIGSTOP) for stub-timeout-seconds.
  bool StoppedTooLong(bool quiet_slice,
                      std::optional<std::chrono::steady_clock::time_point>* since);
  // kDead or kError for a sync receive that ended in kClosed or kError (marks the stub dead).
  Wait RecvFailed(ipc::Channel::RecvStatus st, const std::string& error);
  // The next sync message with the lane on: a counted socket message first, else the slot,
  // else polling the bell until `spin_until`, else asleep on it. Same results as reading the
  // socket after WaitReadable.
  Wait NextSyncFromLane(ipc::Message* out, std::chrono::steady_clock::time_point deadline,
                        bool bounded, std::chrono::steady_clock::time_point spin_until,
                        std::string* error);

  SessionOptions opts_;
  std::atomic<AsyncHandler*> handler_;  // set later for an early-spawned stub
  std::string log_prefix_;
  CustomMetrics metrics_;
  std::shared_ptr<InstanceMetrics> instance_metrics_;  // before ledger_: it reports there
  MemoryLedger ledger_;  // before the channels: they use its arena, segments and queue
  std::unique_ptr<StubProcess> process_;
  std::unique_ptr<ipc::Lane> lane_;      // before sync_: the channel rings it until destroyed
  bool lane_active_ = false;             // LANE sent: sync traffic is counted and rung from now on
  std::atomic<bool> rearm_spin_{false};  // WakeForResult: the sync wait polls afresh
  std::unique_ptr<ipc::Channel> sync_;
  std::unique_ptr<ipc::Channel> async_;
  std::unique_ptr<Monitor> monitor_;

  std::atomic<bool> dead_{false};
  std::mutex batch_mu_;
  std::mutex sync_send_mu_;  // SendSync: the instance thread and BLS callbacks
  std::mutex state_mu_;
  std::condition_variable state_cv_;
  std::string dead_reason_;  // "" when the exit status says it all
  uint32_t async_processed_ = 0;
  bool async_closed_ = false;
  bool finalizing_ = false;  // the stub is expected to exit: do not kill it
  bool stderr_closed_ = false;
  std::deque<std::string> stderr_tail_;
};

}  // namespace pybackend
