#include "evaluator/build_cache.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ptxevo::evaluator {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
      throw std::runtime_error("OpenSSL: cannot initialize SHA-256");
  }
  void update(std::string_view s) {
    if (EVP_DigestUpdate(ctx_.get(), s.data(), s.size()) != 1) throw std::runtime_error("OpenSSL: SHA-256 update failed");
  }
  // "<length>:<bytes>\n": the length prefix keeps field boundaries unambiguous.
  void field(std::string_view s) {
    update(std::to_string(s.size()));
    update(":");
    update(s);
    update("\n");
  }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), md, &n) != 1) throw std::runtime_error("OpenSSL: SHA-256 final failed");
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * n);
    for (unsigned int i = 0; i < n; ++i) {
      out += kDigits[md[i] >> 4];
      out += kDigits[md[i] & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx_;
};

std::string_view as_chars(const std::vector<std::uint8_t>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return std::nullopt;
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return std::nullopt;
  return s;
}

// Writes `data` to a fresh temporary file next to `target`, then renames it over `target`:
// rename within one directory is atomic, so readers see the old file or the new one, never a
// mix, and two builders storing the same key both succeed.
std::string write_atomically(const fs::path& target, std::string_view data) {
  std::string tmpl = target.string() + ".tmp.XXXXXX";
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) return "cannot create a temporary file next to " + target.string() + ": " + std::strerror(errno);
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmpl.c_str());
      return "cannot write " + tmpl + ": " + err;
    }
    done += static_cast<std::size_t>(n);
  }
  // mkstemp creates 0600; cache entries are plain data readable like any other cache file.
  (void)fchmod(fd, 0644);  // best effort: a private entry still works for its owner
  if (::close(fd) != 0 || std::rename(tmpl.c_str(), target.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmpl.c_str());
    return "cannot move " + tmpl + " to " + target.string() + ": " + err;
  }
  return "";
}

// Keys come from BuildCache::key; anything else (and so any path trick) is refused.
bool valid_key(const std::string& key) {
  if (key.size() != 64) return false;
  for (char c : key)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

json to_json(const FunctionResources& f) {
  return {{"name", f.name},          {"is_entry", f.is_entry},         {"registers", f.registers},
          {"stack_frame", f.stack_frame}, {"spill_stores", f.spill_stores}, {"spill_loads", f.spill_loads},
          {"shared_bytes", f.shared_bytes}};
}

FunctionResources resources_from_json(const json& j) {
  FunctionResources f;
  f.name = j.at("name").get<std::string>();
  f.is_entry = j.at("is_entry").get<bool>();
  f.registers = j.at("registers").get<int>();
  f.stack_frame = j.at("stack_frame").get<int>();
  f.spill_stores = j.at("spill_stores").get<int>();
  f.spill_loads = j.at("spill_loads").get<int>();
  f.shared_bytes = j.at("shared_bytes").get<int>();
  return f;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex();
}

BuildCache::BuildCache(fs::path dir) : dir_(std::move(dir)) {}

fs::path BuildCache::default_dir() {
  if (const char* e = std::getenv("PTXEVO_CACHE_DIR"); e && *e) return e;
  if (const char* e = std::getenv("XDG_CACHE_HOME"); e && *e) return fs::path(e) / "ptxevo" / "builds";
  if (const char* e = std::getenv("HOME"); e && *e) return fs::path(e) / ".cache" / "ptxevo" / "builds";
  return {};
}

std::string BuildCache::key(std::string_view ptx, std::string_view arch, std::string_view toolchain,
                            const std::vector<std::string>& options) {
  Sha256 h;
  h.field("ptxevo-build-cache");
  h.field(std::to_string(kFormatVersion));
  h.field(ptx);
  h.field(arch);
  h.field(toolchain);
  h.field(std::to_string(options.size()));
  for (const auto& o : options) h.field(o);
  return h.hex();
}

fs::path BuildCache::cubin_path(const std::string& key) const { return dir_ / key.substr(0, 2) / (key + ".cubin"); }
fs::path BuildCache::meta_path(const std::string& key) const { return dir_ / key.substr(0, 2) / (key + ".json"); }

std::optional<CachedLink> BuildCache::load(const std::string& key) const {
  if (!valid_key(key)) return std::nullopt;
  const auto meta = read_file(meta_path(key));
  if (!meta) return std::nullopt;
  const json j = json::parse(*meta, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  try {
    if (j.at("format").get<int>() != kFormatVersion || j.at("key").get<std::string>() != key) return std::nullopt;
    CachedLink e;
    e.ok = j.at("ok").get<bool>();
    e.link_log = j.at("link_log").get<std::string>();
    e.info_log = j.at("info_log").get<std::string>();
    for (const auto& f : j.at("resources")) e.resources.push_back(resources_from_json(f));
    if (e.ok) {
      const auto cubin = read_file(cubin_path(key));
      if (!cubin || cubin->empty() || cubin->size() != j.at("cubin_size").get<std::size_t>() ||
          sha256_hex(*cubin) != j.at("cubin_sha256").get<std::string>())
        return std::nullopt;
      e.cubin.assign(cubin->begin(), cubin->end());
    }
    return e;
  } catch (const json::exception&) {
    return std::nullopt;  // a field is missing or has the wrong type: a foreign or damaged entry
  }
}

std::string BuildCache::store(const std::string& key, const CachedLink& entry) const {
  if (!valid_key(key)) return "invalid cache key '" + key + "'";
  std::error_code ec;
  fs::create_directories(cubin_path(key).parent_path(), ec);
  if (ec) return "cannot create " + cubin_path(key).parent_path().string() + ": " + ec.message();
  json j = {{"format", kFormatVersion}, {"key", key},         {"ok", entry.ok},
            {"link_log", entry.link_log}, {"info_log", entry.info_log}, {"resources", json::array()}};
  for (const auto& f : entry.resources) j["resources"].push_back(to_json(f));
  if (entry.ok) {
    j["cubin_size"] = entry.cubin.size();
    j["cubin_sha256"] = sha256_hex(as_chars(entry.cubin));
    if (std::string err = write_atomically(cubin_path(key), as_chars(entry.cubin)); !err.empty()) return err;
  }
  // Logs may hold arbitrary bytes from the toolchain; replace invalid UTF-8 rather than throw.
  return write_atomically(meta_path(key), j.dump(1, ' ', false, json::error_handler_t::replace));
}

}  // namespace ptxevo::evaluator
