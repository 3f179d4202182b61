// What the backend sends for a request whose Python objects (request and response sender)
// the stub reported garbage-collected before FINAL went out (SENDER_DROPPED,
// docs/protocol.md): the client gets an error instead of waiting forever. The original sends
// nothing; it leaves such a request waiting (docs/compatibility.md).
#pragma once

#include <string>

#include "backend/request_registry.h"

namespace pybackend {

// Ends `st` (caller holds st.mu) unless FINAL went out already. A default-mode request whose
// one response went out gets just the FINAL flag; any other gets an error response with FINAL.
// A request that was rescheduled at some point is left as it is, as the original leaves it:
// a sender kept from an earlier execution (a thread's) may still answer it.
void EndDroppedRequest(RequestState& st, bool decoupled, const std::string& model,
                       const std::string& instance);

}  // namespace pybackend
