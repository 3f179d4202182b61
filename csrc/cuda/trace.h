// Opt-in stage timers for the GPU path (docs/gpu.md, "Where the time goes"): with
// PYBACKEND_GPU_TRACE=<file> in tritonserver's environment the backend appends one line per
// timed stage, "pbtrace backend <stage> <ns>", to <file> (the stub, which inherits the
// variable, appends "pbtrace stub ..." lines: pybackend/utils/gpu_trace.py), and
// benchmarks/gpu_identity.py --breakdown aggregates them. Unset (the default) every timer is
// one predictable branch on a constant read once when the library loads.
#pragma once

#include <chrono>
#include <cstdint>

namespace pybackend::cuda::trace {

// PYBACKEND_GPU_TRACE is set and not empty (read once, when the library is loaded).
extern const bool kOn;

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Appends "pbtrace backend <stage> <ns>\n" with one write(2) (whole lines even with the stub
// appending to the same file). `stage` is a string literal. Only called when kOn.
void Record(const char* stage, int64_t ns);

// An event without a duration (a cache hit): recorded as 0 ns.
inline void Count(const char* stage) {
  if (kOn) Record(stage, 0);
}

// Times its scope as `stage` (nothing when off). Rename() changes what is recorded, for a
// scope whose outcome decides its name (a cache hit or miss).
class Stage {
 public:
  explicit Stage(const char* stage) : stage_(stage), t0_(kOn ? NowNs() : 0) {}
  ~Stage() { End(); }
  // Records now instead of at the end of the scope (once).
  void End() {
    if (kOn && stage_ != nullptr) Record(stage_, NowNs() - t0_);
    stage_ = nullptr;
  }
  void Rename(const char* stage) { stage_ = stage; }
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

 private:
  const char* stage_;
  int64_t t0_;
};

}  // namespace pybackend::cuda::trace
