// A short-lived helper process run to completion at model load (the execution-environment
// resolver): its exit status and everything it printed.
#pragma once

#include <string>

#include "backend/stub_process.h"

namespace pybackend {

struct HelperResult {
  int status = -1;               // waitpid status
  std::string out;               // stdout
  std::string err;               // stderr
  bool ok() const;               // exited with code 0
  std::string Describe() const;  // "exited with code 1", "was killed by signal 9"
};

// Runs opts.python with opts.args (stdin /dev/null) and waits for it. Throws BackendError
// (INTERNAL) only when it cannot be started.
HelperResult RunHelper(const SpawnOptions& opts);

}  // namespace pybackend
