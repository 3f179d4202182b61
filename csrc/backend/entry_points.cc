// The TRITONBACKEND_* functions tritonserver looks up in this library. Each one converts
// C++ exceptions into a TRITONSERVER_Error at this boundary and nowhere else.
#include <chrono>
#include <memory>

#include "backend/backend_state.h"
#include "backend/bls_cycles.h"
#include "backend/bls_service.h"
#include "backend/error.h"
#include "backend/executor.h"
#include "backend/instance_state.h"
#include "backend/logging.h"
#include "backend/model_control.h"
#include "backend/model_state.h"
#include "backend/response_writer.h"
#include "triton/tritonbackend.h"

using pybackend::BackendState;
using pybackend::Check;
using pybackend::InstanceState;
using pybackend::ModelState;

namespace {

template <typename T, typename Obj, typename Getter>
T* GetState(Obj* obj, Getter getter) {
  void* state = nullptr;
  Check(getter(obj, &state), "reading backend state");
  return static_cast<T*>(state);
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  try {
    uint32_t major = 0, minor = 0;
    Check(TRITONBACKEND_ApiVersion(&major, &minor), "TRITONBACKEND_ApiVersion");
    const char* backend_name = "";
    Check(TRITONBACKEND_BackendName(backend, &backend_name), "TRITONBACKEND_BackendName");
    PB_LOG_VERBOSE("'" + std::string(backend_name) + "' TRITONBACKEND API version: " +
                   std::to_string(major) + "." + std::to_string(minor) + "; pybackend built for " +
                   std::to_string(TRITONBACKEND_API_VERSION_MAJOR) + "." +
                   std::to_string(TRITONBACKEND_API_VERSION_MINOR));
    if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < TRITONBACKEND_API_VERSION_MINOR) {
      return pybackend::NewError(TRITONSERVER_ERROR_UNSUPPORTED,
                                 "Triton backend API version does not support this backend");
    }
    auto state = BackendState::Create(backend);
    PB_LOG_INFO("pybackend: Python backend '" + state->name + "' loaded from " +
                state->library_path + " (stub interpreter: " + state->DefaultPython() + ")");
    Check(TRITONBACKEND_BackendSetState(backend, state.get()), "TRITONBACKEND_BackendSetState");
    state.release();
    return nullptr;
  } catch (...) {
    return pybackend::CurrentExceptionToTritonError();
  }
}

TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  try {
    // BLS callbacks and model-control threads run our code: let them finish first.
    if (!pybackend::WaitBlsIdle(std::chrono::seconds(10)) ||
        !pybackend::WaitModelControlIdle(std::chrono::seconds(10))) {
      PB_LOG_WARN("BLS requests or model-control calls are still running as the backend unloads");
    }
    delete GetState<BackendState>(backend, TRITONBACKEND_BackendState);
    return nullptr;
  } catch (...) {
    return pybackend::CurrentExceptionToTritonError();
  }
}

TRITONSERVER_Error* TRITONBACKEND_GetBackendAttribute(TRITONBACKEND_Backend* /*backend*/,
                                                      TRITONBACKEND_BackendAttribute* attributes) {
  try {
    PB_LOG_VERBOSE("TRITONBACKEND_GetBackendAttribute: setting attributes");
    // CPU only for now: count 0 and no devices lets the core fill in the rest.
    Check(TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(
              attributes, TRITONSERVER_INSTANCEGROUPKIND_CPU, 0, nullptr, 0),
          "TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup");
    Check(TRITONBACKEND_BackendAttributeSetParallelModelInstanceLoading(attributes, true),
          "TRITONBACKEND_BackendAttributeSetParallelModelInstanceLoading");
    return nullptr;
  } catch (...) {
    return pybackend::CurrentExceptionToTritonError();
  }
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  try {
    auto state = ModelState::Create(model);
    Check(TRITONBACKEND_ModelSetState(model, state.get()), "TRITONBACKEND_ModelSetState");
    state.release();
    return nullptr;
  } catch (...) {
    return pybackend::CurrentExceptionToTritonError();
  }
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  try {
    PB_LOG_VERBOSE("TRITONBACKEND_ModelFinalize: delete model state");
    delete GetState<ModelState>(model, TRITONBACKEND_ModelState);
    return nullptr;
  } catch (...) {
    return pybackend::CurrentExceptionToTritonError();
  }
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  try {
    TRITONBACKEND_Model* model = nullptr;
    Check(TRITONBACKEND_ModelInstanceModel(instance, &model), "TRITONBACKEND_ModelInstanceModel");
    auto* model_state = GetState<ModelState>(model, TRITONBACKEND_ModelState);
    auto state = InstanceState::Create(instance, model_state);
    Check(TRITONBACKEND_ModelInstanceSetState(instance, state.get()),
          "TRITONBACKEND_ModelInstanceSetState");
    PB_LOG_VERBOSE("TRITONBACKEND_ModelInstanceInitialize: instance initialization successful " +
                   state->name + " (device " + std::to_string(state->device_id) + ")");
    state->bls_slot = pybackend::bls_cycles::AddInstance(model_state->name, state->name,
                                                         model_state->queue_expires);
    state.release();
    return nullptr;
  } catch (...) {
    return pybackend::CurrentExceptionToTritonError();
  }
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  try {
    PB_LOG_VERBOSE("TRITONBACKEND_ModelInstanceFinalize: delete instance state");
    auto* state = GetState<InstanceState>(instance, TRITONBACKEND_ModelInstanceState);
    if (state != nullptr) {
      pybackend::bls_cycles::RemoveInstance(state->model->name, state->name,
                                            state->model->queue_expires);
    }
    delete state;
    return nullptr;
  } catch (...) {
    return pybackend::CurrentExceptionToTritonError();
  }
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReady(TRITONBACKEND_ModelInstance* instance) {
  try {
    auto* state = GetState<InstanceState>(instance, TRITONBACKEND_ModelInstanceState);
    if (state == nullptr) return nullptr;
    return state->Ready();
  } catch (...) {
    return pybackend::CurrentExceptionToTritonError();
  }
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests,
                                                       const uint32_t request_count) {
  // Requests are ours from here on: failures become error responses, never a return value.
  InstanceState* state = nullptr;
  try {
    state = GetState<InstanceState>(instance, TRITONBACKEND_ModelInstanceState);
  } catch (const std::exception& e) {
    PB_LOG_ERROR(std::string("TRITONBACKEND_ModelInstanceExecute: ") + e.what());
  }
  if (state == nullptr) {
    for (uint32_t i = 0; i < request_count; ++i) {
      if (requests[i] == nullptr) continue;
      TRITONBACKEND_Response* resp = nullptr;
      if (pybackend::TakeMessage(TRITONBACKEND_ResponseNew(&resp, requests[i])).empty()) {
        pybackend::SendErrorResponse(resp, TRITONSERVER_ERROR_INTERNAL,
                                     "model instance has no state",
                                     TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      }
      pybackend::TakeMessage(
          TRITONBACKEND_RequestRelease(requests[i], TRITONSERVER_REQUEST_RELEASE_ALL));
    }
    return nullptr;
  }
  // The original's verbose lines around a batch, which operators grep for.
  PB_LOG_VERBOSE("model " + state->model->name + ", instance " + state->name + ", executing " +
                 std::to_string(request_count) + " requests");
  try {
    pybackend::bls_cycles::Executing executing(*state->bls_slot, requests, request_count);
    pybackend::ExecuteBatch(*state, requests, request_count);
  } catch (const std::exception& e) {
    // ExecuteBatch handles its own errors; this is a last line of defence.
    PB_LOG_ERROR("model instance '" + state->name + "': unexpected error in execute: " + e.what());
  }
  PB_LOG_VERBOSE("TRITONBACKEND_ModelInstanceExecute: model instance name " + state->name +
                 " released " + std::to_string(request_count) + " requests");
  return nullptr;
}

}  // extern "C"
