// The default worker id: lock slots in a state directory, their release, and the fallbacks.
#include "worker/service/worker_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace ripplekv::worker {
namespace {

class WorkerIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "worker_identity_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  IdentityOptions Options(const std::string& device = "cpu") const {
    return {.host = "myhost", .device = device, .state_dir = root_ + "/state"};
  }

  std::string root_;
};

TEST_F(WorkerIdentityTest, TwoWorkersInOneProcessGetSlotsZeroAndOne) {
  StatusOr<WorkerIdentity> first = WorkerIdentity::Allocate(Options());
  StatusOr<WorkerIdentity> second = WorkerIdentity::Allocate(Options());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->id(), "myhost-cpu-0");
  EXPECT_EQ(second->id(), "myhost-cpu-1");
  EXPECT_EQ(first->slot(), 0);
  EXPECT_EQ(second->slot(), 1);
  EXPECT_EQ(first->lock_path(), root_ + "/state/worker-myhost-cpu-0.lock");
  EXPECT_NE(first->source().find("slot 0"), std::string::npos) << first->source();
}

TEST_F(WorkerIdentityTest, AHeldSlotConflictsWithAnotherOpenOfItsFileInTheSameProcess) {
  std::optional<StatusOr<WorkerIdentity>> held = WorkerIdentity::Allocate(Options());
  ASSERT_TRUE(held->ok()) << held->status();
  const std::string path = (*held)->lock_path();
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0) << "flock locks belong to the open file";
  EXPECT_EQ(errno, EWOULDBLOCK);
  std::ifstream pid_file(path);
  int pid = 0;
  pid_file >> pid;
  EXPECT_EQ(pid, ::getpid()) << "the lock file names its holder";
  held.reset();
  EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0) << "destroying the identity releases its lock";
  ::close(fd);
}

TEST_F(WorkerIdentityTest, AReleasedSlotGoesToTheNextWorkerAndTheOthersKeepTheirs) {
  std::optional<StatusOr<WorkerIdentity>> first = WorkerIdentity::Allocate(Options());
  StatusOr<WorkerIdentity> second = WorkerIdentity::Allocate(Options());
  ASSERT_TRUE(first->ok() && second.ok());
  first.reset();  // the first worker exits
  StatusOr<WorkerIdentity> restarted = WorkerIdentity::Allocate(Options());
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(restarted->id(), "myhost-cpu-0");
  StatusOr<WorkerIdentity> third = WorkerIdentity::Allocate(Options());
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->id(), "myhost-cpu-2");
}

TEST_F(WorkerIdentityTest, AMovedIdentityKeepsItsLock) {
  StatusOr<WorkerIdentity> allocated = WorkerIdentity::Allocate(Options());
  ASSERT_TRUE(allocated.ok()) << allocated.status();
  WorkerIdentity moved = std::move(*allocated);
  allocated = absl::UnknownError("gone");  // destroys the moved-from identity
  EXPECT_EQ(moved.id(), "myhost-cpu-0");
  StatusOr<WorkerIdentity> next = WorkerIdentity::Allocate(Options());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->id(), "myhost-cpu-1");
}

TEST_F(WorkerIdentityTest, AKilledWorkersSlotIsFreeForItsRestart) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // a worker: takes slot 0 and holds it until killed
    ::close(ready[0]);
    StatusOr<WorkerIdentity> held = WorkerIdentity::Allocate(Options());
    const char slot = held.ok() ? static_cast<char>('0' + held->slot()) : 'x';
    if (::write(ready[1], &slot, 1) != 1) ::_exit(2);
    while (true) ::pause();
  }
  ::close(ready[1]);
  char slot = 0;
  ASSERT_EQ(::read(ready[0], &slot, 1), 1);
  ::close(ready[0]);
  EXPECT_EQ(slot, '0');
  {
    StatusOr<WorkerIdentity> sibling = WorkerIdentity::Allocate(Options());
    ASSERT_TRUE(sibling.ok()) << sibling.status();
    EXPECT_EQ(sibling->id(), "myhost-cpu-1") << "slot 0 is the running worker's";
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  StatusOr<WorkerIdentity> restarted = WorkerIdentity::Allocate(Options());
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(restarted->id(), "myhost-cpu-0") << "kill -9 frees the slot for the restart";
}

TEST_F(WorkerIdentityTest, EachDeviceHasItsOwnSlots) {
  StatusOr<WorkerIdentity> cpu = WorkerIdentity::Allocate(Options("cpu"));
  StatusOr<WorkerIdentity> gpu1 = WorkerIdentity::Allocate(Options("cuda:1"));
  StatusOr<WorkerIdentity> gpu1_again = WorkerIdentity::Allocate(Options("cuda:1"));
  ASSERT_TRUE(cpu.ok() && gpu1.ok() && gpu1_again.ok());
  EXPECT_EQ(cpu->id(), "myhost-cpu-0");
  EXPECT_EQ(gpu1->id(), "myhost-cuda-1-0");
  EXPECT_EQ(gpu1_again->id(), "myhost-cuda-1-1");
}

TEST_F(WorkerIdentityTest, CreatesAMissingStateDirectoryPrivateToTheUser) {
  IdentityOptions options = Options();
  options.state_dir = root_ + "/a/b";
  StatusOr<WorkerIdentity> id = WorkerIdentity::Allocate(options);
  ASSERT_TRUE(id.ok()) << id.status();
  for (const std::string& dir : {root_ + "/a", root_ + "/a/b"}) {
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0) << dir;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  }
}

TEST_F(WorkerIdentityTest, WhenEverySlotIsHeldAllocateSaysSo) {
  IdentityOptions options = Options();
  options.max_slots = 2;
  StatusOr<WorkerIdentity> a = WorkerIdentity::Allocate(options);
  StatusOr<WorkerIdentity> b = WorkerIdentity::Allocate(options);
  ASSERT_TRUE(a.ok() && b.ok());
  StatusOr<WorkerIdentity> c = WorkerIdentity::Allocate(options);
  EXPECT_TRUE(absl::IsResourceExhausted(c.status())) << c.status();
}

TEST_F(WorkerIdentityTest, AnExplicitIdLocksNothing) {
  const ChosenIdentity chosen = ChooseWorkerIdentity("gpu-node-7", Options());
  EXPECT_EQ(chosen.identity.id(), "gpu-node-7");
  EXPECT_EQ(chosen.identity.source(), "--id");
  EXPECT_EQ(chosen.identity.slot(), -1);
  EXPECT_TRUE(chosen.fallback_reason.empty());
  EXPECT_FALSE(std::filesystem::exists(root_ + "/state")) << "nothing is created for --id";
}

TEST_F(WorkerIdentityTest, AnUnusableStateDirectoryFallsBackToHostDeviceAndPid) {
  const std::string file = root_ + "/not-a-dir";
  std::ofstream(file) << "x";
  IdentityOptions options = Options("cuda:0");
  options.state_dir = file;
  const ChosenIdentity chosen = ChooseWorkerIdentity("", options);
  EXPECT_EQ(chosen.identity.id(), "myhost-cuda-0-pid" + std::to_string(::getpid()));
  EXPECT_EQ(chosen.identity.slot(), -1);
  EXPECT_NE(chosen.fallback_reason.find(file), std::string::npos) << chosen.fallback_reason;

  options.state_dir = "";
  const ChosenIdentity none = ChooseWorkerIdentity("", options);
  EXPECT_EQ(none.identity.id(), "myhost-cuda-0-pid" + std::to_string(::getpid()));
  EXPECT_NE(none.fallback_reason.find("no state directory"), std::string::npos)
      << none.fallback_reason;
}

TEST_F(WorkerIdentityTest, ByDefaultItAllocatesASlot) {
  const ChosenIdentity chosen = ChooseWorkerIdentity("", Options());
  EXPECT_EQ(chosen.identity.id(), "myhost-cpu-0");
  EXPECT_TRUE(chosen.fallback_reason.empty()) << chosen.fallback_reason;
}

TEST(DefaultStateDirTest, RipplekvHomeThenXdgStateHomeThenHome) {
  EXPECT_EQ(DefaultStateDir({.ripplekv_home = "/r", .xdg_state_home = "/x", .home = "/h"}),
            "/r/worker");
  EXPECT_EQ(DefaultStateDir({.xdg_state_home = "/x", .home = "/h"}), "/x/ripplekv");
  EXPECT_EQ(DefaultStateDir({.xdg_state_home = "relative", .home = "/h"}),
            "/h/.local/state/ripplekv")
      << "a relative XDG_STATE_HOME is ignored";
  EXPECT_EQ(DefaultStateDir({.home = "/h"}), "/h/.local/state/ripplekv");
  EXPECT_EQ(DefaultStateDir({}), "");
}

TEST(DeviceIdPartTest, ColonsAndOddCharactersBecomeDashes) {
  EXPECT_EQ(DeviceIdPart("cpu"), "cpu");
  EXPECT_EQ(DeviceIdPart("cuda:1"), "cuda-1");
  EXPECT_EQ(DeviceIdPart("cuda:0-g1"), "cuda-0-g1");
  EXPECT_EQ(DeviceIdPart("a/b c"), "a-b-c");
}

}  // namespace
}  // namespace ripplekv::worker
