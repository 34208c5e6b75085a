// Timing helpers shared by the compiled benchmarks.
#pragma once

#include <time.h>

#include <algorithm>
#include <vector>

namespace gantry::bench {

// CPU time of the calling thread in ns: steadier than wall time on a shared machine when the work runs on
// this thread (one intra-op thread).
inline double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

inline double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace gantry::bench
