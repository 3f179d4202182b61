#include "backend/cpu_hop.h"

#include <sched.h>

namespace pybackend {

int CurrentCpu() { return sched_getcpu(); }

void LeaveCpu(int cpu) {
  if (cpu < 0 || sched_getcpu() != cpu) return;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  cpu_set_t elsewhere = allowed;
  CPU_CLR(cpu, &elsewhere);
  if (CPU_COUNT(&elsewhere) == 0) return;  // one CPU: nowhere to go
  // The first call moves the thread at once (its CPU is no longer allowed); the second gives
  // the operator's or Triton's mask back without moving it again.
  if (sched_setaffinity(0, sizeof(elsewhere), &elsewhere) == 0) {
    sched_setaffinity(0, sizeof(allowed), &allowed);
  }
}

}  // namespace pybackend
