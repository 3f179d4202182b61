#include "backend/executor.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "backend/cpu_hop.h"
#include "backend/dropped_sender.h"
#include "backend/error.h"
#include "backend/logging.h"
#include "backend/request_encoder.h"
#include "backend/response_writer.h"
#include "cuda/trace.h"
#include "ipc/codec.h"
#include "ipc/messages/execute.h"

namespace pybackend {
namespace {

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

struct Item {
  std::shared_ptr<RequestState> st;
  ipc::ResultKind kind = ipc::ResultKind::NONE;
  uint32_t release_flags = TRITONSERVER_REQUEST_RELEASE_ALL;
  std::optional<ipc::ResponseBody> body;
};

class Batch {
 public:
  Batch(InstanceState& inst, std::shared_ptr<StubSession> session, TRITONBACKEND_Request** requests,
        uint32_t count)
      : inst_(inst), hold_(std::move(session)), s_(*hold_), exec_start_(NowNs()) {
    items_.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
      Item it;
      it.st = inst.registry().Create(requests[i], hold_.get());
      it.st->request_final = inst.model->rescheduled.Take(requests[i]);
      items_.push_back(std::move(it));
    }
  }

  void Run();
  // Every request of the batch was answered with an error (ours or the model's).
  bool EveryRequestFailed() const { return errors_ == items_.size(); }

 private:
  uint64_t TotalBatchSize();
  void Encode(ipc::ExecuteEncoder& enc);
  // Reads RESULT; throws BackendError for a failed batch (the stub's message).
  void Decode(const ipc::Message& result);
  void Respond();
  void RespondOne(RequestState& st, const ipc::ResponseBody& body);
  void ReleaseStubKeepalive();
  // True when `t` lies inside one of this batch's input blocks: those stay pinned (ours)
  // until the batch ends, so the stub needs to keep nothing alive for them.
  bool InInputBlock(const ipc::TensorDesc& t) const;
  void UnpinInputs();
  // `code`: the client's mistake (INVALID_ARG: a malformed input) or ours (INTERNAL, ...).
  void FailAll(const std::string& message, TRITONSERVER_Error_Code code);
  void Finish();

  InstanceState& inst_;
  std::shared_ptr<StubSession> hold_;  // a restart may replace the instance's session meanwhile
  StubSession& s_;
  std::vector<Item> items_;
  EncodeContext ctx_;
  uint64_t exec_start_;
  uint64_t compute_start_ = 0;
  uint64_t compute_end_ = 0;
  uint64_t total_batch_size_ = 0;
  size_t errors_ = 0;                   // requests answered with an error
  std::optional<ipc::Message> result_;  // owns the bytes inline outputs point into
};

uint64_t Batch::TotalBatchSize() {
  if (inst_.model->max_batch_size <= 0) return items_.size();
  uint64_t total = 0;
  for (auto& it : items_) {
    uint32_t n_in = 0;
    Check(TRITONBACKEND_RequestInputCount(it.st->request, &n_in),
          "TRITONBACKEND_RequestInputCount");
    if (n_in == 0) continue;
    TRITONBACKEND_Input* input = nullptr;
    Check(TRITONBACKEND_RequestInputByIndex(it.st->request, 0, &input),
          "TRITONBACKEND_RequestInputByIndex");
    const int64_t* shape = nullptr;
    uint32_t ndim = 0;
    Check(TRITONBACKEND_InputProperties(input, nullptr, nullptr, &shape, &ndim, nullptr, nullptr),
          "TRITONBACKEND_InputProperties");
    if (ndim > 0 && shape[0] > 0) total += static_cast<uint64_t>(shape[0]);
  }
  return total;
}

void Batch::Encode(ipc::ExecuteEncoder& enc) {
  ctx_.ledger = &s_.ledger();
  ctx_.inline_threshold = inst_.model->backend->config.inline_threshold;
  ctx_.instance_name = inst_.name;
  ctx_.session = &s_;
  ctx_.force_cpu_inputs = inst_.model->force_cpu_only_inputs;
  enc.Begin(static_cast<uint32_t>(items_.size()));
  for (auto& it : items_) {
    if (inst_.model->decoupled) {
      // Decoupled senders outlive execute: they need a factory made while the request lives.
      Check(TRITONBACKEND_ResponseFactoryNew(&it.st->factory, it.st->request),
            "TRITONBACKEND_ResponseFactoryNew");
    }
    EncodeRequest(enc, *it.st, ctx_);
  }
}

void Batch::Decode(const ipc::Message& result) {
  ipc::ResultDecoder dec(result.body);
  if (dec.batch_error()) {
    // The code is not used: a failed execute is always INTERNAL, as in the original.
    Throw(TRITONSERVER_ERROR_INTERNAL, dec.error_message());
  }
  uint32_t async_seq = dec.async_seq();
  uint32_t n = dec.size();
  if (n != items_.size()) {
    throw ipc::DecodeError("RESULT has " + std::to_string(n) + " entries for " +
                           std::to_string(items_.size()) + " requests");
  }
  for (auto& it : items_) {
    ipc::ResultDecoder::Item item = dec.NextItem();
    it.kind = item.kind;
    it.release_flags = item.release_flags;
    if (it.kind == ipc::ResultKind::RESPONSE) it.body = dec.Response();
  }
  // The optional trailer: our blocks whose last view died with the batch (the batch's
  // inputs, mostly). They stay pinned until the outputs are copied, as after a FREE.
  ipc::BlockRefs freed = dec.Freed();
  if (!freed.empty()) s_.ledger().OnStubFree(freed);
  // Sends made during execute travel on async: handle them before touching any request.
  if (!s_.WaitAsyncProcessed(async_seq, s_.options().timeout)) {
    PB_LOG_WARN(s_.log_prefix() + "async messages sent before RESULT did not arrive in time");
  }
}

void Batch::Respond() {
  for (auto& it : items_) {
    RequestState& st = *it.st;
    std::lock_guard<std::mutex> lock(st.mu);
    st.release_flags = it.release_flags;
    if (it.kind != ipc::ResultKind::RESPONSE) continue;  // NONE: a sender answers, or nobody
    RespondOne(st, *it.body);
    // Only after the copies: a return queued now may go out at once (the monitor's FREE).
    s_.ledger().DoneWith(*it.body);
  }
}

void Batch::RespondOne(RequestState& st, const ipc::ResponseBody& body) {
  if (st.Done()) {
    PB_LOG_ERROR(s_.log_prefix() +
                 "a response was returned for a request whose response "
                 "sender already sent the final response; dropped");
    return;
  }
  TRITONBACKEND_Response* resp = nullptr;
  std::string err = st.NewResponse(&resp);
  if (!err.empty()) {
    PB_LOG_ERROR(s_.log_prefix() + "cannot create a response: " + err);
    st.failed = true;
    return;
  }
  if (!SendResponse(resp, body, st, s_, TRITONSERVER_RESPONSE_COMPLETE_FINAL)) st.failed = true;
  if (st.failed || body.has_error) ++errors_;
  st.sent_response = true;
  st.MarkFinal();
  st.DeleteFactory();
}

void Batch::ReleaseStubKeepalive() {
  // The stub keeps what a RESULT references alive until its next sync message. When that is
  // much shared memory (large tensors), the ledger has us tell it now that we are done,
  // instead of pinning the memory until the next batch: our pending FREEs, or an empty FREE.
  uint64_t referenced = 0;
  for (const auto& it : items_) {
    if (!it.body) continue;
    for (const auto& t : it.body->outputs) {
      if (t.location != ipc::Location::INLINE && !InInputBlock(t)) referenced += t.byte_size;
    }
  }
  if (!s_.alive() || !s_.ledger().ReturnAfterBatch(referenced)) return;
  std::string error;
  if (!s_.ledger().SendReturns(s_.sync(), static_cast<int>(s_.options().timeout.count()), &error,
                               true)) {
    PB_LOG_WARN(s_.log_prefix() + error);
  }
}

bool Batch::InInputBlock(const ipc::TensorDesc& t) const {
  if (t.location != ipc::Location::BACKEND_ARENA) return false;
  for (const auto& b : ctx_.loan.blocks) {
    if (t.seg == b.seg && t.offset >= b.offset && t.byte_size <= b.size &&
        t.offset - b.offset <= b.size - t.byte_size) {
      return true;
    }
  }
  return false;
}

void Batch::UnpinInputs() { s_.ledger().Unpin(ctx_.loan); }

void Batch::FailAll(const std::string& message, TRITONSERVER_Error_Code code) {
  errors_ = items_.size();
  for (auto& it : items_) {
    RequestState& st = *it.st;
    std::lock_guard<std::mutex> lock(st.mu);
    st.release_flags = TRITONSERVER_REQUEST_RELEASE_ALL;
    st.failed = true;
    if (st.Done()) continue;
    TRITONBACKEND_Response* resp = nullptr;
    std::string err = st.NewResponse(&resp);
    if (err.empty()) {
      SendErrorResponse(resp, code, message, TRITONSERVER_RESPONSE_COMPLETE_FINAL);
    } else {
      PB_LOG_ERROR(s_.log_prefix() + "cannot create an error response: " + err);
    }
    st.MarkFinal();
    st.DeleteFactory();
  }
}

void Batch::Finish() {
  uint64_t exec_end = NowNs();
  if (compute_start_ == 0) compute_start_ = compute_end_ = exec_end;
  for (auto& it : items_) {
    std::string err = TakeMessage(TRITONBACKEND_ModelInstanceReportStatistics(
        inst_.instance, it.st->request, !it.st->failed, exec_start_, compute_start_, compute_end_,
        exec_end));
    if (!err.empty()) PB_LOG_ERROR(s_.log_prefix() + "failed to report statistics: " + err);
  }
  std::string err = TakeMessage(TRITONBACKEND_ModelInstanceReportBatchStatistics(
      inst_.instance, total_batch_size_, exec_start_, compute_start_, compute_end_, exec_end));
  if (!err.empty()) PB_LOG_ERROR(s_.log_prefix() + "failed to report batch statistics: " + err);
  inst_.metrics->Batch(compute_start_ - exec_start_, compute_end_ - compute_start_,
                       exec_end - compute_end_, items_.size());

  for (auto& it : items_) {
    RequestState& st = *it.st;
    std::lock_guard<std::mutex> lock(st.mu);
    // Exactly RELEASE_RESCHEDULE, as the stub reads it: any other flags a model set (the
    // original takes any uint32) release the request.
    bool reschedule = st.release_flags == TRITONSERVER_REQUEST_RELEASE_RESCHEDULE && !st.failed;
    if (st.dropped && !reschedule) {
      EndDroppedRequest(st, inst_.model->decoupled, inst_.model->name, inst_.name);
    }
    if (reschedule) {
      inst_.model->rescheduled.Put(st);
      // It comes back in a later batch with a new factory. A decoupled sender kept from this
      // execution (a thread's) may answer meanwhile: it keeps this one until FINAL or until
      // the stub reports the objects gone (they are watched).
      st.rescheduled = inst_.model->decoupled && !st.dropped && !st.Done() && s_.alive();
      if (!st.rescheduled) st.DeleteFactory();
    } else if (!st.Done() && !st.dropped && st.factory == nullptr) {
      // A response sender may still answer after execute returned: it needs a factory,
      // and a factory can only be made while the request is alive.
      std::string ferr = TakeMessage(TRITONBACKEND_ResponseFactoryNew(&st.factory, st.request));
      if (!ferr.empty()) PB_LOG_ERROR(s_.log_prefix() + "cannot keep a response sender: " + ferr);
    }
    uint32_t flags =
        reschedule ? TRITONSERVER_REQUEST_RELEASE_RESCHEDULE : TRITONSERVER_REQUEST_RELEASE_ALL;
    st.released = true;
    std::string rerr = TakeMessage(TRITONBACKEND_RequestRelease(st.request, flags));
    if (!rerr.empty() && reschedule) {
      PB_LOG_ERROR(s_.log_prefix() + "rescheduling a request failed (" + rerr +
                   "); releasing it instead");
      rerr =
          TakeMessage(TRITONBACKEND_RequestRelease(st.request, TRITONSERVER_REQUEST_RELEASE_ALL));
    }
    if (!rerr.empty()) PB_LOG_ERROR(s_.log_prefix() + "failed to release a request: " + rerr);
    st.request = nullptr;
    if (st.Done() || st.dropped || st.factory == nullptr || !s_.alive()) {
      if (!st.Done() && st.factory != nullptr) {
        // The stub is gone: nobody will ever send FINAL for this one.
        TRITONBACKEND_Response* resp = nullptr;
        if (TakeMessage(TRITONBACKEND_ResponseNewFromFactory(&resp, st.factory)).empty()) {
          SendErrorResponse(resp, TRITONSERVER_ERROR_INTERNAL, inst_.UnhealthyMessage(s_),
                            TRITONSERVER_RESPONSE_COMPLETE_FINAL);
        }
        st.MarkFinal();
      }
      st.DeleteFactory();
      inst_.registry().Remove(st.token);
    }
  }
}

void Batch::Run() {
  // No FREE of the monitor's may come between our EXECUTE and RESULT (see batch_mutex).
  std::lock_guard<std::mutex> batch_lock(s_.batch_mutex());
  std::string failure;
  TRITONSERVER_Error_Code failure_code = TRITONSERVER_ERROR_INTERNAL;
  try {
    total_batch_size_ = TotalBatchSize();
    int64_t max_bs = inst_.model->max_batch_size;
    if (max_bs > 0 && total_batch_size_ != 1 && total_batch_size_ > static_cast<uint64_t>(max_bs)) {
      Throw(TRITONSERVER_ERROR_INVALID_ARG, "batch size " + std::to_string(total_batch_size_) +
                                                " for '" + inst_.name + "', max allowed is " +
                                                std::to_string(max_bs));
    }
    if (!s_.alive()) Throw(TRITONSERVER_ERROR_INTERNAL, inst_.UnhealthyMessage(s_));

    ipc::ExecuteEncoder enc;
    cuda::trace::Stage encode("exec.encode");
    try {
      Encode(enc);
    } catch (...) {
      s_.ledger().Reclaim(ctx_.loan);
      throw;
    }
    // The stub returns input blocks as soon as its arrays die, often before RESULT (an
    // output that is a view of an input then costs no keepalive and no extra FREE round
    // trip); the pins keep them ours until the outputs have been copied.
    encode.End();
    s_.ledger().Pin(ctx_.loan);
    uint64_t batch_id = inst_.next_batch_id++;
    std::string error;
    compute_start_ = NowNs();
    cuda::trace::Stage round_trip("exec.round_trip");  // EXECUTE sent .. RESULT read
    // The stub blocks we have finished with ride in EXECUTE's freed trailer: a FREE message
    // before it cost a sendmsg here and a socket read in the stub for every batch that
    // followed one with a new output above the inline threshold.
    enc.Freed(s_.ledger().TakeReturns());
    if (!s_.SendSync(ipc::MessageKind::EXECUTE, batch_id, enc.data(), enc.size(), &error)) {
      s_.MarkDead(error);
      Throw(TRITONSERVER_ERROR_INTERNAL, inst_.UnhealthyMessage(s_));
    }
    int64_t limit_s = inst_.model->backend->config.execute_timeout_seconds;
    if (!inst_.model->debug.empty()) limit_s = 0;  // debug mode: breakpoints take their time
    auto limit = std::chrono::milliseconds(limit_s > 0 ? limit_s * 1000 : -1);
    ipc::Message msg;
    StubSession::Wait wr = s_.WaitSync(ipc::MessageKind::RESULT, limit, &msg, &error, true);
    compute_end_ = NowNs();
    round_trip.End();
    if (wr == StubSession::Wait::kTimeout) {
      s_.MarkDead("execute took longer than execute-timeout-seconds=" + std::to_string(limit_s));
      Throw(TRITONSERVER_ERROR_INTERNAL, inst_.UnhealthyMessage(s_));
    }
    if (wr != StubSession::Wait::kOk)
      Throw(TRITONSERVER_ERROR_INTERNAL, inst_.UnhealthyMessage(s_));
    if (msg.id != batch_id) {
      s_.MarkDead("RESULT for batch " + std::to_string(msg.id) + " while waiting for batch " +
                  std::to_string(batch_id));
      Throw(TRITONSERVER_ERROR_INTERNAL, inst_.UnhealthyMessage(s_));
    }
    result_.emplace(std::move(msg));
    try {
      Decode(*result_);
    } catch (const ipc::DecodeError& e) {
      s_.MarkDead(std::string("malformed RESULT: ") + e.what());
      Throw(TRITONSERVER_ERROR_INTERNAL, inst_.UnhealthyMessage(s_));
    }
    cuda::trace::Stage respond("exec.respond");
    Respond();
    respond.End();
    ReleaseStubKeepalive();
  } catch (const BackendError& e) {
    failure = e.message();
    failure_code = e.code();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty()) FailAll(failure, failure_code);
  UnpinInputs();
  Finish();
}

}  // namespace

void ExecuteBatch(InstanceState& inst, TRITONBACKEND_Request** requests, uint32_t count) {
  // Where Triton's thread woke us (cpu_hop.h: left after a batch that failed every request).
  const int entry_cpu = CurrentCpu();
  std::vector<TRITONBACKEND_Request*> valid;
  valid.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (requests[i] != nullptr) {
      valid.push_back(requests[i]);
    } else {
      PB_LOG_ERROR("null request given to Python backend for '" + inst.name + "'");
    }
  }
  if (valid.empty()) return;
  std::string report;
  std::shared_ptr<StubSession> session = inst.SessionForBatch(&report);
  if (session == nullptr) {  // an idle stub's death to report, or finalized (not executed then)
    bool unloading = report.empty();
    uint64_t now = NowNs();
    for (TRITONBACKEND_Request* r : valid) {
      TRITONBACKEND_Response* resp = nullptr;
      if (TakeMessage(TRITONBACKEND_ResponseNew(&resp, r)).empty()) {
        SendErrorResponse(resp,
                          unloading ? TRITONSERVER_ERROR_UNAVAILABLE : TRITONSERVER_ERROR_INTERNAL,
                          unloading ? "model instance '" + inst.name + "' is unloading" : report,
                          TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      }
      // Counted as failed, as every failed batch is (and the original counts them): else the
      // statistics and nv_inference_request_failure miss the requests a dead stub failed.
      std::string err = TakeMessage(
          TRITONBACKEND_ModelInstanceReportStatistics(inst.instance, r, false, now, now, now, now));
      if (!err.empty()) PB_LOG_ERROR("'" + inst.name + "': failed to report statistics: " + err);
      TakeMessage(TRITONBACKEND_RequestRelease(r, TRITONSERVER_REQUEST_RELEASE_ALL));
    }
    LeaveCpu(entry_cpu);
    return;
  }
  // A stub that dies while this counts has a batch to tell (SessionForBatch).
  struct Running {
    std::atomic<int>& n;
    explicit Running(std::atomic<int>& c) : n(c) { ++n; }
    ~Running() { --n; }
  } running(inst.running_batches);
  const StubSession* ran_on = session.get();
  bool died = false;
  bool failed = false;
  {
    Batch batch(inst, session, valid.data(), static_cast<uint32_t>(valid.size()));
    batch.Run();
    died = !session->alive();
    failed = batch.EveryRequestFailed();
  }
  session.reset();
  if (died) inst.death_told_by_batch.store(ran_on);  // before `running` ends
  if (failed) LeaveCpu(entry_cpu);
}

}  // namespace pybackend
