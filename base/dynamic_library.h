#pragma once
// Shared libraries loaded at run time (cuBLAS, NCCL): most RippleKV processes never use a GPU, and
// linking those libraries would cost each of them hundreds of MiB of resident memory. Header-only;
// users link ${CMAKE_DL_LIBS}. A loaded library stays loaded for the process.

#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace ripplekv::kernels {

// The first of `names` that loads; null with "cannot load <what>: <name>: <the loader's reason>;
// ..." in *why, one reason per name tried (a library that is present but fails to load, e.g. for
// a missing dependency, says so rather than hiding behind a later name's "not found").
inline void* OpenFirstLibrary(std::initializer_list<const char*> names, const char* what,
                              std::string* why) {
  std::string reasons;
  for (const char* name : names) {
    if (void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL); library != nullptr) return library;
    const char* error = dlerror();
    if (!reasons.empty()) reasons += "; ";
    reasons += error != nullptr ? error : std::string(name) + ": not found";
  }
  *why = std::string("cannot load ") + what + ": " + reasons;
  return nullptr;
}

// *fn = `symbol` of `library`; false with "<what> has no symbol <symbol><hint>" in *why.
template <class Fn>
bool ResolveSymbol(void* library, const char* symbol, Fn* fn, const char* what, std::string* why,
                   const char* hint = "") {
  *fn = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (*fn == nullptr) *why = std::string(what) + " has no symbol " + symbol + hint;
  return *fn != nullptr;
}

}  // namespace ripplekv::kernels
