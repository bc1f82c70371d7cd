// Scratch folders of the exporter tests: made fresh under the system's temp folder and removed
// when the test binary's tests end (PTXEVO_KEEP_TEST_DIRS=1 keeps them to look into), so repeated
// runs leave no exported sources, binaries and databases behind.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace ptxevo::exporter::testing {

inline std::filesystem::path scratch_dir(const std::string& prefix, const std::string& name) {
  namespace fs = std::filesystem;
  struct Cleanup : ::testing::Environment {
    std::vector<fs::path> dirs;
    void TearDown() override {
      if (const char* keep = std::getenv("PTXEVO_KEEP_TEST_DIRS"); keep && std::string(keep) == "1") return;
      std::error_code ec;
      for (const auto& d : dirs) fs::remove_all(d, ec);
    }
  };
  // gtest owns the environment and tears it down after the last test.
  static Cleanup* const cleanup = static_cast<Cleanup*>(::testing::AddGlobalTestEnvironment(new Cleanup));
  const fs::path d = fs::temp_directory_path() / (prefix + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  cleanup->dirs.push_back(d);
  return d;
}

}  // namespace ptxevo::exporter::testing
