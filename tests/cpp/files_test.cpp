// AtomicFile (core/files.h): a reader sees the old file or the new one whole, a failure names its
// step and leaves no temporary file, and a link commit lets the first writer win.
#include "core/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace lz {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "lz_files_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Entries of the directory other than `keep`.
  int others(const std::string& keep) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.path().filename() != keep;
    return n;
  }

  std::string dir_;
};

TEST_F(AtomicFileTest, ReplaceCommitPutsTheWholeFileInPlaceAndLeavesNoTemporary) {
  const std::string path = dir_ + "/out.bin";
  std::ofstream(path) << "old contents";
  {
    AtomicFile f(path, path + ".tmp-", 0644);
    ASSERT_EQ(f.error(), 0);
    EXPECT_EQ(f.write("new ", 4), 0);
    EXPECT_EQ(read(path), "old contents") << "readers see the old file until the commit";
    EXPECT_EQ(f.write("bytes", 5), 0);
    EXPECT_EQ(f.commit(/*durable=*/true), 0);
    EXPECT_STREQ(f.failed_step(), "");
  }
  EXPECT_EQ(read(path), "new bytes");
  EXPECT_EQ(others("out.bin"), 0);
}

TEST_F(AtomicFileTest, AnAbandonedFileIsRemovedAndTheOldOneStays) {
  const std::string path = dir_ + "/out.bin";
  std::ofstream(path) << "old";
  {
    AtomicFile f(path, path + ".tmp-", 0644);
    f.write("half", 4);
  }
  EXPECT_EQ(read(path), "old");
  EXPECT_EQ(others("out.bin"), 0);
}

TEST_F(AtomicFileTest, AFailureNamesItsStepAndLeavesNoTemporary) {
  AtomicFile missing(dir_ + "/no/such/dir/f", dir_ + "/no/such/dir/f.tmp-", 0644);
  EXPECT_EQ(missing.error(), ENOENT);
  EXPECT_STREQ(missing.failed_step(), "create");
  EXPECT_EQ(missing.write("x", 1), ENOENT) << "writes after a failure report it again";
  EXPECT_EQ(missing.commit(false), ENOENT);

  const std::string target = dir_ + "/a_directory";  // rename cannot replace a directory by a file
  fs::create_directory(target);
  {
    AtomicFile f(target, dir_ + "/t.tmp-", 0644);
    f.write("x", 1);
    EXPECT_NE(f.commit(false), 0);
    EXPECT_STREQ(f.failed_step(), "rename");
  }
  EXPECT_TRUE(fs::is_directory(target));
  EXPECT_EQ(others("a_directory"), 0);
}

TEST_F(AtomicFileTest, KeepExistingLetsTheFirstWriterWinWithMode0600) {
  const std::string path = dir_ + "/key";
  {
    AtomicFile first(path, dir_ + "/.tmp.key.", 0600);
    first.write("first", 5);
    EXPECT_EQ(first.commit(false, AtomicFile::Commit::KeepExisting), 0);
  }
  {
    AtomicFile second(path, dir_ + "/.tmp.key.", 0600);
    second.write("second", 6);
    EXPECT_EQ(second.commit(false, AtomicFile::Commit::KeepExisting), EEXIST);
    EXPECT_STREQ(second.failed_step(), "link");
  }
  EXPECT_EQ(read(path), "first");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << "group and others get nothing";
  EXPECT_EQ(others("key"), 0);
}

TEST_F(AtomicFileTest, ReadAtStopsAtTheEndOfTheFile) {
  const std::string path = dir_ + "/f";
  std::ofstream(path) << "0123456789";
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_GE(fd.get(), 0);
  char buf[16] = {};
  EXPECT_EQ(read_at(fd.get(), buf, 4, 3), 4);
  EXPECT_EQ(std::string(buf, 4), "3456");
  EXPECT_EQ(read_at(fd.get(), buf, 16, 6), 4) << "a short count: the file ended";
  EXPECT_EQ(read_at(-1, buf, 1, 0), -1);
}

}  // namespace
}  // namespace lz
