// Moving the instance thread off its CPU after a batch in which every request failed.
//
// Why: tritonserver 2.51 destroys an instance whose warmup failed on the loader thread that
// waited for the warmup, and its TritonBackendThread::StopBackendThread reads the backend
// thread's instance list while that thread, which has just woken the loader, has not yet put
// the instance back in it. The loader usually sleeps on the CPU the backend thread was woken
// onto (it woke it to run the warmup); when it wakes there it preempts the backend thread and
// tritonserver dies (SIGSEGV). Measured through the real server (a model whose warmup raises,
// one load per fresh server): 10-14 crashes in 30 loads before, 0 in 90 after this hop; the
// original backend crashes in 2-3 of 30 the same way.
#pragma once

namespace pybackend {

// The CPU the calling thread runs on now, or -1.
int CurrentCpu();

// If the calling thread still runs on `cpu` and its affinity allows another CPU, moves it to
// one; its affinity is the same afterwards (only where it runs changed). Best effort.
void LeaveCpu(int cpu);

}  // namespace pybackend
