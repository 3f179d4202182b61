// Whether, and how long, both sides of the sync channel busy-poll before they sleep: the
// backend's instance thread waiting for RESULT and the stub's main thread waiting for
// EXECUTE (docs/protocol.md, "The spin").
//
// Why: each EXECUTE/RESULT hand-off through a sleeping peer costs a cross-CPU wake-up
// (~20 us on the VMs we measure on, benchmarks/pingpong), which a peer still polling its
// doorbell does not pay. Polling takes a core for as long as it lasts, so it pays only where
// cores sit idle: on 2 vCPUs shared with Triton's threads it made tiny c1 slower and tiny c16
// 40 % slower (benchmarks/RESULTS.md). Hence off unless each instance of the model has a
// share of at least kLaneSpinMinCores usable cores: its two polling threads, the frontend
// thread serving its request, and one for the rest of the machine.
#pragma once

#include <cstdint>
#include <string>

namespace pybackend {

// The ipc-spin-us backend config value meaning "decide from the cores" (the default).
constexpr int64_t kLaneSpinAuto = -1;
// The longest poll in auto mode: covers a small model's execute (the backend's wait) and, at
// concurrency 1, the time from RESULT to the client's next request (the stub's wait) on an
// idle machine (tiny c1 round trip ~120 us, ~65 us of it in the backend, RESULTS.md).
constexpr int kLaneSpinAutoMicros = 100;
// Usable cores per instance from which auto mode polls.
constexpr int kLaneSpinMinCores = 4;

struct LaneSpin {
  int micros = 0;      // 0: sleep at once (the path without any spin)
  std::string reason;  // for the verbose log: what decided it
};

// `configured` is the backend config ipc-spin-us (kLaneSpinAuto, or 0..1000000 us, 0 = off);
// `cores` the usable cores (cores.h), `instances` the model's instance count.
LaneSpin DecideLaneSpin(int64_t configured, int cores, int instances);

// A blocking BLS call made on sync: how long the calling stub polls for its answer (backend
// config ipc-bls-spin-us). The answer comes after the callee's whole turn (Triton's queue to
// the callee's instance, its stub's round trip, the response back), several sync spins long,
// so one sync spin ran out before it and the caller paid a wake-up for every call (issue 31's
// BLS row). In auto mode it is this many sync spins, off where the sync spin is off: the same
// cores decide both, and a callee slower than that costs at most that poll per call.
constexpr int kBlsSpinAutoFactor = 10;
// The longest poll either setting may ask for (1 s), auto's product included.
constexpr int kSpinMaxMicros = 1000000;
// `configured`: ipc-bls-spin-us (kLaneSpinAuto, or 0..1000000 us, applied as is); `sync_us`
// the model's decided sync spin.
LaneSpin DecideBlsSpin(int64_t configured, int sync_us);

}  // namespace pybackend
