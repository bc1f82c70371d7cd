// libFuzzer target: any byte string must parse or fail cleanly; whatever parses must print,
// re-parse and print the same text again, verify, and survive the analyses.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ir/analysis/module_stats.hpp"
#include "ir/parser.hpp"
#include "ir/printer.hpp"
#include "ir/verifier.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ptxevo::ir;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ParseResult r = parse_ptx(text);
  if (!r.ok()) {
    if (r.error->loc.line == 0) std::abort();  // every error must carry a position
    return 0;
  }
  const std::string once = print_module(*r.module);
  ParseResult again = parse_ptx(once);
  if (!again.ok()) {
    std::fprintf(stderr, "printed text does not parse: %s\n%s\n", again.error->format("printed").c_str(), once.c_str());
    std::abort();
  }
  if (print_module(*again.module) != once) {
    std::fprintf(stderr, "printer is not idempotent on:\n%s\n", once.c_str());
    std::abort();
  }
  (void)verify(*r.module);
  (void)analyze_module(*r.module);
  return 0;
}
