#include "kernels/kda/kda_fwd_op.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <variant>

#include <tbb/parallel_for.h>

#include "kernels/kda/kda_device_reference.hpp"
#include "kernels/kda/kda_plan_source.hpp"

namespace ptxevo::kernels {

using evaluator::DType;
using evaluator::HostTensor;
using evaluator::Knobs;
using evaluator::OpConfig;
using evaluator::Role;
using evaluator::Shape;
using evaluator::TensorDesc;

namespace {

// The inputs every KDA kernel takes first, in this order (kernels/kda/README.md, "Kernel contract").
std::vector<evaluator::KernelArg> input_args(bool packed) {
  return {evaluator::ArgTensor{"q"},    evaluator::ArgTensor{"k"},     evaluator::ArgTensor{"v"},
          evaluator::ArgTensor{"g"},    evaluator::ArgTensor{"beta"},  evaluator::ArgTensor{"A_log"},
          evaluator::ArgTensor{"dt_bias"}, evaluator::ArgTensor{packed ? "cu_seqlens" : ""}};
}


constexpr std::int64_t D = KdaFwdOp::kHeadDim;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

[[noreturn]] void fail(const std::string& m) { throw std::invalid_argument("kda_fwd: " + m); }

bool parse_bool(const OpConfig& cfg, const std::string& key, bool fallback) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return fallback;
  if (it->second == "true") return true;
  if (it->second == "false") return false;
  fail("option " + key + " must be true or false, got '" + it->second + "'");
}

double parse_number(const std::string& key, const std::string& s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
    fail("option " + key + " must be a finite number, got '" + s + "'");
  return v;
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

const HostTensor& find_tensor(const std::vector<HostTensor>& ts, const std::string& name, DType dtype,
                              const std::vector<std::int64_t>& shape) {
  std::int64_t numel = 1;
  for (auto x : shape) numel *= x;
  for (const auto& t : ts) {
    if (t.name != name) continue;
    if (t.dtype != dtype || t.shape != shape ||
        t.data.size() != static_cast<std::size_t>(numel) * evaluator::dtype_size(dtype))
      fail("reference: tensor '" + name + "' is " + evaluator::to_string(t.dtype) + " " + shape_text(t.shape) + " (" +
           std::to_string(t.data.size()) + " bytes); the shape and options want " + evaluator::to_string(dtype) + " " +
           shape_text(shape));
    return t;
  }
  fail("reference: no input tensor named '" + name + "'");
}

bool is_pow2(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

KdaFwdOp::Config KdaFwdOp::parse(const OpConfig& cfg) {
  for (const auto& [k, v] : cfg)
    if (k != "gate" && k != "lower_bound" && k != "scale" && k != "initial_state" && k != "final_state" &&
        k != "head_dim")
      fail("unknown option '" + k + "' (options: gate, lower_bound, scale, initial_state, final_state, head_dim)");
  Config c;
  if (auto it = cfg.find("gate"); it != cfg.end()) {
    if (it->second == "lower_bound") c.gate = KdaGate::LowerBound;
    else if (it->second == "softplus") c.gate = KdaGate::Softplus;
    else fail("gate must be lower_bound or softplus, got '" + it->second + "'");
  }
  if (auto it = cfg.find("lower_bound"); it != cfg.end()) {
    if (c.gate != KdaGate::LowerBound)
      fail("lower_bound is set but gate is softplus (the softplus gate has no lower bound)");
    c.lower_bound = parse_number("lower_bound", it->second);
    if (!(c.lower_bound >= -5.0 && c.lower_bound < 0.0))
      fail("lower_bound must be in [-5, 0) (FLA's safe-gate range, FlashKDA's expected range), got " + it->second);
  }
  if (auto it = cfg.find("scale"); it != cfg.end()) {
    c.scale = parse_number("scale", it->second);
    if (!(c.scale > 0) || c.scale > 1e6) fail("scale must be in (0, 1e6], got " + it->second);
  }
  c.initial_state = parse_bool(cfg, "initial_state", true);
  c.final_state = parse_bool(cfg, "final_state", true);
  if (auto it = cfg.find("head_dim"); it != cfg.end() && it->second != "128")
    fail("head_dim " + it->second + " is not supported: K = V = 128 (as FlashKDA requires and KDA models use)");
  return c;
}

Knobs KdaFwdOp::knob_defaults() {
  const Geometry g;
  return {{"BV", g.bv}, {"KSPLIT", g.ksplit}, {"TB", g.tb}, {"MIN_BLOCKS", g.min_blocks}};
}

evaluator::KnobAliases KdaFwdOp::knob_renames() {
  return {{"LMTC", "LM_TENSOR_CORES"}, {"WYTC", "WY_TENSOR_CORES"}, {"SLO", "STATE_HI_LO"},
          {"ULO", "U_HI_LO"},          {"UPREC", "U0_BITS"},       {"PGRID", "PREPARE_CTAS"},
          {"WYREC", "WY_IN_RECURRENCE"}, {"PF", "PREFETCH_CHUNKS"}};
}

KdaFwdOp::Geometry KdaFwdOp::geometry(const Knobs& given) {
  const Knobs k = evaluator::canonical_knobs(knob_renames(), given);
  for (const auto& [name, v] : k)
    if (name != "BV" && name != "KSPLIT" && name != "TB" && name != "MIN_BLOCKS")
      fail("unknown knob '" + name + "' (knobs: BV, KSPLIT, TB, MIN_BLOCKS)");
  Geometry g;
  g.bv = evaluator::knob_int(k, "BV", g.bv);
  g.ksplit = evaluator::knob_int(k, "KSPLIT", g.ksplit);
  g.tb = evaluator::knob_int(k, "TB", g.tb);
  g.min_blocks = evaluator::knob_int(k, "MIN_BLOCKS", g.min_blocks);
  if (!is_pow2(g.bv) || g.bv < 8 || g.bv > D) fail("BV=" + std::to_string(g.bv) + " must be a power of two in [8, 128]");
  if (!is_pow2(g.ksplit) || g.ksplit > 32)
    fail("KSPLIT=" + std::to_string(g.ksplit) + " must be a power of two in [1, 32] (the lanes of one column share a warp)");
  const std::int64_t threads = g.bv * g.ksplit;
  if (threads < 32 || threads > 1024)
    fail("BV * KSPLIT = " + std::to_string(threads) +
         " threads per CTA must be in [32, 1024] (the pre-processing gives each warp whole tokens)");
  if (!is_pow2(g.tb) || g.tb > 16)
    fail("TB=" + std::to_string(g.tb) + " must be 1, 2, 4, 8 or 16 (tokens staged in static shared memory, 48 KB)");
  if (g.min_blocks < 0 || g.min_blocks > 32 || threads * g.min_blocks > 2048)
    fail("MIN_BLOCKS=" + std::to_string(g.min_blocks) + " must be in [0, 32] with BV * KSPLIT * MIN_BLOCKS <= 2048");
  return g;
}

bool KdaFwdOp::is_chunked(const Knobs& k) { return k.count("CHUNK") > 0; }

Knobs KdaFwdOp::chunked_knob_defaults() {
  return {{"CHUNK", std::int64_t{16}}, {"BV", std::int64_t{64}},   {"WARPS", std::int64_t{4}}, {"STAGE", std::int64_t{2}},
          {"LM_TENSOR_CORES", std::int64_t{1}},  {"FUSED", std::int64_t{0}}, {"U0_BITS", std::int64_t{16}},
          {"KSPLIT", std::int64_t{1}}, {"PREFETCH_CHUNKS", std::int64_t{0}}, {"WY_TENSOR_CORES", std::int64_t{0}},
          {"STATE_HI_LO", std::int64_t{0}}, {"MMA", std::string("sync")}, {"BULK", std::int64_t{1}},
          {"PREPARE_CTAS", std::int64_t{0}}, {"U_HI_LO", std::int64_t{0}}, {"LMTERMS", std::int64_t{1}},
          {"WY_IN_RECURRENCE", std::int64_t{1}}, {"SEQSPLIT", std::int64_t{16}}};
}

Knobs KdaFwdOp::chunked_fused_knob_defaults() {
  const ChunkedGeometry g;
  return {{"CHUNK", g.chunk},
          {"BV", g.bv},
          {"WARPS", g.warps},
          {"STAGE", g.stage},
          {"LM_TENSOR_CORES", g.lm_tensor_cores},
          {"FUSED", std::int64_t{1}},
          {"U0_BITS", std::int64_t{32}},
          {"KSPLIT", std::int64_t{1}},
          {"PREFETCH_CHUNKS", std::int64_t{0}},
          {"WY_TENSOR_CORES", std::int64_t{0}},
          {"STATE_HI_LO", std::int64_t{1}},
          {"MMA", std::string("sync")},
          {"BULK", std::int64_t{0}},
          {"PREPARE_CTAS", std::int64_t{0}},
          {"U_HI_LO", std::int64_t{1}},
          {"LMTERMS", std::int64_t{3}},
          {"WY_IN_RECURRENCE", std::int64_t{0}},
          {"SEQSPLIT", std::int64_t{1}}};
}

std::vector<Knobs> KdaFwdOp::split_covering_knobs() {
  std::vector<Knobs> out;
  const std::int64_t pfs[4] = {0, 2, 4, 8};
  for (const std::int64_t c : {16, 32, 64}) {
    int cycle = 0;
    for (const std::int64_t bv : {16, 32, 64, 128})
      for (const std::int64_t staged : {0, 1}) {
        const std::int64_t ks = std::int64_t{1} << (cycle % 3);
        Knobs k = {{"FUSED", std::int64_t{0}},
                   {"CHUNK", c},
                   {"BV", bv},
                   {"WARPS", std::int64_t{(cycle & 1) ? 8 : 4}},
                   {"STAGE", staged ? 1 + cycle % 3 : std::int64_t{0}},
                   {"LM_TENSOR_CORES", std::int64_t{(cycle & 2) ? 1 : 0}},
                   {"U0_BITS", std::int64_t{(cycle & 4) ? 16 : 32}},
                   {"KSPLIT", bv * ks <= 256 ? ks : std::int64_t{1}},
                   {"PREFETCH_CHUNKS", pfs[cycle % 4]},
                   {"WY_TENSOR_CORES", std::int64_t{((cycle >> 1) ^ cycle) & 1}},
                   {"STATE_HI_LO", std::int64_t{(cycle >> 2) ^ (cycle & 1)}},
                   {"MMA", std::string("sync")},
                   {"BULK", std::int64_t{(cycle >> 1) & 1}},
                   {"PREPARE_CTAS", std::int64_t{0}},
                   {"U_HI_LO", std::int64_t{((cycle >> 2) ^ (cycle >> 1)) & 1}},
                   // The one-pass prepare's L / M terms (CHUNK 16, LM_TENSOR_CORES 1: cycles 2, 3, 6,
                   // and 7): 1, 2, 3, 1.
                   {"LMTERMS", std::int64_t{c == 16 && (cycle & 2) ? 1 + ((cycle & 1) + (cycle >> 2) * 2) % 3 : 3}},
                   {"WY_IN_RECURRENCE", std::int64_t{0}},
                   {"SEQSPLIT", std::int64_t{1}}};
        ++cycle;
        if (c == 64) k["PREFETCH_CHUNKS"] = std::int64_t{0};
        try {
          (void)chunked_geometry(k);
        } catch (const std::invalid_argument&) {
          k["STAGE"] = staged;
          k["KSPLIT"] = std::int64_t{1};
        }
        out.push_back(std::move(k));
      }
    // MMA = wgmma at each CHUNK: one warpgroup (BV 64) or two (BV 128), staged or not.
    Knobs w = chunked_knob_defaults();
    w["CHUNK"] = c;
    w["BV"] = std::int64_t{c == 32 ? 128 : 64};
    w["STAGE"] = std::int64_t{c == 64 ? 0 : c == 32 ? 1 : 2};
    w["WY_TENSOR_CORES"] = std::int64_t{c == 32 ? 0 : 1};
    w["U0_BITS"] = std::int64_t{c == 64 ? 32 : 16};
    w["MMA"] = std::string("wgmma");
    w["BULK"] = std::int64_t{c == 64 ? 0 : 1};
    w["LMTERMS"] = std::int64_t{3};
    w["WY_IN_RECURRENCE"] = std::int64_t{0};
    w["SEQSPLIT"] = std::int64_t{1};
    out.push_back(std::move(w));
  }
  // PREPARE_CTAS: the persistent prepare beside a programmatic recurrence, at the defaults
  // otherwise.
  Knobs o = chunked_knob_defaults();
  o["PREPARE_CTAS"] = std::int64_t{396};
  o["SEQSPLIT"] = std::int64_t{1};
  out.push_back(std::move(o));
  // WY_IN_RECURRENCE 1: U = T' (V - Kd S) in the recurrence, at the defaults, at CHUNK 32 with
  // per-thread copies and the unfactored prepare (LM_TENSOR_CORES 0), and at CHUNK 64;
  // WY_IN_RECURRENCE 2 (T' folded into Kr and M by the prepare) at the defaults otherwise.
  Knobs r = chunked_knob_defaults();
  out.push_back(r);
  r["WY_IN_RECURRENCE"] = std::int64_t{2};
  r["SEQSPLIT"] = std::int64_t{1};
  out.push_back(r);
  r["WY_IN_RECURRENCE"] = std::int64_t{1};
  r["CHUNK"] = std::int64_t{32};
  r["BV"] = std::int64_t{32};
  r["STAGE"] = std::int64_t{1};
  r["BULK"] = std::int64_t{0};
  r["LM_TENSOR_CORES"] = std::int64_t{0};
  r["LMTERMS"] = std::int64_t{3};
  r["U_HI_LO"] = std::int64_t{1};
  out.push_back(r);
  r["CHUNK"] = std::int64_t{64};
  r["BV"] = std::int64_t{128};
  r["STAGE"] = std::int64_t{0};
  r["BULK"] = std::int64_t{1};
  r["WARPS"] = std::int64_t{8};
  out.push_back(r);
  // SEQSPLIT: besides the defaults' 16, 4 at WY_IN_RECURRENCE 1's CHUNK 32 with per-thread copies
  // and out stored from the accumulators (the defaults at 1, the two-kernel plan, have a GPU test
  // of their own: ChunkedSplitWithoutSequenceSplitPassesTheGateOnEverySpec).
  Knobs q = out[out.size() - 2];  // WY_IN_RECURRENCE 1 at CHUNK 32
  q["SEQSPLIT"] = std::int64_t{4};
  out.push_back(q);
  return out;
}

Knobs KdaFwdOp::chunked_tcgen05_knob_defaults() {
  Knobs k = chunked_fused_knob_defaults();
  k.erase("FUSED");
  k.erase("U0_BITS");
  for (const char* split_only : {"KSPLIT", "PREFETCH_CHUNKS", "WY_TENSOR_CORES", "STATE_HI_LO", "BULK", "PREPARE_CTAS",
                                 "U_HI_LO", "LMTERMS", "WY_IN_RECURRENCE", "SEQSPLIT"})
    k.erase(split_only);
  k["MMA"] = std::string("tcgen05");
  return k;
}

std::int64_t KdaFwdOp::chunked_smem_bytes(const ChunkedGeometry& g) { return kda_plan::chunked_smem_bytes(g); }

std::int64_t KdaFwdOp::prepare_smem_bytes(const ChunkedGeometry& g, bool softplus) {
  return kda_plan::prepare_smem_bytes(g, softplus);
}

std::int64_t KdaFwdOp::workspace_chunk_bytes(std::int64_t c, std::int64_t u0_bits, std::int64_t wy_in_recurrence) {
  return kda_plan::workspace_chunk_bytes(c, u0_bits, wy_in_recurrence);
}

kda_plan::Dims KdaFwdOp::plan_dims(const KdaDims& d) {
  kda_plan::Dims p;
  p.batch = d.batch;
  p.tokens = d.tokens;
  p.heads = d.heads;
  p.sequences = d.sequences;
  p.packed = d.packed;
  p.longest = d.tokens;
  if (d.packed) {
    p.longest = 0;
    for (std::size_t i = 0; i + 1 < d.cu_seqlens.size(); ++i)
      p.longest = std::max(p.longest, d.cu_seqlens[i + 1] - d.cu_seqlens[i]);
  }
  return p;
}

std::int64_t KdaFwdOp::seq_segments(const KdaDims& d, std::int64_t chunk, std::int64_t seqsplit) {
  return kda_plan::seq_segments(plan_dims(d), chunk, seqsplit);
}

std::int64_t KdaFwdOp::workspace_bytes(const KdaDims& d) { return kda_plan::workspace_bytes(plan_dims(d)); }

const char* KdaFwdOp::plan_source() { return kKdaPlanSource; }

KdaFwdOp::ChunkedGeometry KdaFwdOp::chunked_geometry(const Knobs& given) {
  const Knobs k = evaluator::canonical_knobs(knob_renames(), given);
  for (const auto& [name, v] : k)
    if (name != "CHUNK" && name != "BV" && name != "WARPS" && name != "STAGE" && name != "LM_TENSOR_CORES" &&
        name != "MMA" && name != "FUSED" && name != "U0_BITS" && name != "KSPLIT" && name != "PREFETCH_CHUNKS" &&
        name != "WY_TENSOR_CORES" && name != "STATE_HI_LO" && name != "BULK" && name != "PREPARE_CTAS" &&
        name != "U_HI_LO" && name != "LMTERMS" && name != "WY_IN_RECURRENCE" && name != "SEQSPLIT")
      fail("unknown knob '" + name +
           "' for the chunked kernel (knobs: CHUNK, BV, WARPS, STAGE, LM_TENSOR_CORES, MMA, FUSED, U0_BITS, KSPLIT, "
           "PREFETCH_CHUNKS, WY_TENSOR_CORES, STATE_HI_LO, BULK, PREPARE_CTAS, U_HI_LO, LMTERMS, WY_IN_RECURRENCE, "
           "SEQSPLIT)");
  ChunkedGeometry g;
  const std::int64_t fused = evaluator::knob_int(k, "FUSED", 1);
  if (fused != 0 && fused != 1) fail("FUSED=" + std::to_string(fused) + " must be 0 or 1");
  g.fused = fused == 1;
  g.u0_bits = evaluator::knob_int(k, "U0_BITS", 32);
  if (g.u0_bits != 16 && g.u0_bits != 32) fail("U0_BITS=" + std::to_string(g.u0_bits) + " must be 16 or 32");
  if (g.fused && g.u0_bits != 32) fail("U0_BITS=16 needs FUSED=0 (only the workspace holds U0)");
  g.ksplit = evaluator::knob_int(k, "KSPLIT", 1);
  if (g.ksplit != 1 && g.ksplit != 2 && g.ksplit != 4) fail("KSPLIT=" + std::to_string(g.ksplit) + " must be 1, 2 or 4");
  if (g.fused && g.ksplit != 1) fail("KSPLIT=" + std::to_string(g.ksplit) + " needs FUSED=0 (a recurrence knob)");
  g.prefetch_chunks = evaluator::knob_int(k, "PREFETCH_CHUNKS", 0);
  if (g.prefetch_chunks != 0 && g.prefetch_chunks != 2 && g.prefetch_chunks != 4 && g.prefetch_chunks != 8)
    fail("PREFETCH_CHUNKS=" + std::to_string(g.prefetch_chunks) + " must be 0, 2, 4 or 8");
  if (g.fused && g.prefetch_chunks != 0)
    fail("PREFETCH_CHUNKS=" + std::to_string(g.prefetch_chunks) + " needs FUSED=0 (a recurrence knob)");
  g.wy_tensor_cores = evaluator::knob_int(k, "WY_TENSOR_CORES", 0);
  if (g.wy_tensor_cores != 0 && g.wy_tensor_cores != 1)
    fail("WY_TENSOR_CORES=" + std::to_string(g.wy_tensor_cores) + " must be 0 or 1");
  if (g.fused && g.wy_tensor_cores != 0) fail("WY_TENSOR_CORES=1 needs FUSED=0 (a prepare knob)");
  g.state_hi_lo = evaluator::knob_int(k, "STATE_HI_LO", 1);
  if (g.state_hi_lo != 0 && g.state_hi_lo != 1)
    fail("STATE_HI_LO=" + std::to_string(g.state_hi_lo) + " must be 0 or 1");
  if (g.fused && g.state_hi_lo != 1) fail("STATE_HI_LO=0 needs FUSED=0 (a recurrence knob)");
  g.bulk = evaluator::knob_int(k, "BULK", 0);
  if (g.bulk != 0 && g.bulk != 1) fail("BULK=" + std::to_string(g.bulk) + " must be 0 or 1");
  if (g.fused && g.bulk != 0) fail("BULK=1 needs FUSED=0 (a recurrence knob)");
  g.u_hi_lo = evaluator::knob_int(k, "U_HI_LO", 1);
  if (g.u_hi_lo != 0 && g.u_hi_lo != 1) fail("U_HI_LO=" + std::to_string(g.u_hi_lo) + " must be 0 or 1");
  if (g.fused && g.u_hi_lo != 1) fail("U_HI_LO=0 needs FUSED=0 (a recurrence knob)");
  g.lmterms = evaluator::knob_int(k, "LMTERMS", 3);
  if (g.lmterms < 1 || g.lmterms > 3) fail("LMTERMS=" + std::to_string(g.lmterms) + " must be 1, 2 or 3");
  g.wy_in_recurrence = evaluator::knob_int(k, "WY_IN_RECURRENCE", 0);
  if (g.wy_in_recurrence < 0 || g.wy_in_recurrence > 2)
    fail("WY_IN_RECURRENCE=" + std::to_string(g.wy_in_recurrence) + " must be 0, 1 or 2");
  g.prepare_ctas = evaluator::knob_int(k, "PREPARE_CTAS", 0);
  if (g.prepare_ctas < 0 || g.prepare_ctas > 65535)
    fail("PREPARE_CTAS=" + std::to_string(g.prepare_ctas) +
         " must be 0 (off) or the prepare's persistent CTAs, at most 65535");
  g.seqsplit = evaluator::knob_int(k, "SEQSPLIT", 1);
  if (g.seqsplit < 1 || g.seqsplit > kMaxSeqSplit || (g.seqsplit & (g.seqsplit - 1)) != 0)
    fail("SEQSPLIT=" + std::to_string(g.seqsplit) + " must be 1 (off), 2, 4, 8, 16 or 32");
  if (g.prepare_ctas > 0 && (g.fused || g.bulk != 1))
    fail("PREPARE_CTAS=" + std::to_string(g.prepare_ctas) +
         " needs FUSED=0 and BULK=1 (the recurrence's one copy-issuing thread waits on each chunk's flag)");
  if (auto it = k.find("MMA"); it != k.end()) {
    const auto* mma = std::get_if<std::string>(&it->second);
    if (!mma || (*mma != "sync" && *mma != "wgmma" && *mma != "tcgen05"))
      fail("MMA=" + (mma ? *mma : std::to_string(std::get<std::int64_t>(it->second))) +
           " must be sync (mma.sync, kda_fwd_chunked.cu), wgmma (sm_90a, the split's recurrence, "
           "kda_fwd_chunked.cu) or tcgen05 (sm_100a only, kda_fwd_chunked_tcgen05.cu)");
    g.tcgen05 = *mma == "tcgen05";
    g.wgmma = *mma == "wgmma";
  }
  g.chunk = evaluator::knob_int(k, "CHUNK", g.chunk);
  g.bv = evaluator::knob_int(k, "BV", g.bv);
  g.warps = evaluator::knob_int(k, "WARPS", g.warps);
  g.stage = evaluator::knob_int(k, "STAGE", g.stage);
  g.lm_tensor_cores = evaluator::knob_int(k, "LM_TENSOR_CORES", g.lm_tensor_cores);
  if (g.chunk != 16 && g.chunk != 32 && g.chunk != 64)
    fail("CHUNK=" + std::to_string(g.chunk) + " must be 16, 32 or 64 (whole m16n8k16 tiles)");
  if (g.bv != 16 && g.bv != 32 && g.bv != 64 && g.bv != 128)
    fail("BV=" + std::to_string(g.bv) + " must be 16, 32, 64 or 128 for the chunked kernel");
  if (g.prefetch_chunks != 0 && g.chunk == 64)
    fail("PREFETCH_CHUNKS=" + std::to_string(g.prefetch_chunks) +
         " needs CHUNK < 64 (the recurrence's registers are full there: it would spill)");
  if (g.warps != 4 && g.warps != 8) fail("WARPS=" + std::to_string(g.warps) + " must be 4 or 8");
  if (g.fused ? (g.stage != 0 && g.stage != 1) : (g.stage < 0 || g.stage > 3))
    fail("STAGE=" + std::to_string(g.stage) + (g.fused ? " must be 0 or 1 (FUSED=1)" : " must be 0 to 3 (FUSED=0)"));
  // The kernel ignores LM_TENSOR_CORES = 1 elsewhere (the factors' range holds only over 16 tokens
  // of the lower-bound gate); accepting it would put duplicates in the search space.
  if (g.lm_tensor_cores != 0 && g.lm_tensor_cores != 1)
    fail("LM_TENSOR_CORES=" + std::to_string(g.lm_tensor_cores) + " must be 0 or 1");
  // 16 warps at most: 128 registers a thread, so the state slice never spills.
  if (!g.fused && g.bv * 2 * g.ksplit > 512)
    fail("BV=" + std::to_string(g.bv) + " with KSPLIT=" + std::to_string(g.ksplit) + " gives " +
         std::to_string(g.bv * 2 * g.ksplit) + " recurrence threads; at most 512 (BV * KSPLIT <= 256)");
  if (!g.fused && g.tcgen05) fail("MMA=tcgen05 needs FUSED=1 (the prepare + recurrence pair is mma.sync only)");
  // wgmma's M = 64 rows are the value columns of four 16-column warps holding every key channel.
  if (g.wgmma && (g.fused || g.ksplit != 1 || g.state_hi_lo != 0 || g.bv < 64))
    fail("MMA=wgmma needs FUSED=0, KSPLIT=1, STATE_HI_LO=0 and BV 64 or 128 (the recurrence's warpgroups own 64 value "
         "columns each), got FUSED=" + std::to_string(g.fused ? 1 : 0) + " KSPLIT=" + std::to_string(g.ksplit) +
         " STATE_HI_LO=" + std::to_string(g.state_hi_lo) + " BV=" + std::to_string(g.bv));
  // The split path factors L and M about pivot tokens at any CHUNK (kda_fwd_chunked.cu).
  if (g.fused && g.lm_tensor_cores == 1 && g.chunk != 16)
    fail("LM_TENSOR_CORES=1 needs CHUNK=16, got CHUNK=" + std::to_string(g.chunk));
  if (g.lmterms != 3 && (g.fused || g.chunk != 16 || g.lm_tensor_cores != 1 || g.wgmma))
    fail("LMTERMS=" + std::to_string(g.lmterms) +
         " needs FUSED=0, CHUNK=16, LM_TENSOR_CORES=1 and MMA=sync (the prepare's one-pass L and M products; "
         "elsewhere they take 3 terms)");
  if (g.wy_in_recurrence == 2 && g.chunk != 16)
    fail("WY_IN_RECURRENCE=2 needs CHUNK=16 (the prepare folds T' into Kr and M in one 16-token step), got CHUNK=" +
         std::to_string(g.chunk));
  if (g.wy_in_recurrence != 0 && (g.fused || g.wgmma || g.ksplit != 1 || g.wy_tensor_cores != 0))
    fail("WY_IN_RECURRENCE=" + std::to_string(g.wy_in_recurrence) +
         " needs FUSED=0, MMA=sync, KSPLIT=1 and WY_TENSOR_CORES=0 (U = T' (V - Kd S) is formed in each 16-column "
         "warp of the mma.sync recurrence), got FUSED=" +
         std::to_string(g.fused ? 1 : 0) + " MMA=" + (g.wgmma ? "wgmma" : "sync") +
         " KSPLIT=" + std::to_string(g.ksplit) + " WY_TENSOR_CORES=" + std::to_string(g.wy_tensor_cores));
  if (g.seqsplit > 1 && (g.fused || g.wy_in_recurrence != 1 || g.prepare_ctas != 0))
    fail("SEQSPLIT=" + std::to_string(g.seqsplit) +
         " needs FUSED=0, WY_IN_RECURRENCE=1 and PREPARE_CTAS=0 (the split recurrence zeroes its transition "
         "columns' v rows as they are copied, and waits on no flags), got FUSED=" +
         std::to_string(g.fused ? 1 : 0) + " WY_IN_RECURRENCE=" + std::to_string(g.wy_in_recurrence) +
         " PREPARE_CTAS=" + std::to_string(g.prepare_ctas));
  if (!g.fused && prepare_smem_bytes(g, true) > 227 * 1024)
    fail("CHUNK=" + std::to_string(g.chunk) + ": kda_fwd_prepare needs " + std::to_string(prepare_smem_bytes(g, true)) +
         " bytes of shared memory, more than a CTA may have (227 KB)");
  if (chunked_smem_bytes(g) > 227 * 1024)
    fail("CHUNK=" + std::to_string(g.chunk) + " with BV=" + std::to_string(g.bv) + " and STAGE=" +
         std::to_string(g.stage) + (g.tcgen05 ? " (MMA=tcgen05)" : "") + " needs " +
         std::to_string(chunked_smem_bytes(g)) + " bytes of shared memory, more than a CTA may have (227 KB)");
  return g;
}

std::string KdaFwdOp::validate(const OpConfig& cfg) const {
  try {
    parse(cfg);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::vector<TensorDesc> KdaFwdOp::tensors(const Shape& s, const OpConfig& cfg) const {
  const Config c = parse(cfg);
  const KdaDims d = kda_dims(s);
  const std::vector<std::int64_t> tok = {d.batch, d.tokens, d.heads, D};
  const std::vector<std::int64_t> state = {d.sequences, d.heads, D, D};
  std::vector<TensorDesc> out;
  out.push_back({"q", DType::BF16, tok, Role::In, false});
  out.push_back({"k", DType::BF16, tok, Role::In, false});
  out.push_back({"v", DType::BF16, tok, Role::In, false});
  out.push_back({"g", DType::BF16, tok, Role::In, true});
  out.push_back({"beta", DType::BF16, {d.batch, d.tokens, d.heads}, Role::In, false});
  out.push_back({"A_log", DType::F32, {d.heads}, Role::In, true});
  out.push_back({"dt_bias", DType::F32, {d.heads, D}, Role::In, true});
  if (d.packed) out.push_back({"cu_seqlens", DType::I64, {d.sequences + 1}, Role::In, true});
  if (c.initial_state) out.push_back({"initial_state", DType::F32, state, Role::In, false});
  out.push_back({"out", DType::BF16, tok, Role::Out, false});
  if (c.final_state) out.push_back({"final_state", DType::F32, state, Role::Out, false});
  // Scratch of the prepare + recurrence pair (FUSED = 0); tensors do not see the knobs, so every
  // kernel of the op gets it, sized for the largest CHUNK.
  out.push_back({"workspace", DType::U8, {workspace_bytes(d)}, Role::Scratch, false});
  return out;
}

std::map<std::string, std::string> KdaFwdOp::template_defines(const OpConfig& cfg) const {
  const Config c = parse(cfg);
  return {{"KDA_GATE_SOFTPLUS", c.gate == KdaGate::Softplus ? "1" : "0"},
          {"HAS_INITIAL_STATE", c.initial_state ? "1" : "0"},
          {"HAS_FINAL_STATE", c.final_state ? "1" : "0"}};
}

evaluator::LaunchPlan KdaFwdOp::launch_plan(const Shape& s, const OpConfig& cfg, const Knobs& k) const {
  const Config c = parse(cfg);
  const KdaDims d = kda_dims(s);
  kda_plan::Plan plan;
  const char* why = is_chunked(k) ? kda_plan::chunked_plan(plan_dims(d), chunked_geometry(k), c.gate == KdaGate::Softplus, &plan)
                                  : kda_plan::recurrent_plan(plan_dims(d), geometry(k), &plan);
  if (why)
    fail(std::string(why) + " (B=" + std::to_string(d.batch) + " T=" + std::to_string(d.tokens) +
         " H=" + std::to_string(d.heads) + " N=" + std::to_string(d.sequences) + ")");
  // Every kernel's arguments, in the order of its entry's parameters.
  const evaluator::ArgTensor cu{d.packed ? "cu_seqlens" : ""};
  const evaluator::ArgTensor ws{"workspace"};
  const auto tokens = std::int64_t{d.tokens};
  const auto heads = static_cast<std::int32_t>(d.heads);
  const auto sequences = static_cast<std::int32_t>(d.sequences);
  const auto scale = static_cast<float>(c.scale);
  const auto lower_bound = static_cast<float>(c.lower_bound);
  const evaluator::ArgTensor state_in{c.initial_state ? "initial_state" : ""};
  const evaluator::ArgTensor state_out{c.final_state ? "final_state" : ""};
  evaluator::LaunchPlan p;
  for (int i = 0; i < plan.count; ++i) {
    const kda_plan::Launch& x = plan.launches[i];
    evaluator::KernelLaunch l;
    l.entry = kda_plan::entry_name(x.kernel);
    l.grid = {x.grid[0], x.grid[1], x.grid[2]};
    l.block = {x.block[0], x.block[1], x.block[2]};
    l.shared_bytes = x.shared_bytes;
    l.programmatic = x.programmatic;
    switch (x.kernel) {
      case kda_plan::Kernel::Prepare:
        l.args = input_args(d.packed);
        l.args.insert(l.args.end(), {ws, tokens, heads, sequences, scale, lower_bound});
        break;
      case kda_plan::Kernel::Recurrence:
        // v is read with WY_IN_RECURRENCE = 1 only; segments and pass: the sequence split.
        l.args = {ws, cu, state_in, evaluator::ArgTensor{"out"}, state_out, tokens, heads, sequences, scale,
                  lower_bound, evaluator::ArgTensor{"v"}, x.segments, x.pass};
        break;
      case kda_plan::Kernel::SegCombine:
        l.args = {ws, cu, tokens, heads, sequences, x.segments};
        break;
      case kda_plan::Kernel::FlagsReset:
        l.args = {ws, cu, tokens, heads, sequences};
        break;
      case kda_plan::Kernel::Recurrent:
      case kda_plan::Kernel::Chunked:
      case kda_plan::Kernel::ChunkedTcgen05:
        l.args = input_args(d.packed);
        l.args.insert(l.args.end(),
                      {state_in, evaluator::ArgTensor{"out"}, state_out, tokens, heads, scale, lower_bound});
        break;
    }
    p.kernels.push_back(std::move(l));
  }
  return p;
}

KdaProblem KdaFwdOp::problem(const KdaDims& d, const Config& c, const std::vector<HostTensor>& tensors) {
  const std::vector<std::int64_t> tok = {d.batch, d.tokens, d.heads, D};
  KdaProblem p;
  p.heads = d.heads;
  p.k_dim = D;
  p.v_dim = D;
  p.gate = c.gate;
  // The kernel receives scale and lower_bound as floats; the reference uses the same values.
  p.lower_bound = static_cast<float>(c.lower_bound);
  p.scale = static_cast<float>(c.scale);
  p.q = find_tensor(tensors, "q", DType::BF16, tok).data.data();
  p.k = find_tensor(tensors, "k", DType::BF16, tok).data.data();
  p.v = find_tensor(tensors, "v", DType::BF16, tok).data.data();
  p.g = find_tensor(tensors, "g", DType::BF16, tok).data.data();
  p.beta = find_tensor(tensors, "beta", DType::BF16, {d.batch, d.tokens, d.heads}).data.data();
  p.a_log = find_tensor(tensors, "A_log", DType::F32, {d.heads}).data.data();
  p.dt_bias = find_tensor(tensors, "dt_bias", DType::F32, {d.heads, D}).data.data();
  if (c.initial_state)
    p.initial_state = find_tensor(tensors, "initial_state", DType::F32, {d.sequences, d.heads, D, D}).data.data();
  if (d.packed) {
    const HostTensor& cu = find_tensor(tensors, "cu_seqlens", DType::I64, {d.sequences + 1});
    for (std::int64_t i = 0; i <= d.sequences; ++i) p.cu_seqlens.push_back(static_cast<std::int64_t>(cu.get(i)));
    check_cu_seqlens(p.cu_seqlens, d.total_tokens());
  } else {
    p.cu_seqlens = d.cu_seqlens;
  }
  return p;
}

void KdaFwdOp::reference(const Shape& s, const OpConfig& cfg, const std::vector<HostTensor>& tensors,
                         std::vector<HostTensor>& reference) const {
  const Config c = parse(cfg);
  const KdaDims d = kda_dims(s);
  const KdaProblem p = problem(d, c, tensors);
  HostTensor out("out", DType::F64, {d.batch, d.tokens, d.heads, D});
  HostTensor fin("final_state", DType::F64, {d.sequences, d.heads, D, D});
  kda_recurrent_reference(p, reinterpret_cast<double*>(out.data.data()),
                          c.final_state ? reinterpret_cast<double*>(fin.data.data()) : nullptr);
  reference.clear();
  reference.push_back(std::move(out));
  if (c.final_state) reference.push_back(std::move(fin));
}

namespace {

KdaRefConfig ref_config(const KdaFwdOp::Config& c) {
  KdaRefConfig r;
  r.softplus_gate = c.gate == KdaGate::Softplus;
  r.lower_bound = static_cast<float>(c.lower_bound);
  r.scale = static_cast<float>(c.scale);
  r.initial_state = c.initial_state;
  r.final_state = c.final_state;
  return r;
}

}  // namespace

std::string KdaFwdOp::device_reference_source(const OpConfig& cfg) const {
  return kda_fwd_device_reference_source(ref_config(parse(cfg)));
}

evaluator::DeviceReferencePlan KdaFwdOp::device_reference_plan(const Shape& s, const OpConfig& cfg) const {
  return kda_fwd_device_reference_plan(ref_config(parse(cfg)), kda_dims(s));
}

// docs/kda.md section 2.3: one fused pass reads q, k, g, v, beta and writes out (bf16), plus the
// states (fp32), A_log, dt_bias and cu_seqlens: 1282 bytes per token-head at K = V = 128.
double KdaFwdOp::bytes(const Shape& s, const OpConfig& cfg) const {
  const Config c = parse(cfg);
  const KdaDims d = kda_dims(s);
  const double th = static_cast<double>(d.total_tokens()) * static_cast<double>(d.heads);
  const double state = static_cast<double>(d.sequences) * static_cast<double>(d.heads) * D * D * 4.0;
  double b = th * (2.0 * D * 3 /* q, k, g */ + 2.0 * D * 2 /* v, out */ + 2.0 /* beta */);
  b += (c.initial_state ? state : 0.0) + (c.final_state ? state : 0.0);
  b += static_cast<double>(d.heads) * (4.0 + 4.0 * D);  // A_log, dt_bias
  if (d.packed) b += 8.0 * static_cast<double>(d.sequences + 1);
  return b;
}

// docs/kda.md section 2.3's canonical count: the three state GEMMs, 6 K V per token-head. Every
// known algorithm does at least these (the recurrence 8 K V, the chunked one 6 K V plus C-dependent
// terms), so it is a safe floor.
double KdaFwdOp::flops(const Shape& s, const OpConfig& cfg) const {
  parse(cfg);
  const KdaDims d = kda_dims(s);
  return 6.0 * static_cast<double>(d.total_tokens()) * static_cast<double>(d.heads) * D * D;
}

// The brief of issue 7 and docs/targets.md: RMSE / RMS(reference) <= 1e-2 for out and final state
// accepts the CUTLASS expert kernel (5.7e-3 and 5.0e-3 against an fp64 recurrent reference) with
// bf16 intermediates; an fp32-state kernel sits well below. max-abs (normalised by max(1, max
// |ref|)) 5e-2: a bf16 output alone errs by up to 2^-9 of the largest value; the rest is room for
// the accumulated error of the chunked algorithm's bf16 tensor-core inputs.
evaluator::Tolerance KdaFwdOp::tolerance(const std::string& output, const OpConfig& cfg) const {
  const Config c = parse(cfg);
  if (output == "out" || (output == "final_state" && c.final_state)) return {1e-2, 5e-2};
  fail("no output named '" + output + "' (outputs: out" + std::string(c.final_state ? ", final_state" : "") + ")");
}

// Ranges, per head so that one shape mixes regimes (a random rotation picks which head gets
// which, so H = 1 shapes see a different regime per distribution):
//  g        N(0,1) (FlashKDA's benchmark), constant -8, 0 or +8, U(-8,8), N(0,8^2): FlashKDA's
//           accuracy cases. The gate's own distributions would put g at U(-1e3,1e3) or Student-t
//           tails, where every decay is 0 or e^-5 per token and the regimes in between go untested.
//  dt_bias  U(0,1) (benchmark), 0, +-4 and +-8 with random signs, U(-8,8), N(0,8^2).
//  A_log    U(-1, ln 16): exp(A_log) in [0.37, 16], FLA's init range U(1,16) widened below 1.
//  cu_seqlens  the length set of N = shape[0] - 1 (kda_shape.hpp).
void KdaFwdOp::fill_fixed(const TensorDesc& d, std::mt19937_64& rng, HostTensor& t) const {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  if (d.name == "cu_seqlens") {
    const std::vector<std::int64_t> lengths = kda_length_set(d.shape.at(0) - 1);
    if (lengths.empty()) fail("fill: no length set for " + std::to_string(d.shape.at(0) - 1) + " sequences");
    const std::vector<std::int64_t> c = kda_cu_seqlens(lengths);
    for (std::size_t i = 0; i < c.size(); ++i) t.set(static_cast<std::int64_t>(i), static_cast<double>(c[i]));
    return;
  }
  if (d.name == "A_log") {
    for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, -1.0 + unit(rng) * (std::log(16.0) + 1.0));
    return;
  }
  if (d.name != "g" && d.name != "dt_bias") {
    Op::fill_fixed(d, rng, t);
    return;
  }
  // g is [B, T, H, 128], dt_bias [H, 128]: the head is the second-to-last index.
  const std::int64_t heads = d.shape.at(d.shape.size() - 2);
  const std::int64_t rot = static_cast<std::int64_t>(rng() % 6);
  // g of a benchmark shape has 10^8 elements, drawn for every gate run and timing set: in chunks
  // on all cores, each chunk from its own generator seeded from `rng`, so the values depend on
  // the seed only, not on the threads.
  const std::uint64_t base = rng();
  constexpr std::int64_t kChunk = std::int64_t{1} << 16;
  const bool gate_input = d.name == "g";
  tbb::parallel_for(std::int64_t{0}, (t.numel() + kChunk - 1) / kChunk, [&](std::int64_t c) {
    std::mt19937_64 r(splitmix64(base + static_cast<std::uint64_t>(c)));
    std::normal_distribution<double> nrm(0.0, 1.0);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    const std::int64_t end = std::min(t.numel(), (c + 1) * kChunk);
    for (std::int64_t i = c * kChunk; i < end; ++i) {
      const std::int64_t regime = ((i / D) % heads + rot) % 6;
      double x = 0;
      if (gate_input) {
        switch (regime) {
          case 0: x = nrm(r); break;
          case 1: x = -8.0; break;
          case 2: x = 0.0; break;
          case 3: x = 8.0; break;
          case 4: x = -8.0 + 16.0 * u01(r); break;
          default: x = 8.0 * nrm(r); break;
        }
      } else {
        switch (regime) {
          case 0: x = u01(r); break;
          case 1: x = 0.0; break;
          case 2: x = u01(r) < 0.5 ? -4.0 : 4.0; break;
          case 3: x = u01(r) < 0.5 ? -8.0 : 8.0; break;
          case 4: x = -8.0 + 16.0 * u01(r); break;
          default: x = 8.0 * nrm(r); break;
        }
      }
      t.set(i, x);
    }
  });
}

}  // namespace ptxevo::kernels
