// Status: the outcome of an operation that can fail, carrying a code and a message with context.
// Result<T>: a value or the Status explaining why there is none.
//
// Contract: messages say what failed, on which file/model/device/input, and what to do about it.
// Callers add context as an error travels up with Status::with_context().
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gantry {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller passed something malformed (bad flag, bad manifest field, bad shape)
  kNotFound,           // a file, model, input name or device that does not exist
  kCorrupt,            // bytes that do not parse as what they claim to be
  kUnsupported,        // well-formed but not something this build can do
  kResourceExhausted,  // out of memory, KV space, context length
  kFailedPrecondition, // the system is not in a state that allows it (e.g. setup not run)
  kUnavailable,        // a provider, library or device that is absent on this machine
  kIoError,            // the OS refused a read/write
  kCancelled,
  kInternal,           // a bug in Gantry or a dependency
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid argument: <message>", or "ok".
  std::string to_string() const;

  // Returns a copy whose message is "<context>: <message>".
  Status with_context(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result built from an OK status has no value");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gantry

#define GANTRY_CONCAT_INNER_(a, b) a##b
#define GANTRY_CONCAT_(a, b) GANTRY_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define GANTRY_RETURN_IF_ERROR(expr)                  \
  do {                                                \
    ::gantry::Status gantry_status_ = (expr);         \
    if (!gantry_status_.ok()) return gantry_status_;  \
  } while (0)

// `GANTRY_ASSIGN_OR_RETURN(auto x, make_x());` binds the value or returns the error.
#define GANTRY_ASSIGN_OR_RETURN(lhs, expr) \
  GANTRY_ASSIGN_OR_RETURN_IMPL_(GANTRY_CONCAT_(gantry_result_, __LINE__), lhs, expr)
#define GANTRY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
