// The per-function and per-module report behind `ptxevo ir stats`: CFG shape, loops, register
// use and pressure, instruction mix, memory accesses and performance directives, as JSON (for
// scripts) or aligned text (for the terminal).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/analysis/instruction_mix.hpp"
#include "ir/analysis/liveness.hpp"
#include "ir/analysis/memory_summary.hpp"
#include "ir/module.hpp"

namespace ptxevo::ir {

struct FunctionStats {
  std::string name;
  bool is_entry = false;
  bool has_body = false;  // false for prototypes such as `.extern .func f(...);`

  std::size_t blocks = 0;
  std::size_t edges = 0;
  std::size_t unreachable_blocks = 0;  // holding instructions: label-only tails ($L__func_end) are not counted
  std::size_t loops = 0;
  int max_loop_depth = 0;
  std::size_t instructions = 0;

  std::array<int, kRegClassCount> declared_registers{};  // per RegClass, from .reg declarations
  std::array<int, kRegClassCount> max_live{};            // peak simultaneously live, per RegClass
  int max_live_slots = 0;                                // peak live 32-bit slots (predicates excluded)
  int estimated_registers = 0;                           // max_live_slots + kReservedRegisters

  // Static .shared bytes declared in the body or at module scope and named by an instruction
  // here (calls are not followed; `extern` dynamic shared memory counts 0); .local bytes
  // declared in the body (stack arrays, the __local_depot of spills).
  std::uint64_t shared_bytes = 0;
  std::uint64_t local_bytes = 0;

  std::vector<std::string> callees;  // direct call targets, first-call order, no duplicates
  InstructionMix mix;
  MemorySummary memory;
  std::vector<PerfDirective> perf;  // .maxntid, .reqntid, .maxnreg, .minnctapersm, ...
};

struct ModuleStats {
  std::string version, target, address_size;
  std::vector<FunctionStats> functions;  // in module order, prototypes included
  std::size_t global_vars = 0;           // module-scope variable declarations of any space
  std::size_t entries = 0;               // functions that are kernels (.entry)
};

// `module` supplies the module-scope .shared variables that instructions may name.
FunctionStats analyze_function(const Function& f, const Module* module = nullptr);
ModuleStats analyze_module(const Module& m);

nlohmann::json to_json(const FunctionStats& s);
nlohmann::json to_json(const ModuleStats& s);
std::string to_text(const ModuleStats& s);  // aligned, readable report for the terminal

// Byte size of a variable (element type x vector lanes x array dims); 0 for `[]` (extern,
// dynamic) or dimensions that are not plain numbers.
std::uint64_t var_size_bytes(const VarDecl& v);

}  // namespace ptxevo::ir
