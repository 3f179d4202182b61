#include "backend/logging.h"

#include <cstring>

namespace pybackend {

void Log(TRITONSERVER_LogLevel level, const char* file, int line, const std::string& msg) {
  // Triton prints the file name as given; the build path says nothing useful.
  const char* slash = std::strrchr(file, '/');
  const char* base = slash != nullptr ? slash + 1 : file;
  TRITONSERVER_Error* err = TRITONSERVER_LogMessage(level, base, line, msg.c_str());
  if (err != nullptr) TRITONSERVER_ErrorDelete(err);
}

bool LogEnabled(TRITONSERVER_LogLevel level) { return TRITONSERVER_LogIsEnabled(level); }

std::string InstanceLogPrefix(const std::string& model, const std::string& instance) {
  return model == instance ? model + ": " : model + "/" + instance + ": ";
}

void LogFromModel(uint32_t level, const std::string& file, uint32_t line, const std::string& msg) {
  if (level > TRITONSERVER_LOG_VERBOSE) level = TRITONSERVER_LOG_INFO;
  auto lvl = static_cast<TRITONSERVER_LogLevel>(level);
  if (lvl == TRITONSERVER_LOG_VERBOSE && !LogEnabled(lvl)) return;
  TRITONSERVER_Error* err =
      TRITONSERVER_LogMessage(lvl, file.c_str(), static_cast<int>(line), msg.c_str());
  if (err != nullptr) TRITONSERVER_ErrorDelete(err);
}

}  // namespace pybackend
