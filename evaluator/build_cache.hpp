// An on-disk cache of link results keyed by content, shared by every builder process of a user.
//
// Layout: <dir>/<key[0:2]>/<key>.cubin and <key>.json (resources, logs, the cubin's size and
// SHA-256). Each file is written to a temporary file in the same directory and renamed into
// place, so readers never see a torn file; the .json is written last and vouches for the
// .cubin through its hash, so a crash between the two renames, a truncated or foreign file, or
// a mismatched pair reads as a miss and the next store overwrites it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/ptxas.hpp"

namespace ptxevo::evaluator {

// Lower-case hex SHA-256 (OpenSSL EVP). Also the content hash for genome identity.
std::string sha256_hex(std::string_view data);

// What the builder needs back instead of linking. A remembered failure has ok = false, no
// cubin and the link log; only deterministic failures are stored.
struct CachedLink {
  bool ok = false;
  std::vector<std::uint8_t> cubin;
  std::vector<FunctionResources> resources;
  std::string link_log;   // nvJitLink error log
  std::string info_log;   // nvJitLink info log
};

// A function's resources as the cache records them (also what MPI ranks send, cluster/wire.hpp).
nlohmann::json to_json(const FunctionResources& f);
FunctionResources resources_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception

class BuildCache {
 public:
  // Bumped whenever the entry format or the meaning of a key changes; part of every key.
  static constexpr int kFormatVersion = 1;

  explicit BuildCache(std::filesystem::path dir);

  // $PTXEVO_CACHE_DIR, else $XDG_CACHE_HOME/ptxevo/builds, else $HOME/.cache/ptxevo/builds;
  // empty when none of them is set.
  static std::filesystem::path default_dir();

  // SHA-256 over length-prefixed fields, so no two field lists hash the same text.
  static std::string key(std::string_view ptx, std::string_view arch, std::string_view toolchain,
                         const std::vector<std::string>& options);

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path cubin_path(const std::string& key) const;
  std::filesystem::path meta_path(const std::string& key) const;

  // nullopt on a miss, including an unreadable, partial or inconsistent entry.
  std::optional<CachedLink> load(const std::string& key) const;
  // Returns "" or an error message (the caller may go on without caching).
  std::string store(const std::string& key, const CachedLink& entry) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace ptxevo::evaluator
