// Names for the threads the backend starts, so `top -H`, `ps -L`, perf and gdb tell them
// apart from Triton's own (they would all read "tritonserver").
#pragma once

namespace pybackend {

// Names the calling thread; at most 15 characters are kept (the kernel's limit).
void NameThisThread(const char* name);

}  // namespace pybackend
