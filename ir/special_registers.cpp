#include <array>
#include <cctype>

#include "ir/parser.hpp"

namespace ptxevo::ir {

bool is_special_register(std::string_view name) {
  static constexpr std::array<std::string_view, 36> kPlain = {
      "%tid", "%ntid", "%laneid", "%warpid", "%nwarpid", "%ctaid", "%nctaid", "%smid", "%nsmid",
      "%gridid", "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt",
      "%clock", "%clock_hi", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi",
      "%total_smem_size", "%dynamic_smem_size", "%aggr_smem_size", "%is_explicit_cluster",
      "%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid", "%cluster_ctarank",
      "%cluster_nctarank", "%current_graph_exec", "%reserved_smem_offset_begin",
      "%reserved_smem_offset_end", "%reserved_smem_offset_cap", "%pm0_64"};
  // Strip a .x/.y/.z component.
  std::string_view base = name;
  if (base.size() > 2 && base[base.size() - 2] == '.') base.remove_suffix(2);
  for (auto s : kPlain)
    if (base == s) return true;
  // Numbered families: %envreg0..31, %pm0..7, %pm0_64..%pm7_64, %reserved_smem_offset_<2>.
  auto numbered = [&](std::string_view prefix, std::string_view suffix) {
    if (base.size() <= prefix.size() + suffix.size() || base.substr(0, prefix.size()) != prefix) return false;
    if (base.substr(base.size() - suffix.size()) != suffix) return false;
    auto digits = base.substr(prefix.size(), base.size() - prefix.size() - suffix.size());
    for (char c : digits)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return !digits.empty();
  };
  return numbered("%envreg", "") || numbered("%pm", "") || numbered("%pm", "_64") ||
         numbered("%reserved_smem_offset_", "");
}

}  // namespace ptxevo::ir
