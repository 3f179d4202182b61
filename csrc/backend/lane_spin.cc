#include "backend/lane_spin.h"

#include <algorithm>

namespace pybackend {

LaneSpin DecideLaneSpin(int64_t configured, int cores, int instances) {
  LaneSpin s;
  if (configured != kLaneSpinAuto) {
    s.micros = configured > 0 ? static_cast<int>(configured) : 0;
    s.reason = "set by the backend config ipc-spin-us";
    return s;
  }
  if (instances < 1) instances = 1;
  std::string counts = std::to_string(cores) + " usable cores, " + std::to_string(instances) +
                       (instances == 1 ? " instance" : " instances");
  if (cores / instances >= kLaneSpinMinCores) {
    s.micros = kLaneSpinAutoMicros;
    s.reason = "auto: " + counts + ", at least " + std::to_string(kLaneSpinMinCores) +
               " cores per instance";
  } else {
    s.reason = "auto: " + counts + ", fewer than " + std::to_string(kLaneSpinMinCores) +
               " cores per instance";
  }
  return s;
}

LaneSpin DecideBlsSpin(int64_t configured, int sync_us) {
  LaneSpin s;
  if (configured != kLaneSpinAuto) {
    s.micros = configured > 0 ? static_cast<int>(configured) : 0;
    s.reason = "set by the backend config ipc-bls-spin-us";
    return s;
  }
  s.micros = sync_us > 0 ? std::min(sync_us * kBlsSpinAutoFactor, kSpinMaxMicros) : 0;
  s.reason = "auto: " + std::to_string(kBlsSpinAutoFactor) + " sync spins";
  return s;
}

}  // namespace pybackend
