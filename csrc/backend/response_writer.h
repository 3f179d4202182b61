// Turns a ResponseBody from the stub into a Triton response: outputs (filtered by the
// request's requested outputs, bytes copied from the message, the stub's arena or ours, every
// reference checked against its mapping), parameters, or the error the model gave.
#pragma once

#include <cstdint>
#include <string>

#include "backend/request_registry.h"
#include "backend/stub_session.h"
#include "ipc/codec.h"
#include "triton/tritonbackend.h"

namespace pybackend {

// Fills `response` from `body` and sends it with `send_flags` (ownership of `response`
// passes to Triton). Returns false when the request failed: what went out was an error of
// ours (the stub's, `body.fails_request`, or an output that could not be added) or sending
// failed. An error response the model made is its answer (true), as the original counts
// it. Never throws.
// Outputs go to Triton with the data type and shape the model gave them, as the original
// backend passes them (PYBACKEND_STRICT_OUTPUTS checks them in the stub: stub/returns.py).
bool SendResponse(TRITONBACKEND_Response* response, const ipc::ResponseBody& body,
                  const RequestState& st, StubSession& session, uint32_t send_flags);

// Sends `response` as an error response; false when Triton refused it. Never throws.
bool SendErrorResponse(TRITONBACKEND_Response* response, TRITONSERVER_Error_Code code,
                       const std::string& message, uint32_t send_flags);

}  // namespace pybackend
