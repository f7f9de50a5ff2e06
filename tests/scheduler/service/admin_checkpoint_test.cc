// AdminService.CreateCheckpoint writes only under the scheduler's --checkpoint-dir directories
// (docs/OPERATIONS.md, "Checkpoints"): on a real RocksDB store, a path outside them, a ".." and a
// symlink leading out, an existing target and a scheduler without roots are refused, writing
// nothing; a relative path lands under the first root; the checkpoint is 0700 with 0600 files.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/service/admin_service.h"
#include "store/store.h"
#include "tests/common/temp_dir.h"

namespace ripplekv::scheduler::service {
namespace {

namespace fs = std::filesystem;
using ripplekv::testing::TempDir;

mode_t ModeOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class AdminCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store::StoreOptions options;
    options.sync_writes = false;
    StatusOr<std::unique_ptr<store::Store>> store = store::OpenStore(tmp_.File("db"), options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    StatusOr<std::vector<std::string>> roots = PrepareCheckpointRoots({tmp_.File("backups")});
    ASSERT_TRUE(roots.ok()) << roots.status();
    roots_ = *roots;
  }

  // CreateCheckpoint's logic with `roots` as the scheduler's --checkpoint-dir directories.
  StatusOr<v1::CreateCheckpointResponse> Checkpoint(const std::string& dir,
                                                    std::vector<std::string> roots) {
    AdminServiceImpl admin(
        AdminServiceOptions{.store = store_.get(), .checkpoint_roots = std::move(roots)});
    v1::CreateCheckpointRequest request;
    request.set_dir(dir);
    v1::CreateCheckpointResponse response;
    RETURN_IF_ERROR(admin.DoCreateCheckpoint(request, &response));
    return response;
  }
  StatusOr<v1::CreateCheckpointResponse> Checkpoint(const std::string& dir) {
    return Checkpoint(dir, roots_);
  }

  TempDir tmp_;
  std::unique_ptr<store::Store> store_;
  std::vector<std::string> roots_;
};

TEST_F(AdminCheckpointTest, RootsAreCreatedPrivateAndResolved) {
  ASSERT_EQ(roots_.size(), 1u);
  EXPECT_TRUE(fs::is_directory(roots_[0]));
  EXPECT_EQ(ModeOf(roots_[0]), 0700u);  // made here, under the test's umask
  EXPECT_EQ(roots_[0], fs::canonical(tmp_.File("backups")).string());
  // A root given through a symlink is known by its real path.
  fs::create_directory_symlink(tmp_.File("backups"), tmp_.File("link"));
  StatusOr<std::vector<std::string>> via_link = PrepareCheckpointRoots({tmp_.File("link")});
  ASSERT_TRUE(via_link.ok()) << via_link.status();
  EXPECT_EQ(via_link->at(0), roots_[0]);
  // Relative roots and roots that are files are refused, naming them.
  EXPECT_EQ(PrepareCheckpointRoots({"relative/dir"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const fs::path file = tmp_.File("file");
  { std::ofstream(file.string()) << "x"; }
  const Status not_dir = PrepareCheckpointRoots({file.string()}).status();
  EXPECT_FALSE(not_dir.ok());
  EXPECT_NE(not_dir.message().find(file.string()), std::string::npos) << not_dir;
}

TEST_F(AdminCheckpointTest, WithoutRootsEveryCheckpointIsAFailedPreconditionNamingTheFlag) {
  const fs::path target = tmp_.File("backups/c1");
  StatusOr<v1::CreateCheckpointResponse> refused = Checkpoint(target.string(), {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("--checkpoint-dir"), std::string::npos)
      << refused.status();
  EXPECT_FALSE(fs::exists(target));
}

TEST_F(AdminCheckpointTest, APathOutsideTheRootsIsRefusedNamingThem) {
  for (const fs::path& outside :
       {fs::path(tmp_.File("elsewhere")), fs::path("/etc/ripplekv-test-cp")}) {
    StatusOr<v1::CreateCheckpointResponse> refused = Checkpoint(outside.string());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
    EXPECT_NE(refused.status().message().find(roots_[0]), std::string::npos) << refused.status();
    EXPECT_NE(refused.status().message().find("--checkpoint-dir"), std::string::npos)
        << refused.status();
    EXPECT_FALSE(fs::exists(outside));
  }
  // A sibling whose name extends the root's is outside too.
  const fs::path sibling = tmp_.File("backups-evil");
  fs::create_directory(sibling);
  EXPECT_EQ(Checkpoint((sibling / "c").string()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(sibling / "c"));
}

TEST_F(AdminCheckpointTest, DotDotCannotLeadOut) {
  const std::string escape = roots_[0] + "/../escaped";
  StatusOr<v1::CreateCheckpointResponse> refused = Checkpoint(escape);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_FALSE(fs::exists(tmp_.File("escaped")));
  // Relative, through the first root.
  EXPECT_EQ(Checkpoint("../escaped").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Checkpoint("sub/../../escaped").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(tmp_.File("escaped")));
  // A name that makes no new directory.
  EXPECT_EQ(Checkpoint(roots_[0] + "/..").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Checkpoint(".").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AdminCheckpointTest, SymlinksCannotLeadOut) {
  const fs::path outside = tmp_.File("outside");
  fs::create_directory(outside);
  // A symlinked directory inside the root pointing out: its children are outside.
  fs::create_directory_symlink(outside, fs::path(roots_[0]) / "door");
  StatusOr<v1::CreateCheckpointResponse> through = Checkpoint(roots_[0] + "/door/c");
  EXPECT_EQ(through.status().code(), absl::StatusCode::kInvalidArgument) << through.status();
  EXPECT_NE(through.status().message().find(outside.string()), std::string::npos)
      << through.status();
  EXPECT_EQ(Checkpoint("door/c").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::is_empty(outside));
  // A dangling symlink as the target itself: RocksDB would follow it; refused as existing.
  fs::create_symlink(outside / "planted", fs::path(roots_[0]) / "trap");
  EXPECT_EQ(Checkpoint(roots_[0] + "/trap").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(fs::is_empty(outside));
}

TEST_F(AdminCheckpointTest, ACheckpointUnderARootIsPrivate) {
  StatusOr<v1::CreateCheckpointResponse> made = Checkpoint(roots_[0] + "/nightly-1");
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->dir(), roots_[0] + "/nightly-1");
  EXPECT_GT(made->bytes(), 0u);
  // Relative: under the first root; trailing slashes do not matter.
  StatusOr<v1::CreateCheckpointResponse> relative = Checkpoint("nightly-2/");
  ASSERT_TRUE(relative.ok()) << relative.status();
  EXPECT_EQ(relative->dir(), roots_[0] + "/nightly-2");
  // A subdirectory of a root, reached through ".." that stays inside, is fine.
  fs::create_directory(fs::path(roots_[0]) / "weekly");
  StatusOr<v1::CreateCheckpointResponse> nested = Checkpoint("weekly/../weekly/w1");
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(nested->dir(), roots_[0] + "/weekly/w1");

  for (const std::string& dir : {made->dir(), relative->dir(), nested->dir()}) {
    EXPECT_EQ(ModeOf(dir), 0700u) << dir;
    size_t files = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      ++files;
      EXPECT_EQ(ModeOf(entry.path()), 0600u) << entry.path();
    }
    EXPECT_GE(files, 3u) << dir;
  }
  // The same directory again: AlreadyExists, naming it.
  StatusOr<v1::CreateCheckpointResponse> again = Checkpoint("nightly-1");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  EXPECT_NE(again.status().message().find(made->dir()), std::string::npos) << again.status();
  // A missing parent inside the root: InvalidArgument, nothing made.
  EXPECT_EQ(Checkpoint("no/such/parent").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(fs::path(roots_[0]) / "no"));
}

}  // namespace
}  // namespace ripplekv::scheduler::service
