#include "backend/thread_name.h"

#include <pthread.h>

#include <cstring>

namespace pybackend {

void NameThisThread(const char* name) {
  char buf[16];
  std::strncpy(buf, name, sizeof(buf) - 1);
  buf[sizeof(buf) - 1] = '\0';
  pthread_setname_np(pthread_self(), buf);  // best effort: a name is only a label
}

}  // namespace pybackend
