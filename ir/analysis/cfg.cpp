#include "ir/analysis/cfg.hpp"

#include <algorithm>
#include <map>
#include <variant>

namespace ptxevo::ir {
namespace {

// Labels and .branchtargets lists are visible in the `{ }` scope that declares them and in the
// scopes nested inside it, so names are resolved innermost scope first.
struct ScopeTable {
  std::vector<int> parent;                          // parent scope id; -1 for the function scope
  std::vector<std::map<std::string, int>> labels;   // label -> block, per scope
  std::vector<std::map<std::string, const Directive*>> branch_targets;

  int add(int parent_scope) {
    parent.push_back(parent_scope);
    labels.emplace_back();
    branch_targets.emplace_back();
    return static_cast<int>(parent.size()) - 1;
  }
  int find_label(int scope, const std::string& name) const {
    for (int s = scope; s >= 0; s = parent[s])
      if (auto it = labels[s].find(name); it != labels[s].end()) return it->second;
    // Not visible from here: PTX forbids it, but an edge to a same-named label in another scope
    // is a better guess for the analyses than a missing edge.
    for (const auto& m : labels)
      if (auto it = m.find(name); it != m.end()) return it->second;
    return -1;
  }
  const Directive* find_branch_targets(int scope, const std::string& name) const {
    for (int s = scope; s >= 0; s = parent[s]) {
      const auto& m = branch_targets[s];
      if (auto it = m.find(name); it != m.end()) return it->second;
    }
    return nullptr;
  }
};

void add_edge(Cfg& g, int from, int to) {
  if (to < 0) return;  // unknown label: the verifier reports it, the CFG just has no edge
  auto& succs = g.blocks[from].succs;
  if (std::find(succs.begin(), succs.end(), to) != succs.end()) return;
  succs.push_back(to);
  g.blocks[to].preds.push_back(from);
}

const std::string* symbol_operand(const Instruction& ins, std::size_t i) {
  if (i >= ins.operands.size() || ins.operands[i].kind != OperandKind::Symbol) return nullptr;
  return &ins.operands[i].text;
}

}  // namespace

bool ends_block(const Instruction& ins) {
  return ins.opcode == "bra" || ins.opcode == "brx" || ins.opcode == "ret" || ins.opcode == "exit" ||
         ins.opcode == "trap";
}

std::size_t Cfg::edge_count() const {
  std::size_t n = 0;
  for (const auto& b : blocks) n += b.succs.size();
  return n;
}

int Cfg::block_of_statement(std::size_t statement) const {
  return statement < statement_block.size() ? statement_block[statement] : -1;
}

Cfg build_cfg(const Function& f) {
  Cfg g;
  g.statement_block.assign(f.body.size(), -1);
  if (!f.has_body) return g;

  ScopeTable scopes;
  int scope = scopes.add(-1);
  std::vector<int> statement_scope(f.body.size(), 0);

  // Pass 1: split the flat body into blocks. A block is created lazily, by the first label or
  // instruction after a terminator, so no empty block trails a final `ret`.
  int current = -1;
  bool closed = true;  // the current block ended with a terminator (or there is none yet)
  auto new_block = [&](std::string label) {
    BasicBlock b;
    b.id = static_cast<int>(g.blocks.size());
    b.label = std::move(label);
    g.blocks.push_back(std::move(b));
    current = static_cast<int>(g.blocks.size()) - 1;
    closed = false;
  };
  for (std::size_t i = 0; i < f.body.size(); ++i) {
    const StatementNode& node = f.body[i].node;
    if (std::holds_alternative<ScopeBegin>(node)) {
      scope = scopes.add(scope);
    } else if (std::holds_alternative<ScopeEnd>(node)) {
      if (scopes.parent[scope] >= 0) scope = scopes.parent[scope];
    } else if (const auto* label = std::get_if<Label>(&node)) {
      // Consecutive labels name one block: an empty block between them would only add an edge.
      if (!closed && current >= 0 && g.blocks[current].instructions.empty()) {
        auto& b = g.blocks[current];
        if (b.label.empty()) b.label = label->name;
        else b.aliases.push_back(label->name);
      } else {
        new_block(label->name);
      }
      scopes.labels[scope].emplace(label->name, current);
    } else if (const auto* dir = std::get_if<Directive>(&node)) {
      if (dir->name == ".branchtargets" && !dir->label.empty())
        scopes.branch_targets[scope].emplace(dir->label, dir);
    } else if (const auto* ins = std::get_if<Instruction>(&node)) {
      if (closed) new_block("");
      g.blocks[current].instructions.push_back(i);
      if (ends_block(*ins)) closed = true;
    }
    statement_scope[i] = scope;
    g.statement_block[i] = (std::holds_alternative<Instruction>(node) || !closed) ? current : -1;
  }
  if (g.blocks.empty()) new_block("");  // an empty body is still one (empty) entry block
  g.entry = 0;

  // Pass 2: edges from each block's last instruction; anything that is not an unguarded
  // transfer falls through to the next block in body order (or off the end of the function).
  const int n = static_cast<int>(g.blocks.size());
  for (int b = 0; b < n; ++b) {
    auto& block = g.blocks[b];
    bool falls_through = true;
    if (!block.instructions.empty()) {
      const std::size_t at = block.instructions.back();
      const auto& ins = std::get<Instruction>(f.body[at].node);
      const int sc = statement_scope[at];
      const bool guarded = ins.guard.has_value();
      if (ins.opcode == "bra") {
        if (const std::string* target = symbol_operand(ins, 0)) add_edge(g, b, scopes.find_label(sc, *target));
        falls_through = guarded;
      } else if (ins.opcode == "brx") {
        // brx.idx index, tlist: the targets are the labels of the `tlist: .branchtargets` list.
        if (const std::string* list = symbol_operand(ins, 1))
          if (const Directive* d = scopes.find_branch_targets(sc, *list))
            for (const auto& tok : d->args)
              if (tok != ",") add_edge(g, b, scopes.find_label(sc, tok));
        falls_through = guarded;
      } else if (ins.opcode == "ret" || ins.opcode == "exit" || ins.opcode == "trap") {
        block.exits = true;
        falls_through = guarded;
      }
    }
    if (falls_through) {
      if (b + 1 < n) add_edge(g, b, b + 1);
      else block.exits = true;  // falling off the end returns
    }
  }
  return g;
}

}  // namespace ptxevo::ir
