// Helpers around TRITONSERVER_LogMessage so every log line of the backend goes through the
// server's logger (and its --log-* options).
#pragma once

#include <cstdint>
#include <string>

#include "triton/tritonserver.h"

namespace pybackend {

void Log(TRITONSERVER_LogLevel level, const char* file, int line, const std::string& msg);
bool LogEnabled(TRITONSERVER_LogLevel level);
// A record of model code (pb_utils.Logger, Python logging): at its level (an unknown one is
// INFO), with the model's file and line as Triton shows them for the original's stub.
void LogFromModel(uint32_t level, const std::string& file, uint32_t line, const std::string& msg);
// "<model>/<instance>: ", or "<model>: " for the auto-complete stub (named after its model):
// what the backend puts before a line that a stub's model code wrote.
std::string InstanceLogPrefix(const std::string& model, const std::string& instance);

}  // namespace pybackend

#define PB_LOG(LEVEL, MSG) ::pybackend::Log(LEVEL, __FILE__, __LINE__, (MSG))
#define PB_LOG_INFO(MSG) PB_LOG(TRITONSERVER_LOG_INFO, MSG)
#define PB_LOG_WARN(MSG) PB_LOG(TRITONSERVER_LOG_WARN, MSG)
#define PB_LOG_ERROR(MSG) PB_LOG(TRITONSERVER_LOG_ERROR, MSG)
// The message expression is only evaluated when verbose logging is on.
#define PB_LOG_VERBOSE(MSG)                                  \
  do {                                                       \
    if (::pybackend::LogEnabled(TRITONSERVER_LOG_VERBOSE)) { \
      PB_LOG(TRITONSERVER_LOG_VERBOSE, MSG);                 \
    }                                                        \
  } while (false)
