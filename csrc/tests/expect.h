// The native unit tests' one assertion: prints the failed condition with its place and counts
// it, so a test binary reports every failure and exits non-zero at the end (main returns
// g_failures == 0 ? 0 : 1). Each test binary defines g_failures once.
#pragma once

#include <cstdio>

extern int g_failures;

#define EXPECT(cond)                                                         \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                          \
    }                                                                        \
  } while (false)
