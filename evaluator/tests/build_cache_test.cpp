#include "evaluator/build_cache.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace ptxevo::evaluator {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class BuildCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("ptxevo-cache-test-" + std::to_string(getpid()) + "-" + info->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static CachedLink sample() {
    CachedLink e;
    e.ok = true;
    e.cubin = {0x7f, 'E', 'L', 'F', 1, 2, 3, 0, 255};
    FunctionResources f;
    f.name = "k";
    f.is_entry = true;
    f.registers = 40;
    f.spill_stores = 8;
    f.shared_bytes = 256;
    e.resources = {f};
    e.link_log = "";
    e.info_log = "ptxas info    : Used 40 registers";
    return e;
  }
  static std::string some_key(const std::string& ptx = "ptx") {
    return BuildCache::key(ptx, "sm_90a", "nvrtc 13.0 nvJitLink 13.0", {"-O3"});
  }
  static void write(const fs::path& p, const std::string& text) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << text;
  }

  fs::path dir_;
};

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(BuildCacheKey, DependsOnEveryField) {
  const std::vector<std::string> opts = {"-arch=sm_90a", "-O3"};
  const std::string k = BuildCache::key("ptx", "sm_90a", "tc", opts);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, BuildCache::key("ptx", "sm_90a", "tc", opts));
  EXPECT_NE(k, BuildCache::key("ptx2", "sm_90a", "tc", opts));
  EXPECT_NE(k, BuildCache::key("ptx", "sm_100a", "tc", opts));
  EXPECT_NE(k, BuildCache::key("ptx", "sm_90a", "tc2", opts));
  EXPECT_NE(k, BuildCache::key("ptx", "sm_90a", "tc", {"-arch=sm_90a", "-O2"}));
  EXPECT_NE(k, BuildCache::key("ptx", "sm_90a", "tc", {"-arch=sm_90a", "-O3", "-maxrregcount=64"}));
  // Field boundaries count: moving text between fields changes the key.
  EXPECT_NE(BuildCache::key("ab", "c", "tc", {}), BuildCache::key("a", "bc", "tc", {}));
  EXPECT_NE(BuildCache::key("p", "a", "tc", {"x", "y"}), BuildCache::key("p", "a", "tc", {"xy"}));
}

TEST_F(BuildCacheTest, RoundTripsAnEntry) {
  BuildCache cache(dir_);
  const std::string key = some_key();
  EXPECT_FALSE(cache.load(key).has_value());
  ASSERT_EQ(cache.store(key, sample()), "");
  EXPECT_TRUE(fs::exists(dir_ / key.substr(0, 2) / (key + ".cubin")));
  EXPECT_TRUE(fs::exists(dir_ / key.substr(0, 2) / (key + ".json")));
  auto e = cache.load(key);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->ok);
  EXPECT_EQ(e->cubin, sample().cubin);
  EXPECT_EQ(e->info_log, sample().info_log);
  ASSERT_EQ(e->resources.size(), 1u);
  EXPECT_EQ(e->resources[0].name, "k");
  EXPECT_TRUE(e->resources[0].is_entry);
  EXPECT_EQ(e->resources[0].registers, 40);
  EXPECT_EQ(e->resources[0].spill_stores, 8);
  EXPECT_EQ(e->resources[0].shared_bytes, 256);
  // No temporary files are left behind.
  for (const auto& f : fs::directory_iterator(dir_ / key.substr(0, 2)))
    EXPECT_EQ(f.path().string().find(".tmp."), std::string::npos) << f.path();
}

TEST_F(BuildCacheTest, RemembersFailures) {
  BuildCache cache(dir_);
  CachedLink e;
  e.ok = false;
  e.link_log = "ptxas application ptx input, line 3; error   : bad";
  ASSERT_EQ(cache.store(some_key(), e), "");
  auto got = cache.load(some_key());
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->ok);
  EXPECT_TRUE(got->cubin.empty());
  EXPECT_EQ(got->link_log, e.link_log);
}

TEST_F(BuildCacheTest, CorruptOrPartialEntriesAreMisses) {
  BuildCache cache(dir_);
  const std::string key = some_key();
  const CachedLink good = sample();
  auto reset = [&] { ASSERT_EQ(cache.store(key, good), ""); ASSERT_TRUE(cache.load(key)); };

  reset();
  write(cache.cubin_path(key), "\x7f" "ELF garbage");  // same length class, wrong bytes
  EXPECT_FALSE(cache.load(key));
  reset();
  fs::resize_file(cache.cubin_path(key), 3);  // truncated
  EXPECT_FALSE(cache.load(key));
  reset();
  fs::remove(cache.cubin_path(key));  // crash between the two renames
  EXPECT_FALSE(cache.load(key));
  reset();
  write(cache.meta_path(key), "{\"format\": 1, \"key\": ");  // torn JSON
  EXPECT_FALSE(cache.load(key));
  reset();
  write(cache.meta_path(key), "[1, 2, 3]");  // valid JSON, wrong shape
  EXPECT_FALSE(cache.load(key));
  reset();
  fs::remove(cache.meta_path(key));
  EXPECT_FALSE(cache.load(key));

  // Storing again repairs the entry.
  ASSERT_EQ(cache.store(key, good), "");
  auto e = cache.load(key);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->cubin, good.cubin);
}

TEST_F(BuildCacheTest, EntryUnderAnotherKeyIsAMiss) {
  BuildCache cache(dir_);
  const std::string a = some_key("a"), b = some_key("b");
  ASSERT_EQ(cache.store(a, sample()), "");
  fs::create_directories(cache.meta_path(b).parent_path());
  fs::copy_file(cache.meta_path(a), cache.meta_path(b));
  fs::copy_file(cache.cubin_path(a), cache.cubin_path(b));
  EXPECT_FALSE(cache.load(b));
}

TEST_F(BuildCacheTest, RefusesKeysThatAreNotHashes) {
  BuildCache cache(dir_);
  EXPECT_NE(cache.store("../../etc/passwd", sample()), "");
  EXPECT_FALSE(cache.load("../../etc/passwd"));
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(BuildCacheTest, ConcurrentStoresOfOneKeyLeaveAValidEntry) {
  BuildCache cache(dir_);
  const std::string key = some_key();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(8);
  for (auto& err : errors) threads.emplace_back([&cache, &key, &err] {
    for (int i = 0; i < 20; ++i)
      if (auto e = cache.store(key, sample()); !e.empty()) err = e;
  });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  auto e = cache.load(key);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->cubin, sample().cubin);
}

TEST_F(BuildCacheTest, ReportsAnUnwritableDirectory) {
  write(dir_, "a file where the cache directory should be");
  BuildCache cache(dir_ / "sub");
  EXPECT_NE(cache.store(some_key(), sample()), "");
  fs::remove(dir_);
}

// Restores one environment variable on scope exit.
class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
  }
  ~EnvGuard() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(BuildCacheDir, FollowsTheEnvironment) {
  EnvGuard a("PTXEVO_CACHE_DIR"), b("XDG_CACHE_HOME"), c("HOME");
  setenv("PTXEVO_CACHE_DIR", "/x/cache", 1);
  setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  setenv("HOME", "/x/home", 1);
  EXPECT_EQ(BuildCache::default_dir(), fs::path("/x/cache"));
  unsetenv("PTXEVO_CACHE_DIR");
  EXPECT_EQ(BuildCache::default_dir(), fs::path("/x/xdg/ptxevo/builds"));
  setenv("XDG_CACHE_HOME", "", 1);
  EXPECT_EQ(BuildCache::default_dir(), fs::path("/x/home/.cache/ptxevo/builds"));
  unsetenv("HOME");
  EXPECT_EQ(BuildCache::default_dir(), fs::path());
}

}  // namespace
}  // namespace ptxevo::evaluator
