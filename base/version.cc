#include "base/version.h"

// Defined by kernels/CMakeLists.txt: RIPPLEKV_VERSION from PROJECT_VERSION, RIPPLEKV_BUILD_TYPE,
// RIPPLEKV_BUILT_WITH_CUDA and RIPPLEKV_BUILT_WITH_MPI (0 or 1); the revision comes from the
// fragment cmake/git_revision.cmake writes at every build.
#include "git_revision.inc"

#if !defined(RIPPLEKV_VERSION) || !defined(RIPPLEKV_BUILD_TYPE) || \
    !defined(RIPPLEKV_BUILT_WITH_CUDA) || !defined(RIPPLEKV_BUILT_WITH_MPI)
#error "RIPPLEKV_VERSION, RIPPLEKV_BUILD_TYPE and RIPPLEKV_BUILT_WITH_* come from the build"
#endif

namespace ripplekv {

std::string_view Version() { return RIPPLEKV_VERSION; }

std::string_view ToolVersion() { return "ripplekv " RIPPLEKV_VERSION; }

std::string_view GitRevision() { return RIPPLEKV_GIT_REVISION; }

std::string_view BuildVersion() {
  return "ripplekv " RIPPLEKV_VERSION " (" RIPPLEKV_GIT_REVISION ")";
}

std::string_view BuildType() { return RIPPLEKV_BUILD_TYPE; }

bool BuiltWithCuda() { return RIPPLEKV_BUILT_WITH_CUDA != 0; }

bool BuiltWithMpi() { return RIPPLEKV_BUILT_WITH_MPI != 0; }

std::string VersionText(std::string_view program, const std::vector<LibraryVersion>& libraries) {
  std::string text;
  text.append(program).append(" ").append(Version()).append("\n");
  text.append("revision ").append(GitRevision()).append(", ").append(BuildType());
  text.append(" build, CUDA ").append(BuiltWithCuda() ? "on" : "off");
  text.append(", MPI ").append(BuiltWithMpi() ? "on" : "off");
  for (const LibraryVersion& library : libraries) {
    text.append("\n").append(library.name).append(" ").append(library.version);
  }
  return text;
}

}  // namespace ripplekv
