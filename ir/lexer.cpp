#include "ir/lexer.hpp"

#include <cctype>

namespace ptxevo::ir {
namespace {

// Character classes as plain comparisons: the locale-aware <cctype> calls dominated lexing.
constexpr bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }
constexpr bool is_ident_start(char c) { return is_alpha(c) || c == '_' || c == '$' || c == '%'; }
constexpr bool is_ident_char(char c) { return is_alpha(c) || is_digit(c) || c == '_' || c == '$'; }

class Lexer {
 public:
  explicit Lexer(std::string_view text) : s_(text) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    out.reserve(s_.size() / 3 + 8);
    bool space = true;
    while (true) {
      space = skip_space_and_comments() || space;
      Token t;
      t.loc = {line_, col_};
      t.space_before = space;
      space = false;
      if (i_ >= s_.size()) {
        t.kind = TokenKind::End;
        out.push_back(std::move(t));
        return out;
      }
      const char c = s_[i_];
      const std::size_t start = i_;
      if (c == '.' && i_ + 1 < s_.size() &&
          (is_ident_char(s_[i_ + 1]))) {
        advance();
        while (i_ < s_.size()) {
          if (is_ident_char(s_[i_])) {
            advance();
          } else if (s_[i_] == ':' && i_ + 2 < s_.size() && s_[i_ + 1] == ':' && is_ident_char(s_[i_ + 2])) {
            advance();
            advance();
          } else {
            break;
          }
        }
        t.kind = TokenKind::Dotted;
      } else if (is_ident_start(c)) {
        advance();
        while (i_ < s_.size() && is_ident_char(s_[i_])) advance();
        if (i_ - start == 1 && c == '%') throw ParseError(t.loc, "'%' must be followed by a name");
        t.kind = TokenKind::Identifier;
      } else if (is_digit(c)) {
        lex_number(t.loc);
        t.kind = TokenKind::Number;
      } else if (c == '"') {
        advance();
        while (true) {
          if (i_ >= s_.size() || s_[i_] == '\n') throw ParseError(t.loc, "unterminated string literal");
          if (s_[i_] == '\\' && i_ + 1 < s_.size()) {
            advance();
            advance();
            continue;
          }
          if (s_[i_] == '"') {
            advance();
            break;
          }
          advance();
        }
        t.kind = TokenKind::String;
      } else if (std::string_view(",;:{}[]()<>+-!@|=*/").find(c) != std::string_view::npos) {
        advance();
        t.kind = TokenKind::Punct;
      } else {
        std::string shown = std::isprint(static_cast<unsigned char>(c))
                                ? std::string("'") + c + "'"
                                : "byte 0x" + hex_byte(static_cast<unsigned char>(c));
        throw ParseError(t.loc, "unexpected character " + shown);
      }
      t.text = s_.substr(start, i_ - start);
      out.push_back(std::move(t));
    }
  }

 private:
  static std::string hex_byte(unsigned char b) {
    const char* d = "0123456789abcdef";
    return std::string{d[b >> 4], d[b & 15]};
  }

  void advance() {
    if (s_[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++i_;
  }

  // Returns true if anything was skipped.
  bool skip_space_and_comments() {
    bool skipped = false;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        advance();
        skipped = true;
      } else if (c == '/' && i_ + 1 < s_.size() && s_[i_ + 1] == '/') {
        while (i_ < s_.size() && s_[i_] != '\n') advance();
        skipped = true;
      } else if (c == '/' && i_ + 1 < s_.size() && s_[i_ + 1] == '*') {
        const SourceLoc at{line_, col_};
        advance();
        advance();
        while (true) {
          if (i_ + 1 >= s_.size()) throw ParseError(at, "unterminated block comment");
          if (s_[i_] == '*' && s_[i_ + 1] == '/') {
            advance();
            advance();
            break;
          }
          advance();
        }
        skipped = true;
      } else {
        break;
      }
    }
    return skipped;
  }

  void lex_number(SourceLoc at) {
    // Hex floats 0fXXXXXXXX / 0dXXXXXXXXXXXXXXXX are PTX's exact float spelling.
    if (s_[i_] == '0' && i_ + 1 < s_.size() && (s_[i_ + 1] == 'f' || s_[i_ + 1] == 'F' || s_[i_ + 1] == 'd' || s_[i_ + 1] == 'D')) {
      const std::size_t digits = (s_[i_ + 1] == 'f' || s_[i_ + 1] == 'F') ? 8 : 16;
      advance();
      advance();
      std::size_t n = 0;
      while (i_ < s_.size() && std::isxdigit(static_cast<unsigned char>(s_[i_]))) {
        advance();
        ++n;
      }
      if (n != digits)
        throw ParseError(at, "hexadecimal float literal needs exactly " + std::to_string(digits) + " hex digits");
      return;
    }
    if (s_[i_] == '0' && i_ + 1 < s_.size() && (s_[i_ + 1] == 'x' || s_[i_ + 1] == 'X')) {
      advance();
      advance();
      std::size_t n = 0;
      while (i_ < s_.size() && std::isxdigit(static_cast<unsigned char>(s_[i_]))) {
        advance();
        ++n;
      }
      if (n == 0) throw ParseError(at, "hexadecimal literal has no digits");
    } else if (s_[i_] == '0' && i_ + 1 < s_.size() && (s_[i_ + 1] == 'b' || s_[i_ + 1] == 'B')) {
      advance();
      advance();
      while (i_ < s_.size() && (s_[i_] == '0' || s_[i_] == '1')) advance();
    } else {
      while (i_ < s_.size() && is_digit(s_[i_])) advance();
      if (i_ + 1 < s_.size() && s_[i_] == '.' && is_digit(s_[i_ + 1])) {
        advance();
        while (i_ < s_.size() && is_digit(s_[i_])) advance();
      }
      if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
        std::size_t j = i_ + 1;
        if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
        if (j < s_.size() && is_digit(s_[j])) {
          while (i_ < j) advance();
          while (i_ < s_.size() && is_digit(s_[i_])) advance();
        }
      }
    }
    if (i_ < s_.size() && (s_[i_] == 'U' || s_[i_] == 'u')) advance();
    if (i_ < s_.size() && is_ident_char(s_[i_]))
      throw ParseError(at, "malformed number: unexpected '" + std::string(1, s_[i_]) + "'");
  }

  std::string_view s_;
  std::size_t i_ = 0;
  std::uint32_t line_ = 1;
  std::uint32_t col_ = 1;
};

}  // namespace

std::vector<Token> tokenize(std::string_view text) { return Lexer(text).run(); }

}  // namespace ptxevo::ir
