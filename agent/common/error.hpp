// Error types shared by every kopt subsystem.
//
// Exceptions are for misuse and bad input at a boundary (a config that does
// not validate, a database that cannot be opened); they carry where and why.
// Outcomes of candidates are never exceptions: they are data (see
// profiler/protocol/outcome.hpp) so that the store can keep them.
#pragma once

#include <stdexcept>
#include <string>

namespace kopt {

// Base of every kopt exception, so the CLI can print one line and map it to
// an exit code without catching std::exception from third-party code blindly.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A config (operator or daemon) that is malformed or inconsistent.
class config_error : public error {
 public:
  using error::error;
};

// The SQLite store failed (I/O, constraint, corruption, schema too new).
class store_error : public error {
 public:
  using error::error;
};

// A user named something that does not exist (campaign id, candidate id).
class not_found_error : public error {
 public:
  using error::error;
};

}  // namespace kopt
