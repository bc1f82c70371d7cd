#include "ir/parser.hpp"

#include <charconv>
#include <unordered_map>
#include <unordered_set>

#include "ir/lexer.hpp"

namespace ptxevo::ir {
namespace {

// Guards against inputs that would make a declaration allocate without bound.
constexpr long kMaxRegistersPerFunction = 1L << 22;

bool is_linkage(std::string_view t) {
  return t == ".visible" || t == ".extern" || t == ".weak" || t == ".common";
}
bool is_state_space(std::string_view t) {
  return t == ".global" || t == ".shared" || t == ".const" || t == ".local" || t == ".param" ||
         t == ".tex" || t.rfind(".shared::", 0) == 0 || t.rfind(".const[", 0) == 0;
}
bool is_perf_directive(std::string_view t) {
  return t == ".maxntid" || t == ".reqntid" || t == ".minnctapersm" || t == ".maxnctapersm" ||
         t == ".maxnreg" || t == ".noreturn" || t == ".reqnctapercluster" || t == ".explicitcluster" ||
         t == ".maxclusterrank" || t == ".blocksareclusters" || t == ".abi_preserve" ||
         t == ".abi_preserve_control";
}

// Lets the scope maps be searched with a string_view, without building a std::string.
struct NameHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using NameMap = std::unordered_map<std::string, V, NameHash, std::equal_to<>>;

struct RegScope {
  NameMap<int> singles;
  NameMap<std::pair<int, int>> ranges;  // prefix -> (base id, count)
};

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Module run() {
    Module m;
    module_ = &m;
    while (!at_end()) m.items.push_back(parse_top_level());
    return m;
  }

 private:
  // ---- token helpers -------------------------------------------------------------------------
  const Token& peek(std::size_t ahead = 0) const {
    const std::size_t j = std::min(i_ + ahead, t_.size() - 1);
    return t_[j];
  }
  bool at_end() const { return peek().kind == TokenKind::End; }
  // Punctuation tokens are single characters.
  bool is_punct(char p, std::size_t ahead = 0) const {
    const Token& t = peek(ahead);
    return t.kind == TokenKind::Punct && t.text[0] == p;
  }
  bool is_dotted(const char* d) const { return peek().kind == TokenKind::Dotted && peek().text == d; }
  std::string take() { return std::string(next().text); }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  [[noreturn]] void fail(const Token& at, const std::string& what) const {
    std::string got = at.kind == TokenKind::End ? "end of file" : "'" + std::string(at.text) + "'";
    throw ParseError(at.loc, what + ", found " + got);
  }
  void expect_punct(const char* p, const char* context) {
    if (!is_punct(p[0])) fail(peek(), std::string("expected '") + p + "' " + context);
    next();
  }
  std::string expect_ident(const char* context) {
    if (peek().kind != TokenKind::Identifier) fail(peek(), std::string("expected a name ") + context);
    return take();
  }
  std::string expect_number(const char* context) {
    if (peek().kind != TokenKind::Number) fail(peek(), std::string("expected a number ") + context);
    return take();
  }
  // Tokens until the next ';' at brace/paren depth 0 (the ';' is consumed).
  std::vector<std::string> tokens_until_semicolon(const char* context) {
    std::vector<std::string> out;
    int depth = 0;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::End) fail(t, std::string("expected ';' to end ") + context);
      if (t.kind == TokenKind::Punct) {
        if (t.text == ";" && depth == 0) {
          next();
          return out;
        }
        if (t.text == "{" || t.text == "(" || t.text == "[") ++depth;
        if (t.text == "}" || t.text == ")" || t.text == "]") {
          if (--depth < 0) fail(t, std::string("unbalanced '") + std::string(t.text) + "' in " + context);
        }
      }
      out.push_back(take());
    }
  }
  // Tokens on the same source line as `line` (for directives that end at the newline).
  std::vector<std::string> tokens_on_line(std::uint32_t line) {
    std::vector<std::string> out;
    while (!at_end() && peek().loc.line == line) out.push_back(take());
    return out;
  }

  // ---- module level --------------------------------------------------------------------------
  TopLevel parse_top_level() {
    const Token& first = peek();
    TopLevel item;
    item.loc = first.loc;
    if (first.kind != TokenKind::Dotted) fail(first, "expected a directive or declaration at module scope");
    const std::string d(first.text);
    if (d == ".version" || d == ".address_size") {
      next();
      ModuleDirective md{d, {expect_number(d == ".version" ? "after .version" : "after .address_size")}, false};
      item.node = std::move(md);
    } else if (d == ".target") {
      next();
      ModuleDirective md{d, {}, false};
      md.args.push_back(expect_ident("after .target"));
      while (is_punct(',')) {
        next();
        md.args.push_back(",");
        md.args.push_back(expect_ident("in .target list"));
      }
      item.node = std::move(md);
    } else if (d == ".file") {
      next();
      ModuleDirective md{d, tokens_on_line(first.loc.line), false};
      if (md.args.size() < 2) throw ParseError(first.loc, ".file needs an index and a file name");
      item.node = std::move(md);
    } else if (d == ".pragma" || d == ".alias") {
      next();
      item.node = ModuleDirective{d, tokens_until_semicolon(d.c_str()), true};
    } else if (d == ".section") {
      next();
      item.node = parse_section();
    } else {
      std::vector<std::string> linkage;
      while (peek().kind == TokenKind::Dotted && is_linkage(peek().text)) linkage.push_back(take());
      if (is_dotted(".entry") || is_dotted(".func")) {
        item.node = parse_function(std::move(linkage), item.loc);
      } else if (peek().kind == TokenKind::Dotted && is_state_space(peek().text)) {
        VarDecl v = parse_var_decl(std::move(linkage));
        module_symbols_.insert(v.name);
        item.node = std::move(v);
      } else {
        fail(peek(), "expected .entry, .func or a variable declaration");
      }
    }
    return item;
  }


  Section parse_section() {
    Section s;
    if (peek().kind != TokenKind::Dotted && peek().kind != TokenKind::Identifier)
      fail(peek(), "expected a section name after .section");
    s.name = take();
    expect_punct("{", "to open the section body");
    while (!is_punct('}')) {
      const Token& t = peek();
      if (t.kind == TokenKind::Identifier && is_punct(':', 1)) {
        SectionData label;
        label.label = take();
        next();
        s.items.push_back(std::move(label));
        continue;
      }
      if (t.kind != TokenKind::Dotted) fail(t, "expected a data directive (.b8/.b16/.b32/.b64) or a label in section");
      SectionData data;
      data.type = take();
      data.values.push_back(parse_section_value());
      while (is_punct(',')) {
        next();
        data.values.push_back(parse_section_value());
      }
      s.items.push_back(std::move(data));
    }
    next();
    return s;
  }

  // value := term (('+'|'-') term)*; a data item never starts with '+' or '-', so this is unambiguous.
  std::string parse_section_value() {
    std::string v;
    while (true) {
      const Token& t = peek();
      if (is_punct('-')) {
        v += next().text;
        v += expect_number("after '-' in section data");
      } else if (t.kind == TokenKind::Identifier || t.kind == TokenKind::Number || t.kind == TokenKind::Dotted) {
        v += next().text;
      } else {
        fail(t, "expected a value in section data");
      }
      if (!(is_punct('+') || is_punct('-'))) return v;
      v += next().text;
    }
  }

  // attrs name dims [= init] ;
  VarDecl parse_var_decl(std::vector<std::string> leading) {
    VarDecl v;
    v.attrs = std::move(leading);
    parse_decl_attrs(v.attrs, "in declaration");
    v.name = expect_ident("for the declared variable");
    v.dims = parse_dims();
    if (is_punct('=')) {
      next();
      v.has_init = true;
      v.init = tokens_until_semicolon("initializer");
      if (v.init.empty()) fail(peek(), "expected an initializer after '='");
      return v;
    }
    if (is_punct(',')) fail(peek(), "one variable per declaration is supported; expected ';'");
    expect_punct(";", "after declaration");
    return v;
  }

  void parse_decl_attrs(std::vector<std::string>& attrs, const char* context) {
    while (peek().kind == TokenKind::Dotted) {
      std::string a = take();
      if (a == ".align") {
        attrs.push_back(a);
        attrs.push_back(expect_number("after .align"));
        continue;
      }
      if (a == ".attribute" || a == ".ptr" ) {
        if (is_punct('(') && !peek().space_before && a == ".attribute") {
          std::string full = a;
          full += take();
          while (!is_punct(')')) {
            if (at_end() || is_punct(';')) fail(peek(), "expected ')' to close .attribute");
            full += take();
          }
          full += take();
          attrs.push_back(full);
          continue;
        }
      }
      attrs.push_back(a);
    }
    if (attrs.empty()) fail(peek(), std::string("expected a state space or type ") + context);
  }

  std::vector<std::string> parse_dims() {
    std::vector<std::string> dims;
    while (is_punct('[')) {
      next();
      if (is_punct(']')) {
        next();
        dims.push_back("");
        continue;
      }
      dims.push_back(expect_number("as array size"));
      expect_punct("]", "after array size");
    }
    return dims;
  }

  std::vector<Param> parse_param_list(const char* what) {
    std::vector<Param> ps;
    expect_punct("(", what);
    if (is_punct(')')) {
      next();
      return ps;
    }
    while (true) {
      Param p;
      if (!(is_dotted(".param") || is_dotted(".reg"))) fail(peek(), std::string("expected .param or .reg in ") + what);
      parse_decl_attrs(p.attrs, "in parameter");
      p.name = expect_ident("for the parameter");
      p.dims = parse_dims();
      ps.push_back(std::move(p));
      if (is_punct(',')) {
        next();
        continue;
      }
      expect_punct(")", std::string("to close ").append(what).c_str());
      return ps;
    }
  }

  Function parse_function(std::vector<std::string> linkage, SourceLoc loc) {
    Function f;
    f.loc = loc;
    f.linkage = std::move(linkage);
    f.is_entry = take() == ".entry";
    if (!f.is_entry && is_punct('(')) {
      f.has_returns = true;
      f.returns = parse_param_list("the return parameter list");
    }
    f.name = expect_ident(f.is_entry ? "after .entry" : "after .func");
    if (is_punct('(')) {
      f.has_params = true;
      f.params = parse_param_list("the parameter list");
    }
    while (peek().kind == TokenKind::Dotted && is_perf_directive(peek().text)) {
      PerfDirective pd{take(), {}};
      if (peek().kind == TokenKind::Number) {
        pd.args.push_back(take());
        while (is_punct(',')) {
          next();
          pd.args.push_back(expect_number(("in " + pd.name).c_str()));
        }
      }
      f.perf.push_back(std::move(pd));
    }
    module_symbols_.insert(f.name);
    if (is_punct(';')) {
      next();
      return f;
    }
    if (!is_punct('{')) fail(peek(), "expected '{' or ';' after the function header");
    next();
    f.has_body = true;
    parse_body(f);
    return f;
  }

  // ---- function bodies -----------------------------------------------------------------------
  void parse_body(Function& f) {
    fn_ = &f;
    scopes_.clear();
    scopes_.emplace_back();
    for (const auto* list : {&f.returns, &f.params})
      for (const auto& p : *list)
        if (!p.attrs.empty() && p.attrs[0] == ".reg") {
          std::vector<std::string> type(p.attrs.begin() + 1, p.attrs.end());
          add_register(p.name, -1, type, f.loc);
        }
    // Roughly one statement per six tokens; avoids re-moving every statement as the body grows.
    {
      std::size_t j = i_;
      for (int d = 0; j < t_.size() && t_[j].kind != TokenKind::End; ++j) {
        if (t_[j].kind != TokenKind::Punct) continue;
        if (t_[j].text == "{") ++d;
        if (t_[j].text == "}" && d-- == 0) break;
      }
      f.body.reserve((j - i_) / 6);
    }
    int depth = 0;
    while (true) {
      const Token& t = peek();
      Statement st;
      st.loc = t.loc;
      if (t.kind == TokenKind::End) fail(t, "expected '}' to close the body of '" + f.name + "'");
      if (t.kind == TokenKind::Punct && t.text == "}") {
        next();
        if (depth == 0) break;
        --depth;
        scopes_.pop_back();
        st.node = ScopeEnd{};
      } else if (t.kind == TokenKind::Punct && t.text == "{") {
        next();
        ++depth;
        scopes_.emplace_back();
        st.node = ScopeBegin{};
      } else if (t.kind == TokenKind::Dotted) {
        st.node = parse_body_directive();
      } else if (t.kind == TokenKind::Identifier && is_punct(':', 1)) {
        std::string name = take();
        next();
        if (peek().kind == TokenKind::Dotted &&
            (peek().text == ".callprototype" || peek().text == ".branchtargets" || peek().text == ".calltargets")) {
          Directive d;
          d.label = name;
          d.name = take();
          d.args = tokens_until_semicolon(d.name.c_str());
          st.node = std::move(d);
        } else {
          st.node = Label{name};
        }
      } else if (t.kind == TokenKind::Identifier || is_punct('@')) {
        st.node = parse_instruction();
      } else {
        fail(t, "expected an instruction, label, declaration or directive");
      }
      f.body.push_back(std::move(st));
    }
    fn_ = nullptr;
  }

  StatementNode parse_body_directive() {
    const Token& t = peek();
    const std::string d(t.text);
    if (d == ".reg") {
      next();
      RegDecl r;
      while (peek().kind == TokenKind::Dotted) r.type.push_back(take());
      if (r.type.empty()) fail(peek(), "expected a register type after .reg");
      while (true) {
        const Token& nt = peek();
        RegName n;
        n.name = expect_ident("in .reg declaration");
        if (is_punct('<')) {
          next();
          const Token& num = peek();
          std::string c = expect_number("as register count");
          long v = 0;
          auto res = std::from_chars(c.data(), c.data() + c.size(), v);
          if (res.ec != std::errc() || res.ptr != c.data() + c.size() || v < 0 || v > kMaxRegistersPerFunction)
            throw ParseError(num.loc, "register count '" + c + "' is not a number between 0 and " +
                                          std::to_string(kMaxRegistersPerFunction));
          n.count = static_cast<int>(v);
          expect_punct(">", "after register count");
        }
        add_register(n.name, n.count, r.type, nt.loc);
        r.names.push_back(std::move(n));
        if (is_punct(',')) {
          next();
          continue;
        }
        expect_punct(";", "after .reg declaration");
        break;
      }
      return r;
    }
    if (d == ".loc") {
      next();
      Directive dir{"", d, tokens_on_line(t.loc.line), false};
      if (dir.args.size() < 3) throw ParseError(t.loc, ".loc needs a file index, a line and a column");
      return dir;
    }
    if (d == ".pragma") {
      next();
      return Directive{"", d, tokens_until_semicolon(".pragma"), true};
    }
    if (is_state_space(d) || d == ".align") {
      VarDecl v = parse_var_decl({});
      local_symbols_.insert(v.name);
      return v;
    }
    fail(t, "unexpected directive inside a function body");
  }

  void add_register(const std::string& name, int count, const std::vector<std::string>& type, SourceLoc loc) {
    int width = 0;
    const RegClass cls = reg_class_of(type, &width);
    RegScope& scope = scopes_.back();
    const long total = static_cast<long>(fn_->registers.size()) + (count < 0 ? 1 : count);
    if (total > kMaxRegistersPerFunction)
      throw ParseError(loc, "too many registers in '" + fn_->name + "' (limit " +
                                std::to_string(kMaxRegistersPerFunction) + ")");
    const int base = static_cast<int>(fn_->registers.size());
    if (count < 0) {
      if (scope.singles.count(name) || scope.ranges.count(name))
        throw ParseError(loc, "register '" + name + "' is declared twice in the same scope");
      scope.singles[name] = base;
      fn_->registers.push_back({name, cls, width});
    } else {
      if (scope.ranges.count(name))
        throw ParseError(loc, "register range '" + name + "<>' is declared twice in the same scope");
      scope.ranges[name] = {base, count};
      for (int k = 0; k < count; ++k) fn_->registers.push_back({name + std::to_string(k), cls, width});
    }
  }

  int lookup_register(const std::string& name) const {
    // Names like %r12 resolve against a range %r<N>; a vector component (.x) is stripped.
    std::string_view base = name;
    for (int attempt = 0; attempt < 2; ++attempt) {
      for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
        if (auto s = it->singles.find(base); s != it->singles.end()) return s->second;
        std::size_t k = base.size();
        while (k > 0 && std::isdigit(static_cast<unsigned char>(base[k - 1]))) --k;
        if (k < base.size() && k > 0) {
          const std::string_view digits = base.substr(k);
          if (digits.size() > 1 && digits[0] == '0') continue;  // %r01 is not in %r<N>
          if (auto r = it->ranges.find(base.substr(0, k)); r != it->ranges.end()) {
            long idx = 0;
            auto res = std::from_chars(digits.data(), digits.data() + digits.size(), idx);
            if (res.ec == std::errc() && idx < r->second.second) return r->second.first + static_cast<int>(idx);
          }
        }
      }
      if (base.size() > 2 && base[base.size() - 2] == '.') base.remove_suffix(2);
      else break;
    }
    return -1;
  }

  Instruction parse_instruction() {
    Instruction ins;
    ins.id = module_->next_instruction_id++;
    if (is_punct('@')) {
      next();
      Guard g;
      if (is_punct('!')) {
        next();
        g.negated = true;
      }
      const Token& at = peek();
      g.pred = parse_leaf("as the guard predicate");
      if (g.pred.kind != OperandKind::Register)
        throw ParseError(at.loc, "expected a predicate register as the guard, found '" + std::string(at.text) + "'");
      ins.guard = std::move(g);
    }
    const Token& op = peek();
    if (op.kind != TokenKind::Identifier || op.text[0] == '%') fail(op, "expected an instruction opcode");
    ins.opcode = take();
    // One allocation instead of the 1 -> 2 -> 4 growth most instructions would go through.
    ins.modifiers.reserve(6);
    while (peek().kind == TokenKind::Dotted) ins.modifiers.push_back(take());
    if (is_punct(';')) {
      next();
      return ins;
    }
    ins.operands.reserve(4);
    while (true) {
      ins.operands.push_back(parse_operand(true));
      if (is_punct(',')) {
        next();
        continue;
      }
      if (is_punct(';')) {
        next();
        return ins;
      }
      fail(peek(), "expected ',' or ';' after operand of '" + ins.full_opcode() + "'");
    }
  }

  Operand parse_operand(bool top) {
    if (is_punct('{')) {
      next();
      Operand v;
      v.kind = OperandKind::Vector;
      v.items.reserve(4);
      if (!is_punct('}')) {
        while (true) {
          v.items.push_back(parse_leaf("in vector operand"));
          if (is_punct(',')) {
            next();
            continue;
          }
          break;
        }
      }
      expect_punct("}", "to close vector operand");
      return v;
    }
    if (is_punct('[')) return parse_address();
    if (is_punct('(') && top) {
      next();
      Operand l;
      l.kind = OperandKind::List;
      if (!is_punct(')')) {
        while (true) {
          l.items.push_back(parse_operand(false));
          if (is_punct(',')) {
            next();
            continue;
          }
          break;
        }
      }
      expect_punct(")", "to close operand list");
      return l;
    }
    Operand o = parse_leaf("as operand");
    if (is_punct('|')) {
      next();
      Operand pair;
      pair.kind = OperandKind::PredPair;
      pair.items.push_back(std::move(o));
      pair.items.push_back(parse_leaf("after '|'"));
      return pair;
    }
    return o;
  }

  Operand parse_address() {
    next();  // [
    Operand a;
    a.kind = OperandKind::Address;
    a.items.push_back(parse_leaf("as address base"));
    if (is_punct('+') || is_punct('-')) {
      bool neg = take() == "-";
      if (is_punct('-')) {
        next();
        neg = !neg;
      }
      const Token& num = peek();
      std::string n = expect_number("as address offset");
      a.offset = parse_int(n, num.loc);
      if (neg) a.offset = -a.offset;
      a.has_offset = true;
    }
    while (is_punct(',')) {
      next();
      if (is_punct('[')) fail(peek(), "nested address operand");
      a.items.push_back(parse_operand(false));
    }
    expect_punct("]", "to close address operand");
    return a;
  }

  static std::int64_t parse_int(const std::string& s, SourceLoc loc) {
    std::string body = s;
    if (!body.empty() && (body.back() == 'U' || body.back() == 'u')) body.pop_back();
    int base = 10;
    std::size_t start = 0;
    if (body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')) {
      base = 16;
      start = 2;
    } else if (body.size() > 2 && body[0] == '0' && (body[1] == 'b' || body[1] == 'B')) {
      base = 2;
      start = 2;
    }
    std::uint64_t v = 0;
    auto res = std::from_chars(body.data() + start, body.data() + body.size(), v, base);
    if (res.ec != std::errc() || res.ptr != body.data() + body.size())
      throw ParseError(loc, "expected an integer offset, found '" + s + "'");
    return static_cast<std::int64_t>(v);
  }

  Operand parse_leaf(const char* context) {
    Operand o;
    if (is_punct('!')) {
      next();
      if (is_punct('!')) fail(peek(), "expected a predicate after '!'");
      o = parse_leaf(context);
      o.negated = true;
      return o;
    }
    if (is_punct('-')) {
      next();
      if (peek().kind != TokenKind::Number) fail(peek(), std::string("expected a number after '-' ") + context);
      o.kind = OperandKind::Immediate;
      o.text = "-" + take();
      return o;
    }
    const Token& t = peek();
    if (t.kind == TokenKind::Number) {
      o.kind = OperandKind::Immediate;
      o.text = take();
      return o;
    }
    if (t.kind != TokenKind::Identifier) fail(t, std::string("expected a register, name or number ") + context);
    o.text = take();
    if (o.text == "_") {
      o.kind = OperandKind::Sink;
      return o;
    }
    // %tid.x, %v.y: the component belongs to the name.
    if (peek().kind == TokenKind::Dotted && !peek().space_before && peek().text.size() == 2 &&
        std::string_view("xyzwrgba").find(peek().text[1]) != std::string_view::npos)
      o.text += take();
    o.reg = fn_ ? lookup_register(o.text) : -1;
    if (o.reg >= 0) {
      o.kind = OperandKind::Register;
    } else if (o.text[0] == '%') {
      o.kind = is_special_register(o.text) ? OperandKind::Special : OperandKind::Register;
    } else {
      o.kind = OperandKind::Symbol;
      if ((is_punct('+') || is_punct('-')) && peek(1).kind == TokenKind::Number) {
        const bool neg = take() == "-";
        const Token& num = peek();
        o.offset = parse_int(take(), num.loc);
        if (neg) o.offset = -o.offset;
        o.has_offset = true;
      }
    }
    return o;
  }

  std::vector<Token> t_;
  std::size_t i_ = 0;
  Module* module_ = nullptr;
  Function* fn_ = nullptr;
  std::vector<RegScope> scopes_;
  std::unordered_set<std::string> module_symbols_;
  std::unordered_set<std::string> local_symbols_;
};

}  // namespace

ParseResult parse_ptx(std::string_view text) {
  ParseResult r;
  try {
    Parser p(tokenize(text));
    r.module = p.run();
  } catch (const ParseError& e) {
    r.error = Diagnostic{e.loc(), e.what()};
  }
  return r;
}

}  // namespace ptxevo::ir
