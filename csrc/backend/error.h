// Errors inside the backend are C++ exceptions carrying a Triton error code; they become a
// TRITONSERVER_Error only at the C boundary (entry points, responses). Messages are built to
// name the model, instance, phase and the fix, as the spec's error texts do.
#pragma once

#include <exception>
#include <string>

#include "triton/tritonserver.h"

namespace pybackend {

class BackendError : public std::exception {
 public:
  BackendError(TRITONSERVER_Error_Code code, std::string message)
      : code_(code), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  TRITONSERVER_Error_Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  TRITONSERVER_Error_Code code_;
  std::string message_;
};

[[noreturn]] void Throw(TRITONSERVER_Error_Code code, const std::string& message);

// Throws BackendError(code of err, "<context>: <message>") when err is non-null, deleting err.
// `context` may be null for no prefix.
void Check(TRITONSERVER_Error* err, const char* context);

// Returns the message of err and deletes it ("" for null).
std::string TakeMessage(TRITONSERVER_Error* err);

TRITONSERVER_Error* NewError(TRITONSERVER_Error_Code code, const std::string& message);
TRITONSERVER_Error* ToTritonError(const BackendError& e);
// For any exception escaping into an entry point.
TRITONSERVER_Error* CurrentExceptionToTritonError();

}  // namespace pybackend
