// The stub's bounded poll of the sync lane's doorbell (pybackend/ipc/lane.py), loaded with
// ctypes. In C because ctypes releases the GIL around the call: a poll in Python would hold
// it, and the stub's other threads (the async channel's reader, a response sender, a BLS
// caller) would wait up to the interpreter's switch interval (5 ms) for it.

#include <time.h>

#include <cstdint>

extern "C" {

// Polls *bell until it differs from `seen` (returns 1) or `limit_ns` passes (returns 0),
// a pause instruction between reads. x86-64 only, like the lane itself.
__attribute__((visibility("default"))) int pb_lane_spin(const uint32_t* bell, uint32_t seen,
                                                        int64_t limit_ns) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t deadline = now.tv_sec * 1000000000LL + now.tv_nsec + limit_ns;
  while (true) {
    for (int i = 0; i < 8; ++i) {  // the clock every 8 polls, as in csrc/ipc/lane.cc
      if (__atomic_load_n(bell, __ATOMIC_ACQUIRE) != seen) return 1;
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec * 1000000000LL + now.tv_nsec >= deadline) return 0;
  }
}

}  // extern "C"
