// Model control from model code (pb_utils.load_model / unload_model / is_model_ready, spec
// 3.2): MODEL_LOAD, MODEL_UNLOAD and MODEL_READY RPCs answered with REPLY. Loading and
// unloading can take seconds, so they run on their own thread and never hold up the monitor
// thread that reads the stub's async channel.
#pragma once

#include <chrono>

#include "backend/stub_session.h"
#include "ipc/channel.h"
#include "triton/tritonserver_infer.h"

namespace pybackend {

// True when `msg` is a model-control RPC (it is answered, now or later, with a REPLY).
bool HandleModelControl(StubSession& session, TRITONSERVER_Server* server, const ipc::Message& msg);

// Waits (bounded) until no load/unload thread is running: the library must not be unloaded
// under one. False on timeout.
bool WaitModelControlIdle(std::chrono::milliseconds timeout);

}  // namespace pybackend
