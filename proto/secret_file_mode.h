#pragma once
// The mode rule for secret files (docs/SECURITY.md, "File modes"): token files and private keys,
// on the scheduler and on its clients alike.

#include <string>

#include "base/status.h"

namespace ripplekv::v1 {

// What is wrong with the mode of the secret file at `path`, or "" when nothing is: it must not be
// readable or writable by others, nor writable by its group, and readable by its group only when
// root owns it (root:GROUP 0640, a service reading it through its group). stat follows symlinks
// (Kubernetes mounts secrets as links). The text names the path, the mode and the fix, e.g.
// "t: mode 0644 lets every user of the machine read or write it; run `chmod 600 t`".
// Errors: stat's, naming the path (NotFound, PermissionDenied, Internal).
[[nodiscard]] StatusOr<std::string> SecretFileModeProblem(const std::string& path);

}  // namespace ripplekv::v1
