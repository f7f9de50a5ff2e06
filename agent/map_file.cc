#include "agent/map_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "nlohmann/json.hpp"

namespace ripplekv::agent {
namespace {

using Json = nlohmann::json;

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Fsyncs the directory holding `path`, so that a rename or unlink in it is durable.
Status SyncDirectoryOf(const std::string& path) {
  const std::string dir = DirectoryOf(path);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return FileErrnoStatus(errno, dir, "open");
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) return FileErrnoStatus(saved, dir, "fsync");
  return absl::OkStatus();
}

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string SidecarPath(std::string_view map_path) { return std::string(map_path) + ".state.json"; }

std::string HeldMapToJson(const HeldMap& held) {
  // ordered_json: the fields in the documented order, for people reading the file.
  nlohmann::ordered_json j;
  j["model_hash"] = held.model_hash;
  j["version"] = held.version;
  j["rollout_id"] = held.rollout_id;
  j["format"] = held.format;
  j["sha256"] = held.sha256;
  j["applied"] = held.applied;
  return j.dump() + "\n";
}

StatusOr<HeldMap> HeldMapFromJson(std::string_view json_text) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  HeldMap held;
  const std::pair<const char*, std::string*> strings[] = {{"model_hash", &held.model_hash},
                                                          {"version", &held.version},
                                                          {"rollout_id", &held.rollout_id},
                                                          {"format", &held.format},
                                                          {"sha256", &held.sha256}};
  for (const auto& [name, out] : strings) {
    const auto it = j.find(name);
    if (it == j.end()) return absl::InvalidArgumentError(absl::StrCat("missing \"", name, "\""));
    if (!it->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", name, "\" is not a string"));
    }
    *out = it->get<std::string>();
  }
  const auto applied = j.find("applied");
  if (applied == j.end()) return absl::InvalidArgumentError("missing \"applied\"");
  if (!applied->is_boolean()) return absl::InvalidArgumentError("\"applied\" is not a boolean");
  held.applied = applied->get<bool>();
  if (held.sha256.size() != 64 || !IsLowerHex(held.sha256)) {
    return absl::InvalidArgumentError("\"sha256\" is not 64 lowercase hex digits");
  }
  return held;
}

HeldMapRead ReadHeldMap(const std::string& map_path, std::string_view model_hash,
                        std::string_view format) {
  HeldMapRead out;
  const std::string sidecar_path = SidecarPath(map_path);
  const bool map_exists = Exists(map_path);
  const bool sidecar_exists = Exists(sidecar_path);
  out.files_exist = map_exists || sidecar_exists;
  if (!map_exists && !sidecar_exists) return out;
  if (!sidecar_exists) {
    out.reason = absl::StrCat(map_path, " has no sidecar ", sidecar_path);
    return out;
  }
  if (!map_exists) {
    out.reason = absl::StrCat(sidecar_path, " describes ", map_path, ", which does not exist");
    return out;
  }
  StatusOr<std::string> sidecar_text = ReadFileBounded(sidecar_path, kMaxMapFileBytes);
  if (!sidecar_text.ok()) {
    out.reason = std::string(sidecar_text.status().message());
    return out;
  }
  StatusOr<HeldMap> held = HeldMapFromJson(*sidecar_text);
  if (!held.ok()) {
    out.reason = absl::StrCat(sidecar_path, ": malformed: ", held.status().message());
    return out;
  }
  if (held->model_hash != model_hash) {
    out.reason = absl::StrCat(sidecar_path, " is for model ", held->model_hash, ", not ",
                              std::string(model_hash));
    return out;
  }
  if (held->format != format) {
    out.reason =
        absl::StrCat(sidecar_path, " is for format ", held->format, ", not ", std::string(format));
    return out;
  }
  StatusOr<std::string> map_bytes = ReadFileBounded(map_path, kMaxMapFileBytes);
  if (!map_bytes.ok()) {
    out.reason = std::string(map_bytes.status().message());
    return out;
  }
  if (Sha256Hex(*map_bytes) != held->sha256) {
    out.reason = absl::StrCat(map_path, " does not match the SHA-256 in ", sidecar_path);
    return out;
  }
  out.held = *std::move(held);
  return out;
}

Status WriteMapFile(const std::string& map_path, std::string_view contents, HeldMap held) {
  held.sha256 = Sha256Hex(contents);
  RETURN_IF_ERROR(WriteFileAtomically(map_path, contents));
  return WriteSidecar(map_path, held);
}

Status WriteSidecar(const std::string& map_path, const HeldMap& held) {
  return WriteFileAtomically(SidecarPath(map_path), HeldMapToJson(held));
}

Status RemoveFileDurably(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return FileErrnoStatus(errno, path, "remove");
  }
  return SyncDirectoryOf(path);
}

}  // namespace ripplekv::agent
