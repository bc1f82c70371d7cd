// The PTX IR: a module of declarations and functions whose bodies are flat statement lists.
// Bodies stay flat (with explicit scope markers) because inline-asm `{ }` scopes and labels do
// not nest like basic blocks; the CFG analysis derives basic blocks from the flat list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace ptxevo::ir {

struct SourceLoc {
  std::uint32_t line = 0;
  std::uint32_t col = 0;
};

enum class OperandKind {
  Register,  // a declared register (resolved: Operand::reg >= 0)
  Special,   // a special register such as %tid.x or %clock64
  Symbol,    // a label, variable, function, param or prototype name (optionally +offset)
  Immediate, // integer or floating literal, spelled as written (0f3F800000, -1, 0x1F)
  Vector,    // { a, b, ... }
  Address,   // [ base (+offset) ] or [ base, {coords} ]
  PredPair,  // %r|%p
  Sink,      // _
  List,      // ( a, b ) in call syntax
};

struct Operand {
  OperandKind kind = OperandKind::Immediate;
  std::string text;            // leaf spelling (Register/Special/Symbol/Immediate)
  bool negated = false;        // '!' prefix (predicate operands)
  std::vector<Operand> items;  // Vector/List elements; Address parts; PredPair halves
  std::int64_t offset = 0;     // Address or Symbol constant offset
  bool has_offset = false;
  int reg = -1;                // resolved register id for Register operands
};

struct Guard {
  bool negated = false;
  Operand pred;
};

struct Instruction {
  std::uint32_t id = 0;                // stable id, the target of mutations
  std::optional<Guard> guard;
  std::string opcode;                  // first dotless part, e.g. "ld"
  std::vector<std::string> modifiers;  // ordered, each with its dot: ".global", ".v4", ".f32"
  std::vector<Operand> operands;

  std::string full_opcode() const;     // "ld.global.v4.f32"
  bool has_modifier(const std::string& m) const;
};

// `.reg .b32 %r<29>, %x;`: each name is either a range (count >= 0) or a single register.
struct RegName {
  std::string name;
  int count = -1;
};
struct RegDecl {
  std::vector<std::string> type;  // e.g. {".b32"} or {".v4", ".f32"}
  std::vector<RegName> names;
};

// A variable declaration (module or function scope). Tokens before the name are kept in
// order (linkage, state space, .align N, .v4, type, .attribute(...)) so nothing is lost.
struct VarDecl {
  std::vector<std::string> attrs;
  std::string name;
  std::vector<std::string> dims;         // one entry per [..]; "" for []
  std::vector<std::string> init;         // initializer tokens after '=' (empty: none)
  bool has_init = false;

  std::string state_space() const;       // ".global", ".shared", ".const", ".local", ".param", ...
  bool is_extern() const;
};

struct Label {
  std::string name;
};
struct ScopeBegin {};
struct ScopeEnd {};

// Directives kept as tokens: .loc, .pragma, and `name: .callprototype/.branchtargets/...`.
struct Directive {
  std::string label;              // for `proto: .callprototype ...`
  std::string name;               // ".loc", ".pragma", ".callprototype", ...
  std::vector<std::string> args;  // tokens after the name
  bool semicolon = true;
};

using StatementNode = std::variant<Instruction, Label, RegDecl, VarDecl, ScopeBegin, ScopeEnd, Directive>;
struct Statement {
  SourceLoc loc;
  StatementNode node;
};

enum class RegClass { Pred, B16, B32, B64, B128 };
const char* to_string(RegClass c);

struct RegisterInfo {
  std::string name;
  RegClass cls = RegClass::B32;
  int width_bits = 32;  // total bits (a .v4 .f32 register is 128)
};

// Function parameter: `.param .u64 .ptr .global .align 16 name` or `.reg .b32 name`.
struct Param {
  std::vector<std::string> attrs;
  std::string name;
  std::vector<std::string> dims;
};

struct PerfDirective {
  std::string name;               // ".maxntid", ".reqntid", ".maxnreg", ".minnctapersm", ...
  std::vector<std::string> args;  // comma-separated values
};

struct Function {
  SourceLoc loc;
  std::vector<std::string> linkage;  // .visible / .extern / .weak
  bool is_entry = false;
  bool has_returns = false;
  std::vector<Param> returns;
  std::string name;
  bool has_params = false;
  std::vector<Param> params;
  std::vector<PerfDirective> perf;
  bool has_body = false;
  std::vector<Statement> body;
  std::vector<RegisterInfo> registers;  // filled by name resolution

  const PerfDirective* find_perf(const std::string& name) const;
};

struct SectionData {
  std::string label;                          // non-empty for a label item
  std::string type;                           // ".b8" / ".b16" / ".b32" / ".b64"
  std::vector<std::string> values;  // each value an expression without spaces: 42, sym, a-b
};
struct Section {
  std::string name;
  std::vector<SectionData> items;
};

// Module-level directive: .version, .target, .address_size, .file, .pragma, .alias, ...
struct ModuleDirective {
  std::string name;
  std::vector<std::string> args;
  bool semicolon = false;
};

using TopLevelNode = std::variant<ModuleDirective, VarDecl, Function, Section>;
struct TopLevel {
  SourceLoc loc;
  TopLevelNode node;
};

struct Module {
  std::vector<TopLevel> items;
  std::uint32_t next_instruction_id = 0;

  std::string version() const;  // "" when absent
  std::string target() const;   // first .target argument, e.g. "sm_90a"
  std::vector<Function*> functions();
  std::vector<const Function*> functions() const;
  Function* find_function(const std::string& name);
  const Function* find_function(const std::string& name) const;
  std::vector<const VarDecl*> globals() const;
};

// Register class and width of a PTX type token such as ".b32" or ".pred".
RegClass reg_class_of(const std::vector<std::string>& type, int* width_bits);

}  // namespace ptxevo::ir
