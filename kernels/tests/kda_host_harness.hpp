// How the KDA kernel-on-host tests run a compiled configuration: inputs drawn as the gate draws
// them, the emulated launch (fused, or prepare + recurrence through a NaN-poisoned workspace), and
// the check against the op's fp64 recurrent reference. Included after the configurations.
#pragma once

#include <gtest/gtest.h>

#include "kernels/tests/kda_host_emulation.hpp"

namespace kda_host_test {


using ptxevo::evaluator::Distribution;
using ptxevo::evaluator::HostTensor;
using ptxevo::evaluator::OpConfig;
using ptxevo::evaluator::Shape;
using ptxevo::kernels::KdaFwdOp;
using I = std::int64_t;
using ptxevo::evaluator::Knobs;

// One compiled configuration: its body, layout size, knobs and the options it was built for.
template <typename Args>
struct Config {
  const char* name;
  OpConfig options;
  ptxevo::evaluator::Knobs knobs;
  int threads, bv, smem_bytes;
  unsigned char* smem;
  void (*body)(const Args&);
};

#define KDA_CONFIG(NS, OPTIONS, KNOBS)                                                                       \
  Config<NS::kda_chunked::Args> {                                                                            \
#NS, OPTIONS, KNOBS, NS::kda_chunked::kThreads, NS::kda_chunked::kBv, NS::kda_chunked::kSmemBytes,       \
        NS::kda_chunked::smem, [](const NS::kda_chunked::Args& a) { NS::kda_chunked::kda_chunked_body(a); } \
  }

struct Outcome {
  std::string fault;
  double out = 0, state = 0;
};

template <typename Args>
Outcome run(const Config<Args>& c, const Shape& s, Distribution dist, std::uint64_t seed) {
  const KdaFwdOp op;
  const auto descs = op.tensors(s, c.options);
  std::vector<HostTensor> ts;
  for (const auto& d : descs) ts.emplace_back(d.name, d.dtype, d.shape);
  ptxevo::evaluator::fill_inputs(op, descs, dist, seed, ts);
  std::vector<HostTensor> ref;
  op.reference(s, c.options, ts, ref);
  const auto plan = op.launch_plan(s, c.options, c.knobs).kernels.at(0);
  Outcome o;
  if (plan.block.x != static_cast<unsigned>(c.threads) || plan.grid.z != static_cast<unsigned>(128 / c.bv) ||
      plan.shared_bytes != static_cast<unsigned>(c.smem_bytes)) {
    o.fault = "the op's plan (block " + std::to_string(plan.block.x) + ", " + std::to_string(plan.shared_bytes) +
              " B) disagrees with the kernel (" + std::to_string(c.threads) + ", " + std::to_string(c.smem_bytes) + " B)";
    return o;
  }
  auto find = [&](const std::string& name) -> HostTensor* {
    for (auto& t : ts)
      if (t.name == name) return &t;
    return nullptr;
  };
  auto bf = [&](const char* name) { return reinterpret_cast<const __nv_bfloat16*>(find(name)->data.data()); };
  auto f32 = [&](const char* name) {
    HostTensor* t = find(name);
    return t ? reinterpret_cast<const float*>(t->data.data()) : nullptr;
  };
  // Outputs poisoned with NaN: an element the kernel does not write fails the comparison.
  HostTensor* out = find("out");
  HostTensor* fin = find("final_state");
  std::memset(out->data.data(), 0xff, out->data.size());
  if (fin) std::memset(fin->data.data(), 0xff, fin->data.size());
  const HostTensor* cu = find("cu_seqlens");
  const Args a{bf("q"),
               bf("k"),
               bf("v"),
               bf("g"),
               bf("beta"),
               f32("A_log"),
               f32("dt_bias"),
               cu ? reinterpret_cast<const long long*>(cu->data.data()) : nullptr,
               f32("initial_state"),
               reinterpret_cast<__nv_bfloat16*>(out->data.data()),
               fin ? reinterpret_cast<float*>(fin->data.data()) : nullptr,
               std::get<I>(plan.args.at(11)),
               std::get<std::int32_t>(plan.args.at(12)),
               std::get<float>(plan.args.at(13)),
               std::get<float>(plan.args.at(14))};
  std::memset(c.smem + c.smem_bytes, 0xa5, kSmemCap + kGuard - static_cast<std::size_t>(c.smem_bytes));
  for (unsigned x = 0; x < plan.grid.x && o.fault.empty(); ++x)
    for (unsigned y = 0; y < plan.grid.y && o.fault.empty(); ++y)
      for (unsigned z = 0; z < plan.grid.z && o.fault.empty(); ++z) {
        // Shared memory starts as garbage on a GPU: the kernel must not read what it did not write.
        std::memset(c.smem, 0x7f, static_cast<std::size_t>(c.smem_bytes));
        kda_host::run_cta(c.threads, {x, y, z}, plan.shared_bytes, [&] { c.body(a); });
        o.fault = kda_host::g_cta.fault;
        kda_host::g_cta.fault.clear();
      }
  for (std::size_t i = static_cast<std::size_t>(c.smem_bytes); i < kSmemCap + kGuard; ++i)
    if (c.smem[i] != 0xa5 && o.fault.empty()) o.fault = "write past the shared-memory layout at byte " + std::to_string(i);
  auto rel = [](const HostTensor& x, const HostTensor& r) {
    double d = 0, n = 0;
    for (I i = 0; i < r.numel(); ++i) {
      const double v = x.get(i), w = r.get(i);
      if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
      d += (v - w) * (v - w);
      n += w * w;
    }
    return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
  };
  o.out = rel(*out, ref.at(0));
  if (fin) o.state = rel(*fin, ref.at(1));
  return o;
}

inline Shape shape(I b, I t, I h, I n) { return {{"B", b}, {"T", t}, {"H", h}, {"N", n}}; }

template <typename Args>
void check(const Config<Args>& c, const std::vector<Shape>& extra = {}) {
  std::vector<Shape> shapes = {shape(1, 1, 1, 1),  shape(1, 17, 4, 1), shape(1, 65, 1, 1), shape(3, 17, 1, 3),
                               shape(1, 2, 4, 2),  shape(1, 40, 1, 4), shape(1, 115, 2, 3), shape(1, 241, 4, 7)};
  shapes.insert(shapes.end(), extra.begin(), extra.end());
  const auto& dists = ptxevo::evaluator::all_distributions();
  double worst_out = 0, worst_state = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Distribution dist = dists[i % dists.size()];
    const Outcome o = run(c, shapes[i], dist, 1000 + i);
    SCOPED_TRACE(std::string(c.name) + " " + ptxevo::evaluator::shape_to_string(shapes[i]) + " " + to_string(dist));
    ASSERT_EQ(o.fault, "");
    EXPECT_LT(o.out, 5e-3);
    EXPECT_LT(o.state, 5e-3);
    worst_out = std::max(worst_out, o.out);
    worst_state = std::max(worst_state, o.state);
  }
  std::printf("%s (kda_fwd_chunked.cu on the CPU) vs fp64 recurrence, worst rel_l2: out %.3g, final_state %.3g\n",
              c.name, worst_out, worst_state);
}


// The prepare + recurrence pair (FUSED = 0) of one compiled configuration.
template <typename Args>
struct SplitConfig {
  const char* name;
  OpConfig options;
  ptxevo::evaluator::Knobs knobs;
  int prep_threads, rec_threads, prep_smem, rec_smem, chunk, ws_chunk_bytes, u0_bits, ksplit, wy_in_recurrence;
  unsigned char* smem;
  void (*prepare)(const Args&, unsigned char*, int);
  void (*recurrence)(const Args&, const unsigned char*, int, int, int);
  void (*reset)(const Args&, unsigned char*, int);  // kda_fwd_flags_reset (plans with PREPARE_CTAS > 0)
  void (*combine)(const Args&, unsigned char*, int, int);  // kda_fwd_seg_combine (plans with SEQSPLIT > 1)
};

#define KDA_SPLIT_CONFIG(NS, OPTIONS, KNOBS)                                                                     \
  SplitConfig<NS::kda_chunked::Args> {                                                                           \
#NS, OPTIONS, KNOBS, NS::kda_chunked::kPThreads, NS::kda_chunked::kRThreads, NS::kda_chunked::kPSmemBytes,   \
        NS::kda_chunked::kRSmemTotal, NS::kda_chunked::kC, NS::kda_chunked::kWsChunkBytes,                      \
        NS::kda_chunked::kUBytes * 8, NS::kda_chunked::kKs, NS::kda_chunked::kWyInRecurrence,                    \
        NS::kda_chunked::smem,                                                                                   \
        [](const NS::kda_chunked::Args& a, unsigned char* ws, int n) { NS::kda_chunked::kda_prepare_body(a, ws, n); }, \
        [](const NS::kda_chunked::Args& a, const unsigned char* ws, int n, int segs, int pass) {               \
          NS::kda_chunked::kda_recurrence_body(a, ws, n, segs, pass);                                            \
        },                                                                                                       \
        [](const NS::kda_chunked::Args& a, unsigned char* ws, int n) { NS::kda_chunked::kda_flags_reset_body(a, ws, n); }, \
        [](const NS::kda_chunked::Args& a, unsigned char* ws, int n, int segs) {                                 \
          NS::kda_chunked::kda_seg_combine_body(a, ws, n, segs);                                                 \
        }                                                                                                        \
  }

// Runs every CTA of a launch of `threads` threads: garbage-filled shared memory before each, the
// guard bytes past the layout checked after all.
inline std::string run_grid(const ptxevo::evaluator::KernelLaunch& l, int threads, int smem_bytes, unsigned char* smem,
                            const std::function<void()>& body) {
  std::string fault;
  std::memset(smem + smem_bytes, 0xa5, kSmemCap + kGuard - static_cast<std::size_t>(smem_bytes));
  kda_host::g_cta.grid = {l.grid.x, l.grid.y, l.grid.z};
  for (unsigned x = 0; x < l.grid.x && fault.empty(); ++x)
    for (unsigned y = 0; y < l.grid.y && fault.empty(); ++y)
      for (unsigned z = 0; z < l.grid.z && fault.empty(); ++z) {
        std::memset(smem, 0x7f, static_cast<std::size_t>(smem_bytes));
        kda_host::run_cta(threads, {x, y, z}, l.shared_bytes, body);
        fault = kda_host::g_cta.fault;
        kda_host::g_cta.fault.clear();
      }
  for (std::size_t i = static_cast<std::size_t>(smem_bytes); i < kSmemCap + kGuard; ++i)
    if (smem[i] != 0xa5 && fault.empty()) fault = "write past the shared-memory layout at byte " + std::to_string(i);
  return fault;
}

template <typename Args>
Outcome run_split(const SplitConfig<Args>& c, const Shape& s, Distribution dist, std::uint64_t seed) {
  const KdaFwdOp op;
  const auto descs = op.tensors(s, c.options);
  std::vector<HostTensor> ts;
  for (const auto& d : descs) ts.emplace_back(d.name, d.dtype, d.shape);
  ptxevo::evaluator::fill_inputs(op, descs, dist, seed, ts);
  std::vector<HostTensor> ref;
  op.reference(s, c.options, ts, ref);
  const auto plan = op.launch_plan(s, c.options, c.knobs);
  Outcome o;
  // SEQSPLIT > 1 (where the shape's chains are few): prepare, recurrence pass 1, combine, pass 3.
  const bool segmented = plan.kernels.size() == 4;
  if (segmented) {
    const auto& k = plan.kernels;
    if (k[0].entry != KdaFwdOp::kPrepareEntry || k[1].entry != KdaFwdOp::kRecurrenceEntry ||
        k[2].entry != KdaFwdOp::kSegCombineEntry || k[3].entry != KdaFwdOp::kRecurrenceEntry ||
        k[1].args.size() != 13 || std::get<std::int32_t>(k[1].args.at(12)) != 1 ||
        std::get<std::int32_t>(k[3].args.at(12)) != 3 || k[1].grid.z != 2 * k[3].grid.z ||
        k[1].grid.x != k[3].grid.x || k[2].block.x != 256 || k[2].grid.z != 16) {
      o.fault = "the op's SEQSPLIT plan is not kda_fwd_prepare, recurrence pass 1 over 256 columns, "
                "kda_fwd_seg_combine, recurrence pass 3";
      return o;
    }
  }
  std::vector<ptxevo::evaluator::KernelLaunch> kernels = plan.kernels;
  if (segmented) kernels.erase(kernels.begin() + 1, kernels.begin() + 3);  // checked as prepare + pass 3
  // PREPARE_CTAS > 0 puts the flag reset first and launches the recurrence programmatically.
  const bool overlap = kernels.size() == 3;
  if (overlap && (kernels[0].entry != KdaFwdOp::kFlagsResetEntry || !kernels[2].programmatic ||
                  kernels[1].programmatic || kernels[1].grid.y != 1)) {
    o.fault = "the op's PREPARE_CTAS plan is not kda_fwd_flags_reset, a persistent kda_fwd_prepare, then a "
              "programmatic kda_fwd_recurrence";
    return o;
  }
  if (kernels.size() != 2 + (overlap ? 1 : 0) || kernels[overlap].entry != KdaFwdOp::kPrepareEntry ||
      kernels[1 + overlap].entry != KdaFwdOp::kRecurrenceEntry || (!overlap && kernels[1].programmatic)) {
    o.fault = "the op's plan is not kda_fwd_prepare then kda_fwd_recurrence";
    return o;
  }
  const auto& prep = kernels[overlap];
  const auto& rec = kernels[1 + overlap];
  if (prep.block.x != static_cast<unsigned>(c.prep_threads) || prep.shared_bytes != static_cast<unsigned>(c.prep_smem) ||
      rec.block.x != static_cast<unsigned>(c.rec_threads) || rec.shared_bytes != static_cast<unsigned>(c.rec_smem) ||
      rec.grid.z != static_cast<unsigned>(128 / (c.rec_threads / 2 / c.ksplit))) {
    o.fault = "the op's plan (prepare block " + std::to_string(prep.block.x) + ", " + std::to_string(prep.shared_bytes) +
              " B; recurrence block " + std::to_string(rec.block.x) + ", " + std::to_string(rec.shared_bytes) +
              " B) disagrees with the kernels (" + std::to_string(c.prep_threads) + ", " + std::to_string(c.prep_smem) +
              " B; " + std::to_string(c.rec_threads) + ", " + std::to_string(c.rec_smem) + " B)";
    return o;
  }
  if (KdaFwdOp::workspace_chunk_bytes(c.chunk, c.u0_bits, c.wy_in_recurrence) != c.ws_chunk_bytes) {
    o.fault = "KdaFwdOp::workspace_chunk_bytes disagrees with the kernel's kWsChunkBytes";
    return o;
  }
  auto find = [&](const std::string& name) -> HostTensor* {
    for (auto& t : ts)
      if (t.name == name) return &t;
    return nullptr;
  };
  auto bf = [&](const char* name) { return reinterpret_cast<const __nv_bfloat16*>(find(name)->data.data()); };
  auto f32 = [&](const char* name) {
    HostTensor* t = find(name);
    return t ? reinterpret_cast<const float*>(t->data.data()) : nullptr;
  };
  HostTensor* out = find("out");
  HostTensor* fin = find("final_state");
  HostTensor* ws = find("workspace");
  // NaN poison in the outputs and the workspace: an unwritten element, or a workspace byte read
  // before the prepare wrote it, fails the comparison.
  std::memset(out->data.data(), 0xff, out->data.size());
  if (fin) std::memset(fin->data.data(), 0xff, fin->data.size());
  std::memset(ws->data.data(), 0xff, ws->data.size());
  const HostTensor* cu = find("cu_seqlens");
  const auto* cup = cu ? reinterpret_cast<const long long*>(cu->data.data()) : nullptr;
  const int nseq = std::get<std::int32_t>(prep.args.at(11));
  const Args pa{bf("q"), bf("k"), bf("v"), bf("g"), bf("beta"), f32("A_log"), f32("dt_bias"), cup, nullptr, nullptr,
                nullptr, std::get<I>(prep.args.at(9)), std::get<std::int32_t>(prep.args.at(10)),
                std::get<float>(prep.args.at(12)), std::get<float>(prep.args.at(13))};
  if (rec.args.size() != 13 || std::get<ptxevo::evaluator::ArgTensor>(rec.args.at(10)).name != "v") {
    o.fault = "the recurrence's launch does not pass v, then the segment count and pass";
    return o;
  }
  const int segs = std::get<std::int32_t>(rec.args.at(11));
  if ((segs > 1) != segmented || (!segmented && std::get<std::int32_t>(rec.args.at(12)) != 0)) {
    o.fault = "the recurrence's segment count or pass disagrees with the plan";
    return o;
  }
  const Args ra{nullptr,
                nullptr,
                bf("v"),
                nullptr,
                nullptr,
                nullptr,
                nullptr,
                cup,
                f32("initial_state"),
                reinterpret_cast<__nv_bfloat16*>(out->data.data()),
                fin ? reinterpret_cast<float*>(fin->data.data()) : nullptr,
                std::get<I>(rec.args.at(5)),
                std::get<std::int32_t>(rec.args.at(6)),
                std::get<float>(rec.args.at(8)),
                std::get<float>(rec.args.at(9))};
  if (std::get<std::int32_t>(rec.args.at(7)) != nseq || static_cast<unsigned>(pa.H) != rec.grid.y) {
    o.fault = "the prepare and the recurrence get different sequence or head counts";
    return o;
  }
  // The workspace must hold the slots (and with PREPARE_CTAS their flags).
  const std::uint64_t total = cup ? static_cast<std::uint64_t>(pa.T) : static_cast<std::uint64_t>(nseq) * pa.T;
  const std::uint64_t slots = static_cast<std::uint64_t>(nseq) + total / static_cast<std::uint64_t>(c.chunk);
  const std::uint64_t heads = static_cast<std::uint64_t>(pa.H);
  if (!overlap && (prep.grid.x != slots || prep.grid.y != heads)) {
    o.fault = "the prepare's grid is not (chunk slots, heads)";
    return o;
  }
  if (heads * slots * (static_cast<std::uint64_t>(c.ws_chunk_bytes) + (overlap ? 4 : 0)) > ws->data.size()) {
    o.fault = "the workspace is smaller than the prepare's slots";
    return o;
  }
  auto* wsp = reinterpret_cast<unsigned char*>(ws->data.data());
  kda_host::g_flag_waits.clear();
  if (overlap) {
    const auto& reset = plan.kernels[0];
    const std::vector<ptxevo::evaluator::KernelArg> want = {ptxevo::evaluator::ArgTensor{"workspace"},
                                                            ptxevo::evaluator::ArgTensor{cu ? "cu_seqlens" : ""},
                                                            std::int64_t{pa.T}, std::int32_t{pa.H}, std::int32_t{nseq}};
    if (reset.args.size() != want.size() || reset.block.x != 256 ||
        std::get<std::int64_t>(reset.args.at(2)) != pa.T || std::get<std::int32_t>(reset.args.at(3)) != pa.H ||
        std::get<std::int32_t>(reset.args.at(4)) != nseq ||
        std::get<ptxevo::evaluator::ArgTensor>(reset.args.at(1)).name != (cu ? "cu_seqlens" : "")) {
      o.fault = "the flag reset's launch disagrees with the kernel";
      return o;
    }
    o.fault = run_grid(reset, 256, 0, c.smem, [&] { c.reset(pa, wsp, nseq); });
  }
  if (o.fault.empty())
    o.fault = run_grid(prep, c.prep_threads, c.prep_smem, c.smem, [&] { c.prepare(pa, wsp, nseq); });
  if (segmented && o.fault.empty()) {
    // Pass 1, the combine, pass 3; the segment states past the flags must fit the workspace.
    const std::uint64_t seg_at = (heads * slots * (static_cast<std::uint64_t>(c.ws_chunk_bytes) + 4) + 15) / 16 * 16;
    if (seg_at + static_cast<std::uint64_t>(nseq) * heads * static_cast<std::uint64_t>(segs - 1) * 256 * 128 * 4 >
        ws->data.size()) {
      o.fault = "the workspace is smaller than the sequence split's segment states";
      return o;
    }
    const auto& comb = plan.kernels[2];
    if (std::get<std::int32_t>(comb.args.at(5)) != segs || std::get<std::int32_t>(comb.args.at(4)) != nseq) {
      o.fault = "the combine's segment or sequence count disagrees with the recurrence's";
      return o;
    }
    o.fault = run_grid(plan.kernels[1], c.rec_threads, c.rec_smem, c.smem, [&] { c.recurrence(ra, wsp, nseq, segs, 1); });
    if (o.fault.empty())
      o.fault = run_grid(comb, 256, static_cast<int>(comb.shared_bytes), c.smem, [&] { c.combine(pa, wsp, nseq, segs); });
    if (o.fault.empty())
      o.fault = run_grid(rec, c.rec_threads, c.rec_smem, c.smem, [&] { c.recurrence(ra, wsp, nseq, segs, 3); });
  } else if (o.fault.empty()) {
    o.fault = run_grid(rec, c.rec_threads, c.rec_smem, c.smem, [&] { c.recurrence(ra, wsp, nseq, 1, 0); });
  }
  if (overlap && o.fault.empty()) {
    // Every released chunk waited on by each of its chain's value slices, nothing else waited on.
    const auto* flags = reinterpret_cast<const unsigned int*>(wsp + heads * slots * static_cast<std::uint64_t>(c.ws_chunk_bytes));
    std::size_t waited = 0;
    for (std::uint64_t i = 0; i < heads * slots && o.fault.empty(); ++i) {
      const auto it = kda_host::g_flag_waits.find(flags + i);
      const int n = it == kda_host::g_flag_waits.end() ? 0 : it->second;
      waited += n > 0 ? 1 : 0;
      if (flags[i] == 1u && n != static_cast<int>(rec.grid.z))
        o.fault = "chunk flag " + std::to_string(i) + " waited on " + std::to_string(n) + " times, not once a value slice";
      else if (flags[i] != 1u && flags[i] != 0u)
        o.fault = "chunk flag " + std::to_string(i) + " neither reset nor released";
    }
    if (o.fault.empty() && waited != kda_host::g_flag_waits.size()) o.fault = "the recurrence waited outside the flags";
  }
  auto rel = [](const HostTensor& x, const HostTensor& r) {
    double d = 0, n = 0;
    for (I i = 0; i < r.numel(); ++i) {
      const double v = x.get(i), w = r.get(i);
      if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
      d += (v - w) * (v - w);
      n += w * w;
    }
    return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
  };
  o.out = rel(*out, ref.at(0));
  if (fin) o.state = rel(*fin, ref.at(1));
  return o;
}

// The eight shapes below plus `extra`, or (only_extra) `extra` alone.
template <typename Args>
void check_split(const SplitConfig<Args>& c, const std::vector<Shape>& extra = {}, bool only_extra = false) {
  std::vector<Shape> shapes = {shape(1, 1, 1, 1),  shape(1, 17, 4, 1), shape(1, 65, 1, 1), shape(3, 17, 1, 3),
                               shape(1, 2, 4, 2),  shape(1, 40, 1, 4), shape(1, 115, 2, 3), shape(1, 241, 4, 7)};
  if (only_extra) shapes.clear();
  shapes.insert(shapes.end(), extra.begin(), extra.end());
  const auto& dists = ptxevo::evaluator::all_distributions();
  double worst_out = 0, worst_state = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Distribution dist = dists[i % dists.size()];
    const Outcome o = run_split(c, shapes[i], dist, 2000 + i);
    SCOPED_TRACE(std::string(c.name) + " " + ptxevo::evaluator::shape_to_string(shapes[i]) + " " + to_string(dist));
    ASSERT_EQ(o.fault, "");
    EXPECT_LT(o.out, 5e-3);
    EXPECT_LT(o.state, 5e-3);
    worst_out = std::max(worst_out, o.out);
    worst_state = std::max(worst_state, o.state);
  }
  std::printf("%s (kda_fwd_prepare + kda_fwd_recurrence on the CPU) vs fp64 recurrence, worst rel_l2: out %.3g, "
              "final_state %.3g\n",
              c.name, worst_out, worst_state);
}


}  // namespace kda_host_test
