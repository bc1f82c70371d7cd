#include "cluster/wire.hpp"

#include <stdexcept>

#include "evaluator/build_cache.hpp"

namespace ptxevo::cluster {

using nlohmann::json;

namespace {

json blob(const std::vector<std::uint8_t>& b) { return json::binary(b); }

std::vector<std::uint8_t> blob_of(const json& j) {
  if (!j.is_binary()) throw std::runtime_error("expected a binary value");
  return j.get_binary();
}

}  // namespace

Bytes pack(const json& j) { return json::to_msgpack(j); }

json unpack(const Bytes& b) {
  try {
    return json::from_msgpack(b);
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("malformed message (") + std::to_string(b.size()) + " bytes): " + e.what());
  }
}

json build_job_to_json(const search::BuildJob& job) {
  const auto& r = job.request;
  search::Genome edits_only;
  edits_only.edits = job.edits;
  return {{"name", r.name},
          {"source", r.source},
          {"source_path", r.source_path},
          {"defines", r.defines},
          {"knobs", evaluator::knobs_to_json(r.knobs)},
          {"arch", r.arch},
          {"opt_level", r.opt_level},
          {"max_registers", r.max_registers},
          {"nvrtc_options", r.nvrtc_options},
          {"ptx_override", r.ptx_override},
          {"edits", edits_only.to_json().at("edits")}};
}

search::BuildJob build_job_from_json(const json& j) {
  search::BuildJob job;
  auto& r = job.request;
  r.name = j.at("name").get<std::string>();
  r.source = j.at("source").get<std::string>();
  r.source_path = j.at("source_path").get<std::string>();
  r.defines = j.at("defines").get<std::map<std::string, std::string>>();
  r.knobs = evaluator::knobs_from_json(j.at("knobs"));
  r.arch = j.at("arch").get<std::string>();
  r.opt_level = j.at("opt_level").get<int>();
  r.max_registers = j.at("max_registers").get<int>();
  r.nvrtc_options = j.at("nvrtc_options").get<std::vector<std::string>>();
  r.ptx_override = j.at("ptx_override").get<std::string>();
  json g = {{"seed", ""}, {"knobs", json::object()}, {"edits", j.at("edits")}};
  job.edits = search::genome_from_json(g).edits;
  return job;
}

json build_result_to_json(const evaluator::BuildResult& r) {
  json res = json::array();
  for (const auto& f : r.resources) res.push_back(evaluator::to_json(f));
  return {{"ok", r.ok},           {"stage", r.stage},         {"error", r.error},         {"nvrtc_log", r.nvrtc_log},
          {"link_log", r.link_log}, {"ptx", r.ptx},           {"cubin", blob(r.cubin)},   {"resources", res},
          {"key", r.key},         {"cache_hit", r.cache_hit}, {"seconds", r.seconds},     {"cache_warning", r.cache_warning}};
}

evaluator::BuildResult build_result_from_json(const json& j) {
  evaluator::BuildResult r;
  r.ok = j.at("ok").get<bool>();
  r.stage = j.at("stage").get<std::string>();
  r.error = j.at("error").get<std::string>();
  r.nvrtc_log = j.at("nvrtc_log").get<std::string>();
  r.link_log = j.at("link_log").get<std::string>();
  r.ptx = j.at("ptx").get<std::string>();
  r.cubin = blob_of(j.at("cubin"));
  for (const auto& f : j.at("resources")) r.resources.push_back(evaluator::resources_from_json(f));
  r.key = j.at("key").get<std::string>();
  r.cache_hit = j.at("cache_hit").get<bool>();
  r.seconds = j.at("seconds").get<double>();
  r.cache_warning = j.at("cache_warning").get<std::string>();
  return r;
}

json measure_call_to_json(const MeasureCall& c) {
  json items = json::array();
  for (const auto& it : c.items)
    items.push_back({{"genome_hash", it.genome_hash},
                     {"ptx_hash", it.ptx_hash},
                     {"knobs", evaluator::knobs_to_json(it.knobs)},
                     {"cubin", blob(it.cubin)}});
  return {{"common", evaluator::to_json(c.common)},
          {"baseline_cubin", blob(c.common.baseline_cubin)},
          {"candidate_cubin", blob(c.common.candidate_cubin)},
          {"items", items}};
}

MeasureCall measure_call_from_json(const json& j) {
  MeasureCall c;
  c.common = evaluator::request_from_json(j.at("common"));
  c.common.baseline_cubin = blob_of(j.at("baseline_cubin"));
  c.common.candidate_cubin = blob_of(j.at("candidate_cubin"));
  for (const auto& it : j.at("items")) {
    search::MeasureItem m;
    m.genome_hash = it.at("genome_hash").get<std::string>();
    m.ptx_hash = it.at("ptx_hash").get<std::string>();
    m.knobs = evaluator::knobs_from_json(it.at("knobs"));
    m.cubin = blob_of(it.at("cubin"));
    c.items.push_back(std::move(m));
  }
  return c;
}

json reports_to_json(const std::vector<evaluator::EvalReport>& reports) {
  json a = json::array();
  for (const auto& r : reports) a.push_back(evaluator::to_json(r));
  return a;
}

std::vector<evaluator::EvalReport> reports_from_json(const json& j) {
  std::vector<evaluator::EvalReport> out;
  for (const auto& r : j) out.push_back(evaluator::report_from_json(r));
  return out;
}

json environment_to_json(const tracedb::Environment& e) {
  return {{"gpu", e.gpu},
          {"driver", e.driver},
          {"cuda", e.cuda},
          {"toolchain_json", e.toolchain_json},
          {"clocks_json", e.clocks_json}};
}

tracedb::Environment environment_from_json(const json& j) {
  tracedb::Environment e;
  e.gpu = j.at("gpu").get<std::string>();
  e.driver = j.at("driver").get<std::string>();
  e.cuda = j.at("cuda").get<std::string>();
  e.toolchain_json = j.at("toolchain_json").get<std::string>();
  e.clocks_json = j.at("clocks_json").get<std::string>();
  return e;
}

}  // namespace ptxevo::cluster
