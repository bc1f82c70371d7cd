// Thin RAII wrappers over the SQLite C API. Every failure becomes a SqliteError that carries the
// SQL text and sqlite3_errmsg, so a caller several layers up can still say what went wrong.
// Move-only: a connection or statement has exactly one owner, and a moved-from one is empty.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace ptxevo::tracedb::sqlite {

class SqliteError : public std::runtime_error {
 public:
  SqliteError(int code, const std::string& message, const std::string& sql);
  int code() const { return code_; }
  const std::string& sql() const { return sql_; }

 private:
  int code_;
  std::string sql_;
};

class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);
  Statement(Statement&& o) noexcept;
  Statement& operator=(Statement&& o) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Parameters are 1-based, as in SQLite. Text is copied (SQLITE_TRANSIENT).
  Statement& bind(int index, std::int64_t v);
  Statement& bind(int index, double v);  // a NaN or infinity is stored as NULL
  Statement& bind(int index, std::string_view v);
  Statement& bind(int index, const char* v) { return bind(index, std::string_view(v)); }
  Statement& bind(int index, const std::string& v) { return bind(index, std::string_view(v)); }
  Statement& bind(int index, bool v) { return bind(index, std::int64_t{v ? 1 : 0}); }
  Statement& bind(int index, int v) { return bind(index, std::int64_t{v}); }
  template <class T>
  Statement& bind(int index, const std::optional<T>& v) {
    return v ? bind(index, *v) : bind_null(index);
  }
  Statement& bind_null(int index);

  // True while a row is available; false when done. Throws on any error.
  bool step();
  // Steps a statement that returns no rows.
  void run();
  void reset();

  bool is_null(int column) const;
  std::int64_t column_int(int column) const;
  double column_double(int column) const;
  std::string column_text(int column) const;  // "" for NULL
  std::optional<std::int64_t> column_opt_int(int column) const;
  std::optional<double> column_opt_double(int column) const;

 private:
  sqlite3_stmt* stmt_ = nullptr;
  sqlite3* db_ = nullptr;
  std::string sql_;
};

class Connection {
 public:
  // Opens (creating if absent) a database file, read-write.
  static Connection open(const std::string& path);
  Connection(Connection&& o) noexcept;
  Connection& operator=(Connection&& o) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // Runs one or more statements that return no rows we need.
  void exec(std::string_view sql);
  Statement prepare(std::string_view sql) { return Statement(db_, sql); }
  // First column of the first row of a one-row query (e.g. a PRAGMA), as text.
  std::string query_text(std::string_view sql);
  std::int64_t query_int(std::string_view sql);
  std::int64_t last_insert_rowid() const;
  int changes() const;
  sqlite3* get() const { return db_; }

 private:
  explicit Connection(sqlite3* db) : db_(db) {}
  sqlite3* db_ = nullptr;
};

// BEGIN IMMEDIATE on construction: takes the write lock up front, so two processes never both
// hold a read snapshot and then deadlock upgrading it (a case busy_timeout cannot resolve).
// Rolls back in the destructor unless commit() ran, so an exception leaves nothing partial.
class Transaction {
 public:
  explicit Transaction(Connection& c);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  Connection& conn_;
  bool active_ = true;
};

}  // namespace ptxevo::tracedb::sqlite
