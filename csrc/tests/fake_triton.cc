// The few TRITONSERVER_* functions the backend's error and logging helpers call, for native
// unit tests that link those helpers without a Triton server: errors are plain objects, log
// lines go to stderr.
#include <cstdio>
#include <string>

#include "triton/tritonserver.h"

struct TRITONSERVER_Error {
  TRITONSERVER_Error_Code code;
  std::string message;
};

extern "C" {

TRITONSERVER_Error* TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char* msg) {
  return new TRITONSERVER_Error{code, msg != nullptr ? msg : ""};
}
void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error) { delete error; }
TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error* error) { return error->code; }
const char* TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error) { return error->message.c_str(); }
bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel) { return true; }
TRITONSERVER_Error* TRITONSERVER_LogMessage(TRITONSERVER_LogLevel, const char* filename,
                                            const int line, const char* msg) {
  std::fprintf(stderr, "log %s:%d: %s\n", filename, line, msg);
  return nullptr;
}

}  // extern "C"
