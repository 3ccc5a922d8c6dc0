#pragma once
// The runtime's invariant check. The runtime depends on nothing else in mplan
// (docs/architecture.md, runtime: the generated program builds it from its
// folder alone), so it has its own macro rather than core/error.h's MPLAN_CHECK. A broken invariant prints file, line and
// the message, then aborts, in every build type.

#include <cstdio>
#include <cstdlib>

namespace mplan::rt {

[[noreturn]] inline void check_failed(const char* condition, const char* file, int line,
                                      const char* message) {
  std::fprintf(stderr, "mplan runtime: check failed at %s:%d: %s (%s)\n", file, line, message,
               condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace mplan::rt

#define MPLAN_RT_CHECK(condition, message)                                          \
  do {                                                                              \
    if (!(condition)) ::mplan::rt::check_failed(#condition, __FILE__, __LINE__, (message)); \
  } while (0)
