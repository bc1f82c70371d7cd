#include "tracedb/sqlite_handle.hpp"

#include <sqlite3.h>

#include <cmath>
#include <utility>

namespace ptxevo::tracedb::sqlite {

namespace {

std::string describe(sqlite3* db, int code) {
  // sqlite3_errmsg describes the most recent failure on db; fall back to the code's text when
  // there is no handle (open failed before allocating one).
  const char* msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(code);
  return std::string(msg ? msg : "unknown error") + " (code " + std::to_string(code) + ")";
}

}  // namespace

SqliteError::SqliteError(int code, const std::string& message, const std::string& sql)
    : std::runtime_error("sqlite: " + message + (sql.empty() ? "" : " in: " + sql)), code_(code), sql_(sql) {}

Statement::Statement(sqlite3* db, std::string_view sql) : db_(db), sql_(sql) {
  const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = describe(db, rc);
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
    throw SqliteError(rc, msg, sql_);
  }
}

Statement::Statement(Statement&& o) noexcept
    : stmt_(std::exchange(o.stmt_, nullptr)), db_(o.db_), sql_(std::move(o.sql_)) {}

Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    sqlite3_finalize(stmt_);
    stmt_ = std::exchange(o.stmt_, nullptr);
    db_ = o.db_;
    sql_ = std::move(o.sql_);
  }
  return *this;
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, std::int64_t v) {
  const int rc = sqlite3_bind_int64(stmt_, index, v);
  if (rc != SQLITE_OK) throw SqliteError(rc, describe(db_, rc), sql_);
  return *this;
}

Statement& Statement::bind(int index, double v) {
  // SQLite turns NaN into NULL anyway; infinities would survive but mean "no figure" here too.
  if (!std::isfinite(v)) return bind_null(index);
  const int rc = sqlite3_bind_double(stmt_, index, v);
  if (rc != SQLITE_OK) throw SqliteError(rc, describe(db_, rc), sql_);
  return *this;
}

Statement& Statement::bind(int index, std::string_view v) {
  const int rc = sqlite3_bind_text64(stmt_, index, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) throw SqliteError(rc, describe(db_, rc), sql_);
  return *this;
}

Statement& Statement::bind_null(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) throw SqliteError(rc, describe(db_, rc), sql_);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const std::string msg = describe(db_, rc);
  sqlite3_reset(stmt_);  // leaves the statement reusable and releases its locks
  throw SqliteError(rc, msg, sql_);
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
std::int64_t Statement::column_int(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::column_double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::column_text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  const int n = sqlite3_column_bytes(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n)) : std::string();
}

std::optional<std::int64_t> Statement::column_opt_int(int column) const {
  if (is_null(column)) return std::nullopt;
  return column_int(column);
}

std::optional<double> Statement::column_opt_double(int column) const {
  if (is_null(column)) return std::nullopt;
  return column_double(column);
}

Connection Connection::open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = describe(db, rc) + " opening " + path;
    sqlite3_close(db);  // sqlite3_open_v2 allocates a handle even on failure
    throw SqliteError(rc, msg, "");
  }
  sqlite3_extended_result_codes(db, 1);
  return Connection(db);
}

Connection::Connection(Connection&& o) noexcept : db_(std::exchange(o.db_, nullptr)) {}

Connection& Connection::operator=(Connection&& o) noexcept {
  if (this != &o) {
    sqlite3_close_v2(db_);
    db_ = std::exchange(o.db_, nullptr);
  }
  return *this;
}

// close_v2: statements still alive elsewhere would otherwise make close fail and leak.
Connection::~Connection() { sqlite3_close_v2(db_); }

void Connection::exec(std::string_view sql) {
  const std::string text(sql);  // sqlite3_exec wants a NUL-terminated string
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? std::string(err) + " (code " + std::to_string(rc) + ")" : describe(db_, rc);
    sqlite3_free(err);
    throw SqliteError(rc, msg, text);
  }
}

std::string Connection::query_text(std::string_view sql) {
  Statement s = prepare(sql);
  if (!s.step()) throw SqliteError(SQLITE_ERROR, "query returned no row", std::string(sql));
  return s.column_text(0);
}

std::int64_t Connection::query_int(std::string_view sql) {
  Statement s = prepare(sql);
  if (!s.step()) throw SqliteError(SQLITE_ERROR, "query returned no row", std::string(sql));
  return s.column_int(0);
}

std::int64_t Connection::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
int Connection::changes() const { return sqlite3_changes(db_); }

Transaction::Transaction(Connection& c) : conn_(c) { conn_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!active_) return;
  // A failed statement may already have rolled the transaction back (e.g. SQLITE_FULL);
  // only roll back when one is still open, and never throw from a destructor.
  if (!sqlite3_get_autocommit(conn_.get())) sqlite3_exec(conn_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  conn_.exec("COMMIT");
  active_ = false;
}

}  // namespace ptxevo::tracedb::sqlite
