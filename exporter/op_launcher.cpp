#include "exporter/op_launcher.hpp"

#include <stdexcept>

#include "exporter/declared_export.hpp"

namespace ptxevo::exporter {

OpLauncher op_launcher(const evaluator::Op& op, const evaluator::OpConfig& cfg, const evaluator::Knobs& knobs,
                       const std::set<std::string>& defined) {
  if (const auto* d = dynamic_cast<const declared_ops::DeclaredOp*>(&op)) return declared_launcher(*d, cfg, knobs, defined);
  std::optional<evaluator::HostExport> h;
  try {
    h = op.host_export(cfg, knobs, defined);
  } catch (const std::invalid_argument& e) {
    throw ExportError(e.what());
  }
  if (!h)
    throw ExportError("export has no host launcher for op '" + op.name() +
                      "' (ops declared in files, rmsnorm_fwd and kda_fwd have one); `ptxevo export --format ptx` "
                      "writes its PTX and launch.json");
  OpLauncher l;
  l.kernel_params = std::move(h->kernel_params);
  l.params_by_entry = std::move(h->params_by_entry);
  l.entries = std::move(h->entries);
  l.code = std::move(h->code);
  l.prototype = std::move(h->prototype);
  l.plan_prototype = std::move(h->plan_prototype);
  return l;
}

}  // namespace ptxevo::exporter
