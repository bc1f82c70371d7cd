#include "search/genome.hpp"

#include <stdexcept>

#include "evaluator/build_cache.hpp"
#include "evaluator/eval_types.hpp"

namespace ptxevo::search {

using nlohmann::json;

json Genome::to_json() const {
  json edits_json = json::array();
  for (const auto& e : edits) edits_json.push_back({{"pass", e.pass}, {"params", e.params}});
  json j = {{"seed", seed}, {"knobs", evaluator::knobs_to_json(knobs)}, {"edits", edits_json}};
  if (!source.empty()) j["source"] = source;
  return j;
}

std::string Genome::canonical() const {
  // nlohmann::json objects are std::map-backed: keys come out sorted, so dump() is canonical.
  return to_json().dump();
}

std::string Genome::hash() const { return evaluator::sha256_hex(canonical()); }

std::string Genome::describe() const {
  std::string s;
  for (const auto& [k, v] : knobs) {
    if (!s.empty()) s += ' ';
    s += k + "=";
    if (const auto* i = std::get_if<std::int64_t>(&v)) s += std::to_string(*i);
    else s += std::get<std::string>(v);
  }
  for (const auto& e : edits) {
    s += " +" + e.pass;
    for (const auto& [k, v] : e.params) s += ":" + k + "=" + v;
  }
  if (!source.empty()) s += " (agent source)";
  return s;
}

Genome genome_from_json(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("genome: expected a JSON object");
  Genome g;
  if (!j.contains("seed") || !j.at("seed").is_string()) throw std::invalid_argument("genome: 'seed' must be a string");
  g.seed = j.at("seed").get<std::string>();
  if (j.contains("knobs")) {
    if (!j.at("knobs").is_object()) throw std::invalid_argument("genome: 'knobs' must be an object");
    g.knobs = evaluator::knobs_from_json(j.at("knobs"));
  }
  if (j.contains("edits")) {
    if (!j.at("edits").is_array()) throw std::invalid_argument("genome: 'edits' must be an array");
    for (const auto& e : j.at("edits")) {
      if (!e.is_object() || !e.contains("pass") || !e.at("pass").is_string())
        throw std::invalid_argument("genome: every edit needs a 'pass' name");
      PtxEdit edit;
      edit.pass = e.at("pass").get<std::string>();
      if (e.contains("params")) edit.params = e.at("params").get<mutators::PassParams>();
      g.edits.push_back(std::move(edit));
    }
  }
  if (j.contains("source")) g.source = j.at("source").get<std::string>();
  return g;
}

Genome genome_from_json(const json& j, const evaluator::Op& op) {
  Genome g = genome_from_json(j);
  g.knobs = evaluator::canonical_knobs(op, std::move(g.knobs));
  return g;
}

}  // namespace ptxevo::search
