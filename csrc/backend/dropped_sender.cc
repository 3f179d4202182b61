#include "backend/dropped_sender.h"

#include "backend/error.h"
#include "backend/logging.h"
#include "backend/response_writer.h"

namespace pybackend {

void EndDroppedRequest(RequestState& st, bool decoupled, const std::string& model,
                       const std::string& instance) {
  if (st.Done()) return;
  const std::string where = "model '" + model + "', instance '" + instance + "': ";
  if (st.request_final != nullptr) {
    PB_LOG_VERBOSE(where +
                   "a response sender of a rescheduled request was dropped without the final "
                   "response; the request is left to the senders of its other executions");
    st.DeleteFactory();
    return;
  }
  std::string err;
  if (!decoupled && st.sent_response) {
    // Its one response went out; only the FINAL flag is missing.
    PB_LOG_WARN(where +
                "a response sender was dropped after its response without "
                "TRITONSERVER_RESPONSE_COMPLETE_FINAL; sending the final flag for it");
    if (st.factory != nullptr) {
      err = TakeMessage(
          TRITONBACKEND_ResponseFactorySendFlags(st.factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL));
    } else if (!st.released) {
      TRITONBACKEND_ResponseFactory* f = nullptr;
      err = TakeMessage(TRITONBACKEND_ResponseFactoryNew(&f, st.request));
      if (err.empty()) {
        err = TakeMessage(
            TRITONBACKEND_ResponseFactorySendFlags(f, TRITONSERVER_RESPONSE_COMPLETE_FINAL));
        TakeMessage(TRITONBACKEND_ResponseFactoryDelete(f));
      }
    }
  } else {
    std::string message =
        "The response sender of a request to model '" + model + "' (instance '" + instance +
        "') was garbage-collected before it sent TRITONSERVER_RESPONSE_COMPLETE_FINAL, so the "
        "request ends here with this error. Keep a reference to the sender (or the request) "
        "until sender.send(..., flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL) was called.";
    PB_LOG_WARN(where + "a response sender was dropped without the final response");
    TRITONBACKEND_Response* resp = nullptr;
    err = st.NewResponse(&resp);
    if (err.empty()) {
      SendErrorResponse(resp, TRITONSERVER_ERROR_INTERNAL, message,
                        TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      st.failed = true;
    }
  }
  if (!err.empty()) PB_LOG_ERROR(where + "cannot end a request whose sender was dropped: " + err);
  st.MarkFinal();
  st.DeleteFactory();
}

}  // namespace pybackend
