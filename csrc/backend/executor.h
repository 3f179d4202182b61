// TRITONBACKEND_ModelInstanceExecute: one EXECUTE/RESULT round trip per batch (spec 4.1).
// Takes ownership of every request: each gets its response (or is left to its response
// sender), statistics are reported and every request is released exactly once.
#pragma once

#include <cstdint>

#include "backend/instance_state.h"
#include "triton/tritonbackend.h"

namespace pybackend {

void ExecuteBatch(InstanceState& inst, TRITONBACKEND_Request** requests, uint32_t count);

}  // namespace pybackend
