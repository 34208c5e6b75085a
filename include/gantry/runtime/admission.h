// Admission: how many requests each model takes at once — one rule for every protocol and every kind of
// request (generation, embeddings, rerank, tensor inference run alone).
//
// - A model admits `capacity` requests that run together (its parallel sequences, or 1) plus max_queue()
//   waiting; one more is refused at once with ResourceExhausted, whose message says both numbers and
//   which flags set them. Every such refusal carries the same Retry-After (kRetryAfterSeconds).
// - An admitted request holds a Ticket: move-only, and destroying it gives the place back, however the
//   request ends — answered, abandoned, or an exception anywhere on the way (a slot released by hand
//   leaked for good when something threw between admit and release).
// - Thread-safe; the Admission must outlive its tickets.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::runtime {

// Seconds a client is told to wait (Retry-After) when a model is at capacity or not ready.
inline constexpr int kRetryAfterSeconds = 1;

class Admission {
 public:
  explicit Admission(size_t max_queue = 64) : max_queue_(max_queue) {}
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // The right to run one request on one model.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept;
    Ticket& operator=(Ticket&& o) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { release(); }
    explicit operator bool() const { return owner_ != nullptr; }
    void release();  // gives the place back now (idempotent)

   private:
    friend class Admission;
    Admission* owner_ = nullptr;
    std::string model_;
  };

  // A ticket for `model`, or ResourceExhausted when `capacity` + max_queue() requests hold one already.
  Result<Ticket> admit(std::string_view model, size_t capacity);

  // Requests waiting at most, per model, beyond its capacity (--max-queue).
  size_t max_queue() const;
  void set_max_queue(size_t n);
  // Tickets held now, per model (models with none are left out).
  std::map<std::string, size_t, std::less<>> outstanding() const;

 private:
  void give_back(const std::string& model);
  mutable std::mutex mu_;
  size_t max_queue_;
  std::map<std::string, size_t, std::less<>> held_;
};

}  // namespace gantry::runtime
