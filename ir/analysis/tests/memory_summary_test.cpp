#include "ir/analysis/memory_summary.hpp"

#include <gtest/gtest.h>

#include "ir/analysis/tests/test_helpers.hpp"

namespace ptxevo::ir {
namespace {

constexpr const char* kBody = R"(
  .reg .pred %p<2>;
  .reg .b32 %r<12>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, 0;
LOOP:
  ld.global.nc.L1::no_allocate.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];
  ld.global.nc.L1::no_allocate.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+16];
  cp.async.cg.shared.global.L2::128B [%r2], [%rd1], 16;
  ld.global.L2::cache_hint.b32 %r3, [%rd1], %rd2;
  ld.shared::cluster.u32 %r4, [%r2];
  add.s32 %r1, %r1, 1;
  setp.lt.s32 %p1, %r1, 8;
  @%p1 bra LOOP;
  st.global.cs.v2.f32 [%rd1], {%f1, %f2};
  st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%r2], {%r5, %r6, %r7, %r8}, [%r9];
  stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r2], {%r5, %r6};
  atom.global.cas.b64 %rd3, [%rd1], %rd2, %rd3;
  cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd1], [%r2], %r10;
  ld.u8 %r11, [%rd1];
  ret;
)";

TEST(MemorySummary, SpacesDirectionsWidthsCacheOpsAndLoops) {
  const Module m = test::parse(test::kernel(kBody));
  const Function& f = test::function(m, "k");
  const MemorySummary s = summarize_memory(f);
  ASSERT_EQ(s.accesses.size(), 12u);

  const MemoryAccess& param = s.accesses[0];
  EXPECT_EQ(param.space, MemSpace::Param);
  EXPECT_EQ(param.width_bits, 64);
  EXPECT_EQ(param.loop_depth, 0);
  EXPECT_EQ(param.loop, -1);

  const MemoryAccess& vec = s.accesses[1];
  EXPECT_EQ(vec.space, MemSpace::Global);
  EXPECT_EQ(vec.direction, MemDirection::Load);
  EXPECT_EQ(vec.width_bits, 128);
  EXPECT_EQ(vec.cache, ".nc.L1::no_allocate");
  EXPECT_EQ(vec.loop_depth, 1);
  EXPECT_EQ(vec.loop, 0);

  const MemoryAccess& cp = s.accesses[3];
  EXPECT_EQ(cp.space, MemSpace::Shared);
  ASSERT_TRUE(cp.source.has_value());
  EXPECT_EQ(*cp.source, MemSpace::Global);
  EXPECT_EQ(cp.direction, MemDirection::Async);
  EXPECT_EQ(cp.width_bits, 128);
  EXPECT_EQ(cp.cache, ".cg.L2::128B");

  EXPECT_EQ(s.accesses[4].cache, ".L2::cache_hint");
  EXPECT_EQ(s.accesses[4].width_bits, 32);
  EXPECT_EQ(s.accesses[5].space, MemSpace::SharedCluster);
  EXPECT_FALSE(s.accesses[5].source.has_value());

  const MemoryAccess& st = s.accesses[6];
  EXPECT_EQ(st.direction, MemDirection::Store);
  EXPECT_EQ(st.width_bits, 64);
  EXPECT_EQ(st.cache, ".cs");
  EXPECT_EQ(st.loop_depth, 0);

  const MemoryAccess& sta = s.accesses[7];
  EXPECT_EQ(sta.space, MemSpace::SharedCluster);
  EXPECT_EQ(sta.direction, MemDirection::Async);
  EXPECT_EQ(sta.width_bits, 128);
  EXPECT_EQ(sta.cache, "");

  EXPECT_EQ(s.accesses[8].direction, MemDirection::Store);  // stmatrix .x2: two 32-bit registers
  EXPECT_EQ(s.accesses[8].width_bits, 64);
  EXPECT_EQ(s.accesses[9].direction, MemDirection::Atomic);
  EXPECT_EQ(s.accesses[9].width_bits, 64);

  const MemoryAccess& bulk = s.accesses[10];  // TMA-style reduction: global <- shared, size at run time
  EXPECT_EQ(bulk.space, MemSpace::Global);
  EXPECT_EQ(*bulk.source, MemSpace::Shared);
  EXPECT_EQ(bulk.width_bits, 0);

  EXPECT_EQ(s.accesses[11].space, MemSpace::Generic);
  EXPECT_EQ(s.accesses[11].width_bits, 8);
  EXPECT_EQ(s.accesses[11].statement, test::find_instruction(f, "ld.u8"));
}

TEST(MemorySummary, GroupsCountIdenticalAccesses) {
  const Module m = test::parse(test::kernel(kBody));
  const MemorySummary s = summarize_memory(test::function(m, "k"));
  const MemoryAccessKey vec{MemSpace::Global, std::nullopt, MemDirection::Load, 128, ".nc.L1::no_allocate", 1};
  ASSERT_EQ(s.groups.count(vec), 1u);
  EXPECT_EQ(s.groups.at(vec), 2u);  // the two v4 loads in the loop
  std::size_t total = 0;
  for (const auto& [key, n] : s.groups) total += n;
  EXPECT_EQ(total, s.accesses.size());
  EXPECT_EQ(s.groups.size(), 11u);  // 12 accesses, one pair merged
}

TEST(MemorySummary, WidthsOfCopiesAndFragments) {
  const Module m = test::parse(test::kernel(R"(
  .reg .b32 %r<12>;
  .reg .f32 %f<9>;
  .reg .b64 %rd<4>;
  cp.async.cg.shared.global [%r1], [%rd1], 0x10, %r2;
  cp.async.ca.shared.global [%r1], [%rd1], 8;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 4096, [%r3];
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], %r4, [%r3];
  cp.async.bulk.prefetch.L2.global [%rd1], 256;
  wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, [%r9], %r10;
  wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rd1], {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, %r10;
  ret;
)"));
  const MemorySummary s = summarize_memory(test::function(m, "k"));
  ASSERT_EQ(s.accesses.size(), 7u);
  EXPECT_EQ(s.accesses[0].width_bits, 128);  // hex cp-size
  EXPECT_EQ(s.accesses[1].width_bits, 64);
  EXPECT_EQ(s.accesses[2].width_bits, 4096 * 8);
  EXPECT_EQ(s.accesses[2].space, MemSpace::SharedCluster);
  EXPECT_EQ(s.accesses[3].width_bits, 0);  // size in a register
  EXPECT_EQ(s.accesses[4].width_bits, 256 * 8);
  EXPECT_EQ(s.accesses[4].space, MemSpace::Global);
  EXPECT_FALSE(s.accesses[4].source.has_value());
  EXPECT_EQ(s.accesses[5].width_bits, 256);
  EXPECT_EQ(s.accesses[5].direction, MemDirection::Load);
  EXPECT_EQ(s.accesses[5].space, MemSpace::Shared);
  EXPECT_EQ(s.accesses[6].width_bits, 256);
  EXPECT_EQ(s.accesses[6].direction, MemDirection::Store);
  EXPECT_EQ(s.accesses[6].space, MemSpace::Global);
}

TEST(MemorySummary, CacheModifierRecognition) {
  EXPECT_TRUE(is_cache_modifier(".ca"));
  EXPECT_TRUE(is_cache_modifier(".lu"));
  EXPECT_TRUE(is_cache_modifier(".L1::evict_last"));
  EXPECT_TRUE(is_cache_modifier(".L2::256B"));
  EXPECT_FALSE(is_cache_modifier(".global"));
  EXPECT_FALSE(is_cache_modifier(".v4"));
  EXPECT_FALSE(is_cache_modifier(".relaxed"));
}

}  // namespace
}  // namespace ptxevo::ir
