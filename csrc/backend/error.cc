#include "backend/error.h"

namespace pybackend {

void Throw(TRITONSERVER_Error_Code code, const std::string& message) {
  throw BackendError(code, message);
}

void Check(TRITONSERVER_Error* err, const char* context) {
  if (err == nullptr) return;
  TRITONSERVER_Error_Code code = TRITONSERVER_ErrorCode(err);
  std::string msg = TRITONSERVER_ErrorMessage(err);
  TRITONSERVER_ErrorDelete(err);
  if (context != nullptr) msg = std::string(context) + ": " + msg;
  throw BackendError(code, msg);
}

std::string TakeMessage(TRITONSERVER_Error* err) {
  if (err == nullptr) return "";
  std::string msg = TRITONSERVER_ErrorMessage(err);
  TRITONSERVER_ErrorDelete(err);
  return msg;
}

TRITONSERVER_Error* NewError(TRITONSERVER_Error_Code code, const std::string& message) {
  return TRITONSERVER_ErrorNew(code, message.c_str());
}

TRITONSERVER_Error* ToTritonError(const BackendError& e) { return NewError(e.code(), e.message()); }

TRITONSERVER_Error* CurrentExceptionToTritonError() {
  try {
    throw;
  } catch (const BackendError& e) {
    return ToTritonError(e);
  } catch (const std::exception& e) {
    return NewError(TRITONSERVER_ERROR_INTERNAL, e.what());
  } catch (...) {
    return NewError(TRITONSERVER_ERROR_INTERNAL, "unknown exception in the Python backend");
  }
}

}  // namespace pybackend
