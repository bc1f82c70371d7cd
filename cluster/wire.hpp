// What travels between the ranks of a campaign under MPI, as bytes: MessagePack of a JSON
// document whose cubins are binary values (never base64). Every message carries the id of the
// request it belongs to, so an answer finds its caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/builder.hpp"
#include "evaluator/eval_types.hpp"
#include "search/build_service.hpp"
#include "search/measurer.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::cluster {

using Bytes = std::vector<std::uint8_t>;

// Message kinds, used as MPI tags.
enum Tag : int {
  kHello = 1,      // worker -> 0 at start: host, node-local rank
  kRole = 2,       // 0 -> worker: build or measure (and how)
  kReady = 3,      // worker -> 0: the role is set up (a measuring rank's environment), or why not
  kBuild = 4,      // 0 -> builder: one job
  kBuilt = 5,      // builder -> 0: its result
  kMeasure = 6,    // 0 -> measurer: one batch
  kMeasured = 7,   // measurer -> 0: one report per item
  kHeartbeat = 8,  // both ways, every second: silence past the deadline means the peer is lost
  kStop = 9,       // 0 -> worker: the campaign is over
  kAbandon = 10,   // 0 -> measurer: give up the batch in flight (the campaign's deadline)
};

Bytes pack(const nlohmann::json& j);
// Throws std::runtime_error on bytes that are not a message.
nlohmann::json unpack(const Bytes& b);

nlohmann::json build_job_to_json(const search::BuildJob& job);
search::BuildJob build_job_from_json(const nlohmann::json& j);  // request.ptx_pass left empty

// Everything but the module (the receiver parses the PTX: the printer and parser are inverses).
nlohmann::json build_result_to_json(const evaluator::BuildResult& r);
evaluator::BuildResult build_result_from_json(const nlohmann::json& j);

struct MeasureCall {
  evaluator::EvalRequest common;  // with its baseline cubin
  std::vector<search::MeasureItem> items;
};
nlohmann::json measure_call_to_json(const MeasureCall& c);
MeasureCall measure_call_from_json(const nlohmann::json& j);

nlohmann::json reports_to_json(const std::vector<evaluator::EvalReport>& reports);
std::vector<evaluator::EvalReport> reports_from_json(const nlohmann::json& j);

nlohmann::json environment_to_json(const tracedb::Environment& e);
tracedb::Environment environment_from_json(const nlohmann::json& j);

}  // namespace ptxevo::cluster
