// The files a campaign ran from, kept in its trace database: stored once, restored anywhere, and
// refused when altered or when a name would leave the restore folder.
#include "search/campaign_files.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "campaign_fixture.hpp"
#include "declared_ops/declared_op.hpp"
#include "evaluator/build_cache.hpp"
#include "evaluator/template_source.hpp"
#include "tracedb/trace_db.hpp"

namespace ptxevo::search {
namespace {

namespace fs = std::filesystem;

class CampaignFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ptxevo_files_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    registry_.add(std::make_unique<testing::ScaleOp>());
    spec_ = testing::write_scale_spec(dir_ / "src", registry_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::int64_t campaign(tracedb::TraceDb& db) {
    tracedb::CampaignKey key;
    key.spec_path = "scale.spec#sm_90a#gpu";
    key.spec_hash = "h";
    key.op = "test_scale";
    key.arch = "sm_90a";
    return db.open_campaign(key).id;
  }
  fs::path dir_;
  evaluator::OpRegistry registry_;
  evaluator::Spec spec_;
};

TEST_F(CampaignFilesTest, TheSpecAndItsSeedsLoadFromTheDatabaseAloneAfterTheSourcesAreGone) {
  auto db = tracedb::TraceDb::open(dir_ / "t.db");
  const auto id = campaign(db);
  const auto files = spec_files(spec_);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].role, "spec");
  EXPECT_EQ(files[0].name, "scale.spec");
  EXPECT_EQ(files[1].name, "scale.cu");
  tracedb::store_campaign_files(db.connection(), id, files);
  tracedb::store_campaign_files(db.connection(), id, files);  // a resumed campaign stores them again: kept once
  EXPECT_EQ(tracedb::campaign_files(db.connection(), id).size(), 2u);
  fs::remove_all(dir_ / "src");

  EXPECT_THROW(load_campaign_spec(db.connection(), id + 1, "", registry_, dir_ / "scratch"), std::runtime_error);
  const auto r = load_campaign_spec(db.connection(), id, "", registry_, dir_ / "scratch");
  ASSERT_TRUE(r.spec) << r.error->format();
  EXPECT_EQ(r.spec->op, "test_scale");
  EXPECT_EQ(r.spec->benchmark_shapes, spec_.benchmark_shapes);
  ASSERT_EQ(r.spec->seeds.size(), 1u);
  std::ifstream seed(r.spec->seeds[0].source_path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(seed), {}), testing::kScaleTemplate);
}

TEST_F(CampaignFilesTest, TheSplitSeedsPartsAreKeptAndExpandAsBeforeAfterTheSourcesAreGone) {
  // The seed becomes a top file that includes its body from a part in a subfolder.
  fs::create_directories(dir_ / "src" / "parts");
  std::ofstream(dir_ / "src" / "parts" / "body.cuh") << testing::kScaleTemplate;
  std::ofstream(dir_ / "src" / "scale.cu", std::ios::trunc) << "// top\n#include \"parts/body.cuh\"\n";
  std::string why;
  const auto before = evaluator::read_template(spec_.seeds[0].source_path, &why);
  ASSERT_TRUE(before) << why;
  auto db = tracedb::TraceDb::open(dir_ / "t.db");
  const auto id = campaign(db);
  const auto files = spec_files(spec_);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[2].role, "seed");
  EXPECT_EQ(files[2].name, "parts/body.cuh");
  tracedb::store_campaign_files(db.connection(), id, files);
  fs::remove_all(dir_ / "src");
  const auto r = load_campaign_spec(db.connection(), id, "", registry_, dir_ / "scratch");
  ASSERT_TRUE(r.spec) << r.error->format();
  const auto after = evaluator::read_template(r.spec->seeds[0].source_path, &why);
  ASSERT_TRUE(after) << why;
  EXPECT_EQ(after->text, before->text);
  EXPECT_EQ(after->text, std::string("// top\n") + testing::kScaleTemplate);
}

TEST_F(CampaignFilesTest, SeedsAboveTheSpecsFolderAreRestoredInsideTheRestoreFolder) {
  auto db = tracedb::TraceDb::open(dir_ / "t.db");
  const auto id = campaign(db);
  tracedb::store_campaign_files(db.connection(), id,
                       {{"spec", "a.spec", evaluator::sha256_hex("s"), "s"},
                        {"seed", "../../k/b.cu", evaluator::sha256_hex("b"), "b"}});
  const auto spec = restore_campaign_files(db.connection(), id, dir_ / "root");
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(*spec, dir_ / "root" / "up" / "up" / "a.spec");
  EXPECT_TRUE(fs::exists(dir_ / "root" / "k" / "b.cu"));
}

TEST_F(CampaignFilesTest, AlteredOrEscapingFilesAreRefused) {
  auto db = tracedb::TraceDb::open(dir_ / "t.db");
  const auto id = campaign(db);
  tracedb::store_campaign_files(db.connection(), id, {{"spec", "a.spec", evaluator::sha256_hex("s"), "altered"}});
  try {
    restore_campaign_files(db.connection(), id, dir_ / "root");
    FAIL() << "an altered file was restored";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not match its sha256"), std::string::npos) << e.what();
  }
  auto db2 = tracedb::TraceDb::open(dir_ / "t2.db");
  const auto other = campaign(db2);
  tracedb::store_campaign_files(db2.connection(), other, {{"spec", "/etc/a.spec", evaluator::sha256_hex("s"), "s"}});
  EXPECT_THROW(restore_campaign_files(db2.connection(), other, dir_ / "root2"), std::runtime_error);
  EXPECT_FALSE(fs::exists("/etc/a.spec"));
}

// An op declared in a file: its declaration and reference are recorded with the spec (role
// "op"), so the campaign's spec loads from the database alone with a registry that never saw it.
TEST_F(CampaignFilesTest, AnOpDeclaredInAFileTravelsWithTheSpec) {
  const fs::path src = dir_ / "ops";
  fs::create_directories(src);
  for (const char* f : {"gelu_bias.spec", "gelu_bias.op.toml", "gelu_bias.cu", "gelu_bias_ref.cu"})
    fs::copy_file(fs::path(PTXEVO_SOURCE_DIR) / "examples/ops/gelu_bias" / f, src / f);
  const evaluator::OpRegistry ops(declared_ops::load_declared_op);
  const auto loaded = evaluator::load_spec((src / "gelu_bias.spec").string(), ops);
  ASSERT_TRUE(loaded.spec) << loaded.error->format();
  const auto files = spec_files(*loaded.spec, ops.find("gelu_bias"));
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[2].role, "op");
  EXPECT_EQ(files[2].name, "gelu_bias.op.toml");
  EXPECT_EQ(files[3].name, "gelu_bias_ref.cu");
  auto db = tracedb::TraceDb::open(dir_ / "t.db");
  const auto id = campaign(db);
  tracedb::store_campaign_files(db.connection(), id, files);
  fs::remove_all(src);
  const evaluator::OpRegistry fresh(declared_ops::load_declared_op);
  const auto r = load_campaign_spec(db.connection(), id, "", fresh, dir_ / "scratch");
  ASSERT_TRUE(r.spec) << r.error->format();
  EXPECT_EQ(r.spec->op, "gelu_bias");
  ASSERT_NE(fresh.find("gelu_bias"), nullptr);
  EXPECT_NE(fresh.find("gelu_bias")->device_reference_source({}).find("gelu_bias_ref"), std::string::npos);
}

}  // namespace
}  // namespace ptxevo::search
