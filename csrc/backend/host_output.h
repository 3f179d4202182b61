// The lines a process shared by a model's instances (PYBACKEND_INSTANCE_PROCESS shared/fork)
// writes on its stdout and stderr. Its Python side tags what it can attribute
// (pybackend/stub/host_output.py): a line starting with the record separator 0x1E carries a
// JSON object, {"instance": name, "text": line} for a line that the instance's code printed,
// {"log": [level, file, line, message]} for a log record made where no instance's channel
// serves it (Logger or Python logging at import time). Anything else is the process's own.
#pragma once

#include <string>

namespace pybackend {

// Logs one line of the shared process of `model` as the server's log line it stands for and
// returns the text to keep among the process's last words (stderr), without the tag.
std::string LogHostLine(const std::string& model, const std::string& line, bool is_stderr);

}  // namespace pybackend
