// The worker's default memory limit: cgroup v2 and v1 limits found from /proc/self/cgroup and
// /proc/self/mountinfo texts over directory trees laid out as the kernel does, the tightest
// ancestor winning, "no limit" values ignored, malformed text read as nothing; and on this
// machine, a limit no larger than physical memory.

#include "worker/service/memory_limit.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"

namespace ripplekv::worker {
namespace {

namespace fs = std::filesystem;
using ripplekv::testing::TempDir;

constexpr int64_t kGiB = int64_t{1} << 30;

// Writes `value` to ROOT/relative, making the directories.
void Put(const TempDir& root, const std::string& relative, const std::string& value) {
  const fs::path file = fs::path(root.path()) / relative;
  fs::create_directories(file.parent_path());
  std::ofstream(file) << value;
}

// mountinfo lines of a cgroup v2 host and of the hybrid layout (v1 controllers, v2 unified).
constexpr char kV2Mountinfo[] =
    "24 1 259:2 / / rw,relatime - ext4 /dev/root rw\n"
    "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n";
constexpr char kHybridMountinfo[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(CgroupMemoryLimitTest, AContainersCgroupV2LimitIsReadFromItsMount) {
  TempDir root;  // a cgroup namespace: the container's cgroup is the mount's root
  Put(root, "sys/fs/cgroup/memory.max", "1073741824\n");
  auto limit = CgroupMemoryLimit("0::/\n", kV2Mountinfo, root.path());
  ASSERT_TRUE(limit.has_value());
  EXPECT_EQ(limit->bytes, kGiB);
  EXPECT_EQ(limit->source, root.File("sys/fs/cgroup/memory.max"));
}

TEST(CgroupMemoryLimitTest, TheTightestAncestorWins) {
  TempDir root;  // a Kubernetes pod seen from the host: container, pod, QoS class
  Put(root, "sys/fs/cgroup/kubepods/memory.max", std::to_string(8 * kGiB));
  Put(root, "sys/fs/cgroup/kubepods/pod1/memory.max", std::to_string(2 * kGiB));
  Put(root, "sys/fs/cgroup/kubepods/pod1/c1/memory.max", "max\n");
  auto limit = CgroupMemoryLimit("0::/kubepods/pod1/c1\n", kV2Mountinfo, root.path());
  ASSERT_TRUE(limit.has_value());
  EXPECT_EQ(limit->bytes, 2 * kGiB);
  EXPECT_EQ(limit->source, root.File("sys/fs/cgroup/kubepods/pod1/memory.max"));
}

TEST(CgroupMemoryLimitTest, MaxEverywhereIsNoLimit) {
  TempDir root;
  Put(root, "sys/fs/cgroup/a/memory.max", "max\n");
  Put(root, "sys/fs/cgroup/a/b/memory.max", "max\n");
  EXPECT_FALSE(CgroupMemoryLimit("0::/a/b\n", kV2Mountinfo, root.path()).has_value());
}

TEST(CgroupMemoryLimitTest, HybridHostsUseTheV1MemoryController) {
  TempDir root;  // the unified hierarchy has no memory controller: no memory.max there
  Put(root, "sys/fs/cgroup/unified/cgroup.procs", "");
  Put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  Put(root, "sys/fs/cgroup/memory/job/x/memory.limit_in_bytes", "536870912\n");
  const char cgroup[] = "4:memory:/job/x\n2:cpu,cpuacct:/job/x\n0::/job/x\n";
  auto limit = CgroupMemoryLimit(cgroup, kHybridMountinfo, root.path());
  ASSERT_TRUE(limit.has_value());
  EXPECT_EQ(limit->bytes, 512 << 20);
  EXPECT_EQ(limit->source, root.File("sys/fs/cgroup/memory/job/x/memory.limit_in_bytes"));
}

TEST(CgroupMemoryLimitTest, V1sLargestPageAlignedValueIsNoLimit) {
  TempDir root;
  Put(root, "sys/fs/cgroup/memory/job/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_FALSE(
      CgroupMemoryLimit("4:memory:/job\n", kHybridMountinfo, root.path()).has_value());
}

TEST(CgroupMemoryLimitTest, AMountOfTheContainersOwnCgroupIsItsLimit) {
  TempDir root;  // v1 without a cgroup namespace: /proc/self/cgroup names the host's path
  Put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", std::to_string(3 * kGiB));
  const char mountinfo[] =
      "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,relatime - cgroup cgroup rw,memory\n";
  auto limit = CgroupMemoryLimit("9:memory:/docker/abc\n", mountinfo, root.path());
  ASSERT_TRUE(limit.has_value());
  EXPECT_EQ(limit->bytes, 3 * kGiB);
}

TEST(CgroupMemoryLimitTest, APathAbsentUnderTheMountFallsBackToTheMount) {
  TempDir root;
  Put(root, "sys/fs/cgroup/memory.max", std::to_string(kGiB));
  auto limit = CgroupMemoryLimit("0::/elsewhere/x\n", kV2Mountinfo, root.path());
  ASSERT_TRUE(limit.has_value());
  EXPECT_EQ(limit->bytes, kGiB);
}

TEST(CgroupMemoryLimitTest, EscapedMountPointsAreDecoded) {
  TempDir root;
  Put(root, "cg roups/memory.max", std::to_string(kGiB));
  const char mountinfo[] = "30 24 0:26 / /cg\\040roups rw - cgroup2 cgroup2 rw\n";
  auto limit = CgroupMemoryLimit("0::/\n", mountinfo, root.path());
  ASSERT_TRUE(limit.has_value());
  EXPECT_EQ(limit->bytes, kGiB);
}

TEST(CgroupMemoryLimitTest, MalformedTextOrValuesReadAsNoLimit) {
  TempDir root;
  Put(root, "sys/fs/cgroup/memory.max", "lots\n");
  EXPECT_FALSE(CgroupMemoryLimit("0::/\n", kV2Mountinfo, root.path()).has_value());
  Put(root, "sys/fs/cgroup/memory.max", "-5\n");
  EXPECT_FALSE(CgroupMemoryLimit("0::/\n", kV2Mountinfo, root.path()).has_value());
  Put(root, "sys/fs/cgroup/memory.max", std::to_string(kGiB));
  for (const char* cgroup : {"", "0::", "0::relative", "garbage", "::::", "\n\n"}) {
    EXPECT_FALSE(CgroupMemoryLimit(cgroup, kV2Mountinfo, root.path()).has_value()) << cgroup;
  }
  for (const char* mountinfo : {"", "30 24 0:26 / /sys/fs/cgroup rw cgroup2 cgroup2 rw",
                                "- cgroup2", "a b c d e -", "\\\\\\ - cgroup2 x y"}) {
    EXPECT_FALSE(CgroupMemoryLimit("0::/\n", mountinfo, root.path()).has_value()) << mountinfo;
  }
}

TEST(DefaultMemoryLimitTest, IsPositiveAndNoMoreThanPhysicalMemory) {
  const MemoryLimit limit = DefaultMemoryLimit();
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  EXPECT_GT(limit.bytes, 0);
  EXPECT_LE(limit.bytes, physical);
  EXPECT_FALSE(limit.source.empty());
}

}  // namespace
}  // namespace ripplekv::worker
