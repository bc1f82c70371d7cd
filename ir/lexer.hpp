// Tokenizer for PTX text. Comments are skipped; every token keeps its line and column so the
// parser can point at the exact place of an error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/diagnostic.hpp"
#include "ir/module.hpp"

namespace ptxevo::ir {

enum class TokenKind {
  Identifier,  // names, including %-names and $-names
  Dotted,      // .reg .b32 .shared::cta .L2::256B .x
  Number,      // 12 0x1F 0f3F800000 0d3FF0000000000000 1.5 1e-3 12U
  String,      // "..." (text keeps the quotes)
  Punct,       // one of , ; : { } [ ] ( ) < > + - ! @ | = * /
  End,
};

struct Token {
  TokenKind kind = TokenKind::End;
  std::string_view text;  // points into the input, which outlives the tokens
  SourceLoc loc;
  bool space_before = false;  // whitespace or comment between this token and the previous one
};

// Splits `text` into tokens; throws ParseError (with line and column) on a bad character, an
// unterminated comment or string. The last token is always End.
std::vector<Token> tokenize(std::string_view text);

}  // namespace ptxevo::ir
