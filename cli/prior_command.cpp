#include "cli/prior_command.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "kernels/builtin_ops.hpp"
#include "search/cost_model.hpp"
#include "search/operator_posterior.hpp"
#include "tracedb/queries.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::cli {
namespace {

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

void print_posterior(tracedb::TraceDb& db, const std::set<std::string>& families, int top, std::ostream& out) {
  // Keys are "family|arch|operator", with "*" for the fallbacks.
  std::map<std::string, std::vector<std::tuple<double, std::string, double, double>>> by_scope;
  for (const auto& row : tracedb::operator_stats(db.connection())) {
    const std::string& key = row.key;
    const auto a = key.find('|'), b = key.find('|', a == std::string::npos ? 0 : a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string family = key.substr(0, a), scope = key.substr(0, b), op = key.substr(b + 1);
    // The fallback scopes ("*|arch", "*|*") hold the same credits pooled over families; the
    // family's own scope is what its next campaign samples first.
    if (families.count(family) == 0) continue;
    const double h = row.hits, m = row.misses;
    by_scope[scope].emplace_back((h + 1) / (h + m + 2), op, h, m);
  }
  if (by_scope.empty()) {
    out << "operator posterior: no evidence yet (no campaign has credited an operator)\n";
    return;
  }
  for (auto& [scope, rows] : by_scope) {
    std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return std::get<0>(x) > std::get<0>(y); });
    out << "operator posterior [" << scope << "] (mean hit rate under Beta(1,1); evidence after decay):\n";
    int n = 0;
    for (const auto& [mean, op, h, m] : rows) {
      if (n++ >= top) {
        out << "  ... " << rows.size() - static_cast<std::size_t>(top) << " more\n";
        break;
      }
      char line[200];
      std::snprintf(line, sizeof line, "  %-28s %.3f  (hits %.1f, misses %.1f)\n", op.c_str(), mean, h, m);
      out << line;
    }
  }
}

}  // namespace

int run_prior(const PriorOptions& o, std::ostream& out, std::ostream& err) {
  std::error_code ec;
  if (o.db.empty() || !std::filesystem::exists(o.db, ec)) {
    err << "ptxevo prior: no trace database at '" << o.db << "' (pass --db FILE, e.g. a campaign's ptxevo-runs/<spec stem>/campaign.db)\n";
    return 2;
  }
  try {
    auto db = tracedb::TraceDb::open(o.db);
    const evaluator::OpRegistry registry = kernels::builtin_ops();
    // Campaigns per op, with their environment and how many passing GPU evaluations they hold.
    const auto campaigns = tracedb::campaign_summaries(db.connection());
    out << "trace database: " << o.db << "\n";
    if (campaigns.empty()) {
      out << "no campaigns yet: the prior is empty (a first campaign starts cold)\n";
      return 0;
    }
    std::set<std::string> families, ops;
    for (const auto& c : campaigns) {
      families.insert(search::op_family(c.op));
      ops.insert(c.op);
    }
    for (const auto& family : families) {
      out << "\nop family " << family << ": campaigns feeding the prior (warm start, operator posterior, cost model)\n";
      for (const auto& c : campaigns)
        if (search::op_family(c.op) == family)
          out << "  campaign " << c.id << "  " << c.op << "  " << c.arch << "  " << c.spec_path << "  " << c.status << ", "
              << c.passing << " passing evaluations  [" << c.environment << "]\n";
    }
    out << "\n";
    print_posterior(db, families, o.top, out);
    for (const auto& op_name : ops) {
      // Loading the campaigns' recorded specs also loads an op declared in a file into the registry.
      search::CampaignConfigs configs;
      for (const auto& c : campaigns)
        if (c.op == op_name)
          if (auto cfg = search::campaign_spec_config(db, c.id, std::filesystem::path(o.db).parent_path(), registry)) configs.emplace(c.id, *cfg);
      const evaluator::Op* op = registry.find(op_name);
      if (!op) {
        out << "\ncost model " << op_name << ": op neither built into this ptxevo nor recorded with its campaigns; skipped\n";
        continue;
      }
      const search::CostDataset d = search::cost_dataset(db, *op, configs);
      std::set<std::int64_t> groups, camps;
      for (const auto& r : d.rows) {
        groups.insert(r.group);
        camps.insert(r.campaign_id);
      }
      out << "\ncost model " << op_name << ": " << d.rows.size() << " (candidate, shape) rows from " << camps.size()
          << " campaigns, " << groups.size() << " shape groups, " << d.layout.size() << " features"
          << (d.skipped ? ", " + std::to_string(d.skipped) + " rows skipped (no launch plan)" : std::string()) << "\n";
      if (!d.campaigns_without_config.empty()) {
        out << "  left out (spec not found from here or beside the database, so no op options):";
        for (auto id : d.campaigns_without_config) out << " campaign " << id;
        out << "\n";
      }
      const search::HeldOutRank h = search::held_out_rank(d);
      if (!h.evaluated) {
        out << "  held-out rank correlation: not enough rows yet (needs 20, in shapes seen on both sides)\n";
        continue;
      }
      out << "  held-out (fit on the first 70% by time, ranked the last 30% within each shape): Spearman "
          << fmt("model %.3f, analytic roofline/occupancy %.3f", h.spearman_model, h.spearman_analytic) << " ("
          << h.test_rows << " test rows in " << h.groups << " groups, " << h.train_rows << " training rows; PTX profile columns "
          << (h.ptx_used ? "used: they validated" : "left out: absent, too few rows or no better in cross-validation") << ")\n";
    }
  } catch (const std::exception& e) {
    err << "ptxevo prior: cannot read " << o.db << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace ptxevo::cli
