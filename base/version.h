#pragma once
// The version of this build, from the project version in the top-level CMakeLists.txt (the one
// source of truth), and the rest of what `--version` reports: the git revision the build was made
// from, the build type, whether the CUDA backend and MPI are compiled in. Written into profiles
// (tool_version), reported by workers at registration, printed by every binary's --version
// (docs/OPERATIONS.md, "Versions"). Thread-safe.

#include <string>
#include <string_view>
#include <vector>

namespace ripplekv {

// "0.1.0".
std::string_view Version();
// "ripplekv 0.1.0": how profiles name the tool that wrote them.
std::string_view ToolVersion();
// The revision of the source tree at build time: `git describe --always --dirty` (12 hex
// digits, "-dirty" when it had uncommitted changes), "unknown" outside a git checkout.
std::string_view GitRevision();
// "ripplekv 0.1.0 (66373207cffc)": the version and revision, as workers report themselves.
std::string_view BuildVersion();
// CMAKE_BUILD_TYPE: "Release", "Debug", "RelWithDebInfo", ...
std::string_view BuildType();
// Whether the CUDA backend and the MPI communicator are compiled in.
bool BuiltWithCuda();
bool BuiltWithMpi();

// A library a binary runs with, and its version as that library reports it at run time.
struct LibraryVersion {
  std::string name;     // "grpc"
  std::string version;  // "1.51.1"
};

// The --version text of `program`, lines separated by '\n' (none after the last):
//   ripplekv-scheduler 0.1.0
//   revision 66373207cffc, Release build, CUDA off, MPI on
//   grpc 1.51.1
//   rocksdb 7.8.3
std::string VersionText(std::string_view program, const std::vector<LibraryVersion>& libraries);

}  // namespace ripplekv
