// tracedb/queries.hpp on a small recorded campaign: each query returns what was recorded.
#include "tracedb/queries.hpp"

#include <gtest/gtest.h>

#include <string>

#include "tracedb/report_queries.hpp"
#include "tracedb/tests/sample_reports.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::tracedb {
namespace {

using testing::sample_report;
using testing::TempDbPath;

class QueriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_.emplace(TraceDb::open(tmp_.db()));
    campaign_ = db_->open_campaign({"rmsnorm.spec#sm_90a#gpu", "hash-a", "rmsnorm", "sm_90a", R"({"spec":"x.spec"})"}).id;
    env_ = db_->record_environment({"NVIDIA H200", "580.65", "13.0", "{}", "{}"});
    // A seed that passes, a PTX child that a pass refused, a knob child that fails the gate.
    seed_ = add("seed", "seed", std::nullopt);
    db_->record_build(seed_, {true, "ptx-seed", "done", "", R"([{"function":"k","registers":40}])", ""});
    db_->record_evaluation(seed_, env_, sample_report(1.0));
    refused_ = add("edit", "ptx:max_registers", seed_);
    db_->record_build(refused_, {false, "", "pass", "pass-refused: max_registers: nothing to rewrite", "{}", ""});
    failed_ = add("knob", "knob_step", seed_);
    db_->record_build(failed_, {true, "ptx-knob", "done", "", "{}", ""});
    db_->record_evaluation(failed_, env_, sample_report(0.0, "fail"));
  }
  std::int64_t add(const std::string& name, const std::string& op, std::optional<std::int64_t> parent) {
    return db_->record_candidate(campaign_, {"hash-" + name, R"({"seed":"s","knobs":{}})", parent, op}).id;
  }
  sqlite::Connection& c() { return db_->connection(); }

  TempDbPath tmp_;
  std::optional<TraceDb> db_;
  std::int64_t campaign_ = 0, env_ = 0, seed_ = 0, refused_ = 0, failed_ = 0;
};

TEST_F(QueriesTest, CampaignsAndTheirCandidates) {
  EXPECT_EQ(campaign_arch(c(), campaign_), "sm_90a");
  EXPECT_EQ(campaign_arch(c(), 99), std::nullopt);
  EXPECT_EQ(campaign_config_json(c(), campaign_), R"({"spec":"x.spec"})");
  ASSERT_EQ(campaigns_of_op(c(), "rmsnorm").size(), 1u);
  EXPECT_EQ(campaigns_of_op(c(), "rmsnorm")[0].spec_hash, "hash-a");
  EXPECT_TRUE(campaigns_of_op(c(), "kda").empty());
  EXPECT_EQ(latest_gpu_campaign(c(), "", ""), campaign_);
  EXPECT_EQ(latest_gpu_campaign(c(), "rmsnorm", "sm_100a"), std::nullopt);
  EXPECT_EQ(latest_campaign(c()), campaign_);
  EXPECT_TRUE(campaign_exists(c(), campaign_));
  EXPECT_FALSE(campaign_exists(c(), campaign_ + 1));
  EXPECT_TRUE(is_trace_database(c()));
  const auto summaries = campaign_summaries(c());
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_EQ(summaries[0].passing, 1);
  EXPECT_EQ(summaries[0].environment, "NVIDIA H200, driver 580.65, 13.0");
  EXPECT_EQ(candidate_with_genome(c(), campaign_, "hash-edit"), refused_);
  EXPECT_EQ(candidate_with_genome(c(), campaign_, "hash-none"), std::nullopt);
  EXPECT_EQ(genome_hashes(c(), campaign_), (std::vector<std::string>{"hash-seed", "hash-edit", "hash-knob"}));
  EXPECT_EQ(count_unmeasured(c(), campaign_), 0);
  db_->settle_candidate(add("gone", "knob_reset", seed_), "unmeasured");
  EXPECT_EQ(count_unmeasured(c(), campaign_), 1);
}

TEST_F(QueriesTest, WhatAResumedCampaignReadsBack) {
  const auto gates = gate_outcomes(c(), campaign_);
  ASSERT_EQ(gates.size(), 2u);
  EXPECT_TRUE(gates[0].passed);
  EXPECT_FALSE(gates[1].passed);
  const auto edits = edit_builds(c(), campaign_);
  ASSERT_EQ(edits.size(), 1u);  // only PTX-edit children and random genomes
  EXPECT_EQ(edits[0].operator_name, "ptx:max_registers");
  EXPECT_EQ(edits[0].parent_id, seed_);
  EXPECT_FALSE(edits[0].built);
  EXPECT_EQ(edits[0].stage, "pass");
  EXPECT_EQ(edits[0].log_head.rfind("pass-refused: max_registers", 0), 0u);
  EXPECT_TRUE(latest_passing_report(c(), seed_).has_value());
  EXPECT_FALSE(latest_passing_report(c(), failed_).has_value());
}

TEST_F(QueriesTest, ProvenanceOfTheWinner) {
  ASSERT_TRUE(winner_row(c(), campaign_));
  EXPECT_EQ(winner_row(c(), campaign_)->candidate_id, seed_);
  const auto origin = candidate_origin(c(), seed_);
  ASSERT_TRUE(origin);
  EXPECT_EQ(origin->spec_path, "rmsnorm.spec#sm_90a#gpu");
  EXPECT_EQ(origin->genome_hash, "hash-seed");
  const auto parent = candidate_parent(c(), failed_);
  ASSERT_TRUE(parent);
  EXPECT_EQ(parent->operator_name, "knob_step");
  EXPECT_EQ(parent->parent_id, seed_);
  const auto ev = latest_passing_evaluation(c(), seed_);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->gpu, "NVIDIA H200");
  EXPECT_EQ(shape_results(c(), ev->id).size(), sample_report(1.0).shapes.size());
  EXPECT_FALSE(latest_passing_evaluation(c(), failed_).has_value());
}

TEST_F(QueriesTest, EvidenceForTheAgents) {
  EXPECT_EQ(candidate_resources_json(c(), seed_), R"([{"function":"k","registers":40}])");
  const auto builds = recent_build_failures(c(), campaign_, 3);
  ASSERT_EQ(builds.size(), 1u);
  EXPECT_EQ(builds[0].operator_name, "ptx:max_registers");
  ASSERT_EQ(recent_gate_failures(c(), campaign_, 2).size(), 1u);
  const auto recent = recent_candidates(c(), campaign_, 2);
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].id, failed_);  // newest first
  EXPECT_EQ(recent[1].id, refused_);
  const auto tallies = operator_tallies(c(), campaign_, 8);
  ASSERT_EQ(tallies.size(), 2u);  // the seed is not an operator's child
  for (const auto& t : tallies) {
    EXPECT_EQ(t.children, 1);
    if (t.operator_name == "ptx:max_registers") EXPECT_EQ(t.build_failures, 1);
    else EXPECT_EQ(t.passed, 0);
  }
  EXPECT_TRUE(llm_ideas(c(), campaign_, 8).empty());
}

TEST_F(QueriesTest, OperatorStatsRoundTrip) {
  save_operator_stats(c(), {{"rmsnorm|sm_90a|knob_step", 3, 1}, {"rmsnorm|sm_90a|ptx:x", 1, 5}, {"*|*|knob_step", 4, 4}});
  save_operator_stats(c(), {{"rmsnorm|sm_90a|knob_step", 6, 2}});  // an update, not a second row
  const auto all = operator_stats(c());
  ASSERT_EQ(all.size(), 3u);
  const auto mine = operator_stats_with_prefix(c(), "rmsnorm|sm_90a|", 6);
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_EQ(mine[0].key, "rmsnorm|sm_90a|knob_step");  // most hits first
  EXPECT_DOUBLE_EQ(mine[0].hits, 6);
}

TEST_F(QueriesTest, CampaignFilesAreStoredOnce) {
  store_campaign_files(c(), campaign_, {{"spec", "a.spec", "h1", "spec text"}, {"seed", "a.cu", "h2", "kernel"}});
  store_campaign_files(c(), campaign_, {{"spec", "a.spec", "h3", "changed"}});  // kept as first recorded
  const auto files = campaign_files(c(), campaign_);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].role, "spec");
  EXPECT_EQ(files[0].content, "spec text");
  EXPECT_TRUE(campaign_files(c(), campaign_ + 1).empty());
}

}  // namespace
}  // namespace ptxevo::tracedb
