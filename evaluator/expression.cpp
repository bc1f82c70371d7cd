#include "evaluator/expression.hpp"

#include "evaluator/knob_constraints.hpp"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <variant>

namespace ptxevo::evaluator {
namespace {

// ---- Lexer -------------------------------------------------------------------------------

enum class Tok { Int, Ident, Str, Op, LParen, RParen, Comma, End };

struct Token {
  Tok type = Tok::End;
  std::size_t col = 0;  // 1-based
  std::string text;     // identifier, string contents or operator spelling
  std::int64_t value = 0;
};

// Internal failure; the public functions turn it into ConstraintError or invalid_argument.
struct Failure {
  std::size_t column;
  std::string message;
};

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string describe_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (std::isprint(u)) return std::string("'") + c + "'";
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("byte 0x") + kHex[u >> 4] + kHex[u & 15];
}

std::vector<Token> lex(const std::string& s) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    const std::size_t col = i + 1;
    if (c == ' ' || c == '\t') {
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j < s.size() && is_ident_char(s[j])) throw Failure{col, "invalid integer literal"};
      Token t{Tok::Int, col, s.substr(i, j - i), 0};
      auto [p, ec] = std::from_chars(s.data() + i, s.data() + j, t.value);
      if (ec != std::errc()) throw Failure{col, "integer literal " + t.text + " does not fit in 64 bits"};
      out.push_back(std::move(t));
      i = j;
    } else if (is_ident_start(c)) {
      std::size_t j = i;
      while (j < s.size() && is_ident_char(s[j])) ++j;
      out.push_back({Tok::Ident, col, s.substr(i, j - i), 0});
      i = j;
    } else if (c == '"') {
      // No escapes: knob strings are identifier-like (they become -DNAME=VALUE).
      const std::size_t close = s.find('"', i + 1);
      if (close == std::string::npos) throw Failure{col, "unterminated string literal"};
      out.push_back({Tok::Str, col, s.substr(i + 1, close - i - 1), 0});
      i = close + 1;
    } else if (c == '(' || c == ')') {
      out.push_back({c == '(' ? Tok::LParen : Tok::RParen, col, std::string(1, c), 0});
      ++i;
    } else if (c == ',') {
      out.push_back({Tok::Comma, col, ",", 0});
      ++i;
    } else {
      const std::string two = s.substr(i, 2);
      if (two == "==" || two == "!=" || two == "<=" || two == ">=" || two == "&&" || two == "||") {
        out.push_back({Tok::Op, col, two, 0});
        i += 2;
      } else if (c == '=') {
        throw Failure{col, "'=' is not an operator; use '==' to compare"};
      } else if (c == '&' || c == '|') {
        throw Failure{col, std::string("expected '") + c + c + "'; there are no bitwise operators"};
      } else if (std::string_view("+-*/%<>!?:").find(c) != std::string_view::npos) {
        out.push_back({Tok::Op, col, std::string(1, c), 0});
        ++i;
      } else {
        throw Failure{col, "unexpected character " + describe_char(c)};
      }
    }
  }
  out.push_back({Tok::End, s.size() + 1, "", 0});
  return out;
}

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::End: return "the end of the expression";
    case Tok::Str: return "'\"" + t.text + "\"'";
    default: return "'" + t.text + "'";
  }
}

// ---- Values and types --------------------------------------------------------------------

// AnyKnob: a knob whose kind is unknown (check_constraint_syntax); an integer or a string.
enum class Kind { Int, Str, Bool, AnyKnob };

struct Value {
  Kind kind = Kind::Int;
  std::size_t col = 0;  // where the subexpression starts, for error messages
  std::int64_t i = 0;
  bool b = false;
  std::string s;
  std::string cpp;  // the C++ text of the value (expression_to_cpp only)
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Int: return "an integer";
    case Kind::Str: return "a string";
    case Kind::Bool: return "a condition";
    case Kind::AnyKnob: return "a knob";
  }
  return "?";
}

Kind kind_of(ExprKind k) {
  switch (k) {
    case ExprKind::Int: return Kind::Int;
    case ExprKind::Str: return Kind::Str;
    case ExprKind::Bool: return Kind::Bool;
  }
  return Kind::Int;
}

void require_int(const Value& v, const std::string& op) {
  if (v.kind != Kind::Int && v.kind != Kind::AnyKnob)
    throw Failure{v.col, "'" + op + "' expects an integer, got " + kind_name(v.kind)};
}

void require_bool(const Value& v, const std::string& op) {
  if (v.kind != Kind::Bool) throw Failure{v.col, "'" + op + "' expects a condition, got " + kind_name(v.kind)};
}

// == and != compare integers with integers, strings with strings, conditions with conditions.
void require_comparable(const Value& a, const Value& b, const std::string& op) {
  const auto fits_knob = [](Kind k) { return k == Kind::Int || k == Kind::Str || k == Kind::AnyKnob; };
  const bool ok = a.kind == b.kind || (a.kind == Kind::AnyKnob && fits_knob(b.kind)) ||
                  (b.kind == Kind::AnyKnob && fits_knob(a.kind));
  if (!ok) throw Failure{b.col, "'" + op + "' compares " + kind_name(a.kind) + " with " + kind_name(b.kind)};
}

std::string int_cpp(std::int64_t i) {
  if (i == std::numeric_limits<std::int64_t>::min()) return "std::numeric_limits<std::int64_t>::min()";
  return i < 0 ? "(" + std::to_string(i) + "LL)" : std::to_string(i) + "LL";
}
Value make_bool(bool b, std::size_t col, std::string cpp = {}) { return Value{Kind::Bool, col, 0, b, {}, std::move(cpp)}; }
Value make_int(std::int64_t i, std::size_t col, std::string cpp = {}) {
  return Value{Kind::Int, col, i, false, {}, cpp.empty() ? int_cpp(i) : std::move(cpp)};
}

// Checked integer arithmetic: signed overflow would be UB, so it is an error instead.
std::int64_t arith(const std::string& op, std::int64_t a, std::int64_t b, std::size_t col) {
  std::int64_t r = 0;
  bool overflow = false;
  if (op == "+") {
    overflow = __builtin_add_overflow(a, b, &r);
  } else if (op == "-") {
    overflow = __builtin_sub_overflow(a, b, &r);
  } else if (op == "*") {
    overflow = __builtin_mul_overflow(a, b, &r);
  } else {
    if (b == 0) throw Failure{col, op == "/" ? "division by zero" : "modulo by zero"};
    if (a == std::numeric_limits<std::int64_t>::min() && b == -1) {
      overflow = true;
    } else {
      r = op == "/" ? a / b : a % b;
    }
  }
  if (overflow) throw Failure{col, "integer overflow in " + std::to_string(a) + " " + op + " " + std::to_string(b)};
  return r;
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (a.kind == Kind::Str) return (a.s == b.s) == (op == "==");
  if (a.kind == Kind::Bool) return (a.b == b.b) == (op == "==");
  if (op == "==") return a.i == b.i;
  if (op == "!=") return a.i != b.i;
  if (op == "<") return a.i < b.i;
  if (op == "<=") return a.i <= b.i;
  if (op == ">") return a.i > b.i;
  return a.i >= b.i;
}

// ---- Parser and evaluator ----------------------------------------------------------------

// Where names come from; exactly one of names, knobs, values and types is set.
struct Env {
  const std::vector<std::string>* names = nullptr;  // knob names, kinds unknown
  const Knobs* knobs = nullptr;
  const Bindings* values = nullptr;
  const ExprTypes* types = nullptr;
  const std::set<std::string>* runtime = nullptr;  // with `values`: integer variables of generated code
  bool evaluate = false;  // false: check only, the values are not used
  bool emit = false;      // build Value::cpp (expression_to_cpp, expression_to_python)
  bool python = false;    // emit Python instead of C++
};

// One pass parses, type-checks and (with Env::evaluate) evaluates. `live` is false inside the
// operand that && or || short-circuits away: it is still parsed and type-checked, but runtime
// errors (division by zero, overflow) are not raised there, as C would not evaluate it either.
class Parser {
 public:
  Parser(const std::string& expr, const Env& env) : toks_(lex(expr)), env_(env) {}

  // `constraint`: the knob constraint wording of the kind error.
  Value parse(Kind want, bool constraint) {
    Value v = parse_expr(true);
    if (peek().type != Tok::End) throw Failure{peek().col, "expected an operator, got " + describe(peek())};
    const bool ok = v.kind == want || (v.kind == Kind::AnyKnob && want != Kind::Bool);
    if (!ok && constraint)
      throw Failure{
          v.col, std::string("a constraint must be a condition (a comparison, &&, || or !), got ") + kind_name(v.kind)};
    if (!ok) throw Failure{v.col, std::string("expected ") + kind_name(want) + ", got " + kind_name(v.kind)};
    return v;
  }

 private:
  const Token& peek() const { return toks_[pos_]; }
  bool at_op(std::initializer_list<const char*> ops) const {
    if (peek().type != Tok::Op) return false;
    for (const char* o : ops)
      if (peek().text == o) return true;
    return false;
  }
  std::string bool_text(bool b) const { return env_.python ? (b ? "True" : "False") : (b ? "true" : "false"); }
  void enter(std::size_t col) {
    if (++depth_ > kMaxExpressionNesting)
      throw Failure{col, "nesting deeper than " + std::to_string(kMaxExpressionNesting) + " levels"};
  }

  Value parse_expr(bool live) {
    Value c = parse_or(live);
    if (!at_op({"?"})) return c;
    const Token& q = toks_[pos_++];
    enter(q.col);
    require_bool(c, "?");
    Value a = parse_expr(live && (!env_.evaluate || c.b));
    if (!at_op({":"})) throw Failure{peek().col, "expected ':' of the '?' at column " + std::to_string(q.col) + ", got " + describe(peek())};
    ++pos_;
    Value b = parse_expr(live && (!env_.evaluate || !c.b));
    --depth_;
    const bool same = a.kind == b.kind || a.kind == Kind::AnyKnob || b.kind == Kind::AnyKnob;
    if (!same) throw Failure{b.col, std::string("the branches of '?' differ: ") + kind_name(a.kind) + " and " + kind_name(b.kind)};
    Value r = env_.evaluate && !c.b ? b : a;
    r.col = c.col;
    if (a.kind == Kind::AnyKnob) r.kind = b.kind;
    if (env_.emit)
      r.cpp = env_.python ? "(" + a.cpp + " if " + c.cpp + " else " + b.cpp + ")" : "(" + c.cpp + " ? " + a.cpp + " : " + b.cpp + ")";
    return r;
  }

  Value parse_or(bool live) {
    Value lhs = parse_and(live);
    while (at_op({"||"})) {
      const std::string op = toks_[pos_++].text;
      require_bool(lhs, op);
      Value rhs = parse_and(live && !lhs.b);
      require_bool(rhs, op);
      lhs = make_bool(lhs.b || rhs.b, lhs.col, env_.emit ? "(" + lhs.cpp + (env_.python ? " or " : " || ") + rhs.cpp + ")" : "");
    }
    return lhs;
  }

  Value parse_and(bool live) {
    Value lhs = parse_cmp(live);
    while (at_op({"&&"})) {
      const std::string op = toks_[pos_++].text;
      require_bool(lhs, op);
      Value rhs = parse_cmp(live && (!env_.evaluate || lhs.b));
      require_bool(rhs, op);
      lhs = make_bool(lhs.b && rhs.b, lhs.col, env_.emit ? "(" + lhs.cpp + (env_.python ? " and " : " && ") + rhs.cpp + ")" : "");
    }
    return lhs;
  }

  Value parse_cmp(bool live) {
    Value lhs = parse_sum(live);
    if (!at_op({"==", "!=", "<", "<=", ">", ">="})) return lhs;
    const std::string op = toks_[pos_++].text;
    Value rhs = parse_sum(live);
    if (op == "==" || op == "!=") {
      require_comparable(lhs, rhs, op);
    } else {
      require_int(lhs, op);
      require_int(rhs, op);
    }
    if (at_op({"==", "!=", "<", "<=", ">", ">="}))
      throw Failure{peek().col, "comparisons do not chain; combine them with && or parentheses"};
    // Strings are always known (no runtime strings), so their comparison folds.
    const bool known = lhs.kind == Kind::Str;
    const bool v = (env_.evaluate || known) && compare(op, lhs, rhs);
    std::string cpp;
    if (env_.emit) cpp = known ? bool_text(v) : "(" + lhs.cpp + " " + op + " " + rhs.cpp + ")";
    return make_bool(v, lhs.col, cpp);
  }

  Value parse_sum(bool live) {
    Value lhs = parse_product(live);
    while (at_op({"+", "-"})) lhs = binary_arith(lhs, live, &Parser::parse_product);
    return lhs;
  }

  Value parse_product(bool live) {
    Value lhs = parse_unary(live);
    while (at_op({"*", "/", "%"})) lhs = binary_arith(lhs, live, &Parser::parse_unary);
    return lhs;
  }

  Value binary_arith(const Value& lhs, bool live, Value (Parser::*operand)(bool)) {
    const Token& op_tok = toks_[pos_++];
    Value rhs = (this->*operand)(live);
    require_int(lhs, op_tok.text);
    require_int(rhs, op_tok.text);
    const bool run = env_.evaluate && live;
    std::string cpp = "0";
    if (env_.emit && env_.python && (op_tok.text == "/" || op_tok.text == "%"))
      cpp = std::string(op_tok.text == "/" ? "ptxevo_div(" : "ptxevo_mod(") + lhs.cpp + ", " + rhs.cpp + ")";
    else if (env_.emit)
      cpp = "(" + lhs.cpp + " " + op_tok.text + " " + rhs.cpp + ")";
    return make_int(run ? arith(op_tok.text, lhs.i, rhs.i, op_tok.col) : 0, lhs.col, cpp);
  }

  // Prefix operators, parentheses, calls and ?: are the only recursion, so only they count as nesting.
  Value parse_unary(bool live) {
    const Token& t = peek();
    const bool prefix = at_op({"!", "-"});
    if (!prefix && t.type != Tok::LParen) return parse_primary(live);
    enter(t.col);
    ++pos_;
    Value v;
    if (prefix) {
      v = parse_unary(live);
      if (t.text == "!") {
        require_bool(v, "!");
        v = make_bool(!v.b, t.col, env_.emit ? (env_.python ? "(not " : "(!") + v.cpp + ")" : "");
      } else {
        require_int(v, "-");
        v = make_int(env_.evaluate && live ? arith("-", 0, v.i, t.col) : 0, t.col, env_.emit ? "(-" + v.cpp + ")" : "0");
      }
    } else {
      v = parse_expr(live);
      if (peek().type != Tok::RParen)
        throw Failure{peek().col,
                      "expected ')' to close the '(' at column " + std::to_string(t.col) + ", got " + describe(peek())};
      ++pos_;
      v.col = t.col;
    }
    --depth_;
    return v;
  }

  Value parse_primary(bool live) {
    const Token& t = toks_[pos_];
    switch (t.type) {
      case Tok::Int: ++pos_; return make_int(t.value, t.col, env_.python ? std::to_string(t.value) : std::string());
      case Tok::Str: ++pos_; return Value{Kind::Str, t.col, 0, false, t.text, {}};
      case Tok::Ident:
        ++pos_;
        if (peek().type == Tok::LParen) return call(t, live);
        return lookup(t);
      default: throw Failure{t.col, "expected a number, a name, a \"string\" or '(', got " + describe(t)};
    }
  }

  // min(a, b), max(a, b), cdiv(a, b), next_pow2(a).
  Value call(const Token& fn, bool live) {
    const bool unary = fn.text == "next_pow2";
    if (fn.text != "min" && fn.text != "max" && fn.text != "cdiv" && !unary)
      throw Failure{fn.col, "unknown function '" + fn.text + "'; functions: min, max, cdiv, next_pow2"};
    const std::string arity = fn.text + (unary ? "() takes one argument" : "() takes two arguments");
    enter(fn.col);
    ++pos_;  // (
    Value a = parse_expr(live);
    Value b = make_int(1, a.col);
    if (!unary) {
      if (peek().type != Tok::Comma) throw Failure{peek().col, arity + "; expected ',', got " + describe(peek())};
      ++pos_;
      b = parse_expr(live);
    }
    if (peek().type != Tok::RParen) throw Failure{peek().col, arity + "; expected ')', got " + describe(peek())};
    ++pos_;
    --depth_;
    require_int(a, fn.text + "()");
    require_int(b, fn.text + "()");
    std::int64_t r = 0;
    if (env_.evaluate && live) {
      if (fn.text == "min") {
        r = std::min(a.i, b.i);
      } else if (fn.text == "max") {
        r = std::max(a.i, b.i);
      } else if (unary) {
        if (a.i < 1 || a.i > (std::int64_t{1} << 62)) throw Failure{fn.col, "next_pow2(" + std::to_string(a.i) + ") needs 1 <= a <= 2^62"};
        r = 1;
        while (r < a.i) r *= 2;
      } else {
        if (a.i < 0 || b.i <= 0) throw Failure{fn.col, "cdiv(" + std::to_string(a.i) + ", " + std::to_string(b.i) + ") needs a >= 0 and b > 0"};
        r = a.i / b.i + (a.i % b.i != 0 ? 1 : 0);
      }
    }
    std::string cpp = "0";
    if (env_.emit) {
      if (unary) cpp = "ptxevo_next_pow2(" + a.cpp + ")";
      else if (fn.text == "cdiv") cpp = "ptxevo_cdiv(" + a.cpp + ", " + b.cpp + ")";
      else cpp = (env_.python ? fn.text + "(" : "std::" + fn.text + "<std::int64_t>(") + a.cpp + ", " + b.cpp + ")";
    }
    return make_int(r, fn.col, cpp);
  }

  Value lookup(const Token& t) const {
    if (env_.names) {
      for (const auto& n : *env_.names)
        if (n == t.text) return Value{Kind::AnyKnob, t.col, 0, false, {}, {}};
      throw Failure{t.col, unknown_name(t.text, *env_.names, "knob")};
    }
    if (env_.types) {
      const auto it = env_.types->find(t.text);
      if (it == env_.types->end()) throw Failure{t.col, unknown_name(t.text, keys(*env_.types), "name")};
      return Value{kind_of(it->second), t.col, 0, false, {}, {}};
    }
    if (env_.values) {
      if (env_.runtime && env_.runtime->count(t.text)) return Value{Kind::Int, t.col, 0, false, {}, t.text};
      const auto it = env_.values->find(t.text);
      if (it == env_.values->end()) throw Failure{t.col, unknown_name(t.text, keys(*env_.values), "name")};
      if (const auto* i = std::get_if<std::int64_t>(&it->second))
        return make_int(*i, t.col, env_.python ? std::to_string(*i) : std::string());
      if (const auto* b = std::get_if<bool>(&it->second)) return make_bool(*b, t.col, bool_text(*b));
      return Value{Kind::Str, t.col, 0, false, std::get<std::string>(it->second), {}};
    }
    const auto it = env_.knobs->find(t.text);
    if (it == env_.knobs->end()) throw Failure{t.col, unknown_name(t.text, keys(*env_.knobs), "knob")};
    if (const auto* i = std::get_if<std::int64_t>(&it->second)) return make_int(*i, t.col);
    return Value{Kind::Str, t.col, 0, false, std::get<std::string>(it->second), {}};
  }

  template <class Map>
  static std::vector<std::string> keys(const Map& m) {
    std::vector<std::string> out;
    for (const auto& kv : m) out.push_back(kv.first);
    return out;
  }

  static std::string unknown_name(const std::string& name, const std::vector<std::string>& names, const std::string& what) {
    if (names.empty()) return "unknown " + what + " '" + name + "' (there are no " + what + "s)";
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return "unknown " + what + " '" + name + "'; " + what + "s: " + list;
  }

  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  Env env_;
};

std::optional<ConstraintError> check(const std::string& expr, const Env& env) {
  try {
    Parser(expr, env).parse(Kind::Bool, true);
    return std::nullopt;
  } catch (const Failure& f) {
    return ConstraintError{f.column, f.message};
  }
}

[[noreturn]] void rethrow(const std::string& what, const std::string& expr, const Failure& f) {
  throw std::invalid_argument(what + " '" + expr + "', column " + std::to_string(f.column) + ": " + f.message);
}

}  // namespace

const char* to_string(ExprKind k) { return kind_name(kind_of(k)); }

std::optional<ConstraintError> check_constraint_syntax(const std::string& expr,
                                                       const std::vector<std::string>& knob_names) {
  return check(expr, Env{&knob_names, nullptr, nullptr, nullptr, nullptr, false, false, false});
}

std::optional<ConstraintError> check_constraint(const std::string& expr, const Knobs& knobs) {
  return check(expr, Env{nullptr, &knobs, nullptr, nullptr, nullptr, false, false, false});
}

bool constraint_holds(const std::string& expr, const Knobs& knobs) {
  try {
    return Parser(expr, Env{nullptr, &knobs, nullptr, nullptr, nullptr, true, false, false}).parse(Kind::Bool, true).b;
  } catch (const Failure& f) {
    rethrow("constraint", expr, f);
  }
}

std::optional<ExpressionError> check_expression(const std::string& expr, const ExprTypes& types, ExprKind want) {
  try {
    Parser(expr, Env{nullptr, nullptr, nullptr, &types, nullptr, false, false, false}).parse(kind_of(want), false);
    return std::nullopt;
  } catch (const Failure& f) {
    return ExpressionError{f.column, f.message};
  }
}

std::int64_t evaluate_int(const std::string& expr, const Bindings& values) {
  try {
    return Parser(expr, Env{nullptr, nullptr, &values, nullptr, nullptr, true, false, false}).parse(Kind::Int, false).i;
  } catch (const Failure& f) {
    rethrow("expression", expr, f);
  }
}

bool evaluate_condition(const std::string& expr, const Bindings& values) {
  try {
    return Parser(expr, Env{nullptr, nullptr, &values, nullptr, nullptr, true, false, false}).parse(Kind::Bool, false).b;
  } catch (const Failure& f) {
    rethrow("expression", expr, f);
  }
}

std::string evaluate_string(const std::string& expr, const Bindings& values) {
  try {
    Value v = Parser(expr, Env{nullptr, nullptr, &values, nullptr, nullptr, true, false, false}).parse(Kind::Str, false);
    return v.s;
  } catch (const Failure& f) {
    rethrow("expression", expr, f);
  }
}

std::string expression_to_cpp(const std::string& expr, const Bindings& constants, const std::set<std::string>& runtime,
                              ExprKind want) {
  try {
    return Parser(expr, Env{nullptr, nullptr, &constants, nullptr, &runtime, false, true, false}).parse(kind_of(want), false).cpp;
  } catch (const Failure& f) {
    rethrow("expression", expr, f);
  }
}

std::string expression_to_python(const std::string& expr, const Bindings& constants,
                                 const std::set<std::string>& runtime, ExprKind want) {
  try {
    return Parser(expr, Env{nullptr, nullptr, &constants, nullptr, &runtime, false, true, true}).parse(kind_of(want), false).cpp;
  } catch (const Failure& f) {
    rethrow("expression", expr, f);
  }
}

}  // namespace ptxevo::evaluator
