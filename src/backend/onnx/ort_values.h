// Per-Run arrays of the ONNX backend (private): one per model input or output, on the stack for the usual
// handful and on the heap beyond, and OrtValues, the array of OrtValue* a Run binds and returns, which
// releases what it holds.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <array>
#include <cstddef>
#include <memory>
#include <utility>

namespace gantry::onnx {

// Inputs/outputs a Run handles without heap arrays.
inline constexpr size_t kInlineArity = 16;

// `n` value-initialised Ts: inline up to kInlineArity, else one heap array. Move-only.
template <typename T>
class SmallArray {
 public:
  explicit SmallArray(size_t n) : n_(n) {
    if (n > kInlineArity) heap_ = std::make_unique<T[]>(n);
  }
  SmallArray(SmallArray&& other) noexcept
      : n_(std::exchange(other.n_, 0)), inline_(std::move(other.inline_)), heap_(std::move(other.heap_)) {}
  SmallArray& operator=(SmallArray&& other) noexcept {
    n_ = std::exchange(other.n_, 0);
    inline_ = std::move(other.inline_);
    heap_ = std::move(other.heap_);
    return *this;
  }

  size_t size() const { return n_; }
  T* data() { return heap_ ? heap_.get() : inline_.data(); }
  const T* data() const { return heap_ ? heap_.get() : inline_.data(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }

 private:
  size_t n_;
  std::array<T, kInlineArity> inline_{};
  std::unique_ptr<T[]> heap_;
};

// `n` OrtValue slots, null at first, as Run's inputs or outputs want them (data()); the values still held
// are released with the array. forget() drops a value someone else owns (an output written into a
// cached buffer, which its cache slot owns); take() hands one over.
class OrtValues {
 public:
  explicit OrtValues(size_t n) : values_(n) {}
  OrtValues(OrtValues&&) noexcept = default;
  OrtValues& operator=(OrtValues&& other) noexcept {
    if (this != &other) {
      release_all();
      values_ = std::move(other.values_);
    }
    return *this;
  }
  ~OrtValues() { release_all(); }

  size_t size() const { return values_.size(); }
  OrtValue** data() { return values_.data(); }
  OrtValue* const* data() const { return values_.data(); }
  OrtValue*& operator[](size_t i) { return values_[i]; }
  OrtValue* operator[](size_t i) const { return values_[i]; }
  OrtValue* take(size_t i) { return std::exchange(values_[i], nullptr); }
  void forget(size_t i) { values_[i] = nullptr; }

 private:
  void release_all() {
    for (size_t i = 0; i < values_.size(); ++i)
      if (values_[i]) Ort::GetApi().ReleaseValue(values_[i]);
  }
  SmallArray<OrtValue*> values_;
};

}  // namespace gantry::onnx
