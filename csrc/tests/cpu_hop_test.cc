// cpu_hop: LeaveCpu moves the calling thread off a CPU it runs on and leaves its affinity as it
// was (csrc/backend/cpu_hop.h says why the instance thread does that).
#include "backend/cpu_hop.h"

#include <sched.h>

#include <cstdio>

#include "tests/expect.h"

int g_failures = 0;

namespace {

bool SameMask(const cpu_set_t& a, const cpu_set_t& b) { return CPU_EQUAL(&a, &b) != 0; }

// The calling thread's affinity now.
cpu_set_t Affinity() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  EXPECT(sched_getaffinity(0, sizeof(mask), &mask) == 0);
  return mask;
}

void LeavesTheCpuAndKeepsTheMask() {
  const cpu_set_t before = Affinity();
  if (CPU_COUNT(&before) < 2) {
    std::printf("cpu_hop_test: one usable CPU, nothing to leave for\n");
    return;
  }
  for (int round = 0; round < 20; ++round) {
    int cpu = pybackend::CurrentCpu();
    EXPECT(cpu >= 0);
    pybackend::LeaveCpu(cpu);
    EXPECT(pybackend::CurrentCpu() != cpu);
    EXPECT(SameMask(before, Affinity()));
  }
}

void StaysWhenAlreadyElsewhereOrUnknown() {
  const cpu_set_t before = Affinity();
  int cpu = pybackend::CurrentCpu();
  // A CPU it does not run on (or none): nothing to do, nothing changed.
  pybackend::LeaveCpu(-1);
  pybackend::LeaveCpu(cpu + 1000);
  EXPECT(SameMask(before, Affinity()));
}

void OneAllowedCpuStays() {
  const cpu_set_t before = Affinity();
  int cpu = pybackend::CurrentCpu();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  EXPECT(sched_setaffinity(0, sizeof(one), &one) == 0);
  pybackend::LeaveCpu(cpu);
  EXPECT(pybackend::CurrentCpu() == cpu);
  EXPECT(SameMask(one, Affinity()));
  EXPECT(sched_setaffinity(0, sizeof(before), &before) == 0);
}

}  // namespace

int main() {
  LeavesTheCpuAndKeepsTheMask();
  StaysWhenAlreadyElsewhereOrUnknown();
  OneAllowedCpuStays();
  if (g_failures == 0) std::printf("cpu_hop_test: all passed\n");
  return g_failures == 0 ? 0 : 1;
}
