// The one place the environment is read (core/config.cpp): boolean spellings, ~ in paths.
#include "core/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "lazuli/error.h"

namespace {

// Restores the variables it changes and the Config they were read into (a test process never
// falls back to the default cache directory in ~).
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      const char* v = getenv(kNames[i]);
      had_[i] = v != nullptr;
      saved_[i] = v ? v : "";
    }
    config_ = lz::config();
  }
  void TearDown() override {
    for (int i = 0; i < 2; ++i) {
      if (had_[i]) {
        setenv(kNames[i], saved_[i].c_str(), 1);
      } else {
        unsetenv(kNames[i]);
      }
    }
    lz::mutable_config() = config_;
  }
  static constexpr const char* kNames[2] = {"LAZULI_PERSISTENT_CACHE_READ_ONLY",
                                            "LAZULI_CACHE_DIR"};
  bool had_[2] = {false, false};
  std::string saved_[2];
  lz::Config config_;
};

TEST_F(ConfigTest, BooleansAcceptTheUsualSpellingsInAnyCase) {
  for (const char* yes : {"1", "true", "True", "TRUE", "yes", "Yes", "on", "ON", " true "}) {
    setenv("LAZULI_PERSISTENT_CACHE_READ_ONLY", yes, 1);
    lz::reload_config();
    EXPECT_TRUE(lz::config().persistent_cache_read_only) << yes;
  }
  for (const char* no : {"0", "false", "False", "NO", "off", "Off"}) {
    setenv("LAZULI_PERSISTENT_CACHE_READ_ONLY", no, 1);
    lz::reload_config();
    EXPECT_FALSE(lz::config().persistent_cache_read_only) << no;
  }
}

TEST_F(ConfigTest, MalformedBooleanNamesTheVariableAndTheSpellings) {
  setenv("LAZULI_PERSISTENT_CACHE_READ_ONLY", "maybe", 1);
  try {
    lz::reload_config();
    FAIL() << "expected ValueError";
  } catch (const lz::ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("LAZULI_PERSISTENT_CACHE_READ_ONLY='maybe'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("yes/no"), std::string::npos) << msg;
  }
}

TEST_F(ConfigTest, CacheDirExpandsALeadingTilde) {
  const char* home = getenv("HOME");
  ASSERT_NE(home, nullptr);
  setenv("LAZULI_CACHE_DIR", "~/lazuli-cache", 1);
  lz::reload_config();
  EXPECT_EQ(lz::config().cache_dir, std::string(home) + "/lazuli-cache");
  setenv("LAZULI_CACHE_DIR", "~", 1);
  lz::reload_config();
  EXPECT_EQ(lz::config().cache_dir, home);
  setenv("LAZULI_CACHE_DIR", "~no-such-user-lazuli/x", 1);
  EXPECT_THROW(lz::reload_config(), lz::ValueError);
}

}  // namespace
