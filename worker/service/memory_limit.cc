#include "worker/service/memory_limit.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace ripplekv::worker {

namespace {

namespace fs = std::filesystem;

// cgroup v1 reports "no limit" as the largest page-aligned int64 (9223372036854771712); anything
// from 2^62 up is treated as unlimited.
constexpr int64_t kV1Unlimited = int64_t{1} << 62;

// `text` cut at each `sep` into at most `max_pieces` pieces (the last keeps the rest); empty
// pieces dropped when `skip_empty`.
std::vector<std::string_view> Split(std::string_view text, char sep, bool skip_empty = false,
                                    size_t max_pieces = std::string_view::npos) {
  std::vector<std::string_view> pieces;
  while (true) {
    const size_t at = pieces.size() + 1 < max_pieces ? text.find(sep) : std::string_view::npos;
    const std::string_view piece = text.substr(0, at);
    if (!skip_empty || !piece.empty()) pieces.push_back(piece);
    if (at == std::string_view::npos) return pieces;
    text.remove_prefix(at + 1);
  }
}

std::optional<std::string> ReadSmallFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] >= '0' && field[i + 1] <= '3' &&
        field[i + 2] >= '0' && field[i + 2] <= '7' && field[i + 3] >= '0' && field[i + 3] <= '7') {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

struct Mount {
  std::string root;         // the hierarchy's directory mounted (field 4)
  std::string mount_point;  // where (field 5)
};

// The mount of cgroup v2 (v1 = false) or of v1's memory controller (v1 = true).
std::optional<Mount> FindMount(std::string_view mountinfo, bool v1) {
  for (std::string_view line : Split(mountinfo, '\n')) {
    const std::vector<std::string_view> fields = Split(line, ' ', /*skip_empty=*/true);
    size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash < 5 || dash + 3 > fields.size()) continue;  // malformed: no "-", or too short
    const std::string_view type = fields[dash + 1];
    if (v1) {
      if (type != "cgroup") continue;
      bool memory = false;
      for (std::string_view o : Split(fields[dash + 3], ',')) memory |= o == "memory";
      if (!memory) continue;
    } else if (type != "cgroup2") {
      continue;
    }
    return Mount{Unescape(fields[3]), Unescape(fields[4])};
  }
  return std::nullopt;
}

// The process's path in cgroup v2 ("0::PATH") or in v1's memory hierarchy ("N:...memory...:PATH").
std::optional<std::string> CgroupPath(std::string_view proc_self_cgroup, bool v1) {
  for (std::string_view line : Split(proc_self_cgroup, '\n')) {
    const std::vector<std::string_view> parts = Split(line, ':', /*skip_empty=*/false, 3);
    if (parts.size() != 3 || parts[2].empty() || parts[2][0] != '/') continue;
    if (!v1 && parts[0] == "0" && parts[1].empty()) return std::string(parts[2]);
    if (v1) {
      for (std::string_view c : Split(parts[1], ',')) {
        if (c == "memory") return std::string(parts[2]);
      }
    }
  }
  return std::nullopt;
}

// The value of one limit file; nullopt when missing, unlimited or unreadable.
std::optional<int64_t> ReadLimit(const fs::path& file, bool v1) {
  auto text = ReadSmallFile(file);
  if (!text) return std::nullopt;
  const absl::string_view value = absl::StripAsciiWhitespace(*text);
  int64_t bytes = 0;
  if (value == "max" || !absl::SimpleAtoi(value, &bytes) || bytes <= 0) return std::nullopt;
  if (v1 && bytes >= kV1Unlimited) return std::nullopt;
  return bytes;
}

std::optional<MemoryLimit> HierarchyLimit(std::string_view proc_self_cgroup,
                                          std::string_view mountinfo, const fs::path& root,
                                          bool v1) {
  const auto mount = FindMount(mountinfo, v1);
  const auto path = CgroupPath(proc_self_cgroup, v1);
  if (!mount || !path) return std::nullopt;
  const fs::path top = root / fs::path(mount->mount_point).relative_path();
  // The process's directory under the mount: PATH less the mounted root. A cgroup namespace (or
  // a container that mounts only its own cgroup) shows a PATH outside that root, or one absent
  // under the mount: the mount itself is then the process's cgroup.
  fs::path dir = top;
  const std::string_view mounted_root = mount->root == "/" ? "" : mount->root;
  if (std::string_view(*path).substr(0, mounted_root.size()) == mounted_root) {
    const fs::path relative = fs::path(path->substr(mounted_root.size())).relative_path();
    if (!relative.empty()) dir = (top / relative).lexically_normal();
  }
  std::error_code ec;
  if (dir.string().rfind(top.string(), 0) != 0 || !fs::is_directory(dir, ec)) dir = top;
  const char* file = v1 ? "memory.limit_in_bytes" : "memory.max";
  std::optional<MemoryLimit> tightest;
  // From the process's cgroup up to the mount, never above it.
  for (fs::path d = dir;; d = d.parent_path()) {
    if (auto bytes = ReadLimit(d / file, v1); bytes && (!tightest || *bytes < tightest->bytes)) {
      tightest = MemoryLimit{*bytes, (d / file).string()};
    }
    if (d == top || d.string().size() <= top.string().size()) break;
  }
  return tightest;
}

}  // namespace

std::optional<MemoryLimit> CgroupMemoryLimit(std::string_view proc_self_cgroup,
                                             std::string_view proc_self_mountinfo,
                                             const fs::path& root) {
  if (auto v2 = HierarchyLimit(proc_self_cgroup, proc_self_mountinfo, root, /*v1=*/false)) {
    return v2;
  }
  return HierarchyLimit(proc_self_cgroup, proc_self_mountinfo, root, /*v1=*/true);
}

MemoryLimit DefaultMemoryLimit() {
  MemoryLimit limit{0, "physical memory"};
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) limit.bytes = static_cast<int64_t>(pages) * page_size;
  const auto cgroup = ReadSmallFile("/proc/self/cgroup");
  const auto mountinfo = ReadSmallFile("/proc/self/mountinfo");
  if (cgroup && mountinfo) {
    if (auto capped = CgroupMemoryLimit(*cgroup, *mountinfo);
        capped && (limit.bytes == 0 || capped->bytes < limit.bytes)) {
      limit = *capped;
    }
  }
  return limit;
}

}  // namespace ripplekv::worker
