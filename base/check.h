#pragma once
// CHECK is for programmer bugs only (broken invariants inside our own code), never for bad input:
// bad input gets a Status.

#include <cstdio>
#include <cstdlib>

#define RIPPLEKV_CHECK(cond)                                                         \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)
