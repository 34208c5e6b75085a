// Row softmax: one block per row; the block's threads stride over the row, partial maxima and sums meet
// in the block's local memory (ctx->shared: block_dim.x floats), as a CUDA block's would in shared memory.
#include <math.h>

void softmax_rows(const gantry_kernel_ctx* ctx, const float* in, float* out, int rows, int cols) {
  const int row = (int)ctx->block_idx.x;
  if (row >= rows) return;
  float* partial = (float*)ctx->shared;
  const float* x = in + (long)row * cols;
  float* y = out + (long)row * cols;
  GANTRY_FOR_EACH_THREAD(ctx, t) {
    float m = -INFINITY;
    for (int c = (int)t.x; c < cols; c += (int)ctx->block_dim.x) m = fmaxf(m, x[c]);
    partial[t.x] = m;
  }
  float row_max = -INFINITY;
  for (uint32_t i = 0; i < ctx->block_dim.x; ++i) row_max = fmaxf(row_max, partial[i]);
  GANTRY_FOR_EACH_THREAD(ctx, t) {
    float s = 0.f;
    for (int c = (int)t.x; c < cols; c += (int)ctx->block_dim.x) {
      y[c] = expf(x[c] - row_max);
      s += y[c];
    }
    partial[t.x] = s;
  }
  float sum = 0.f;
  for (uint32_t i = 0; i < ctx->block_dim.x; ++i) sum += partial[i];
  GANTRY_FOR_EACH_THREAD(ctx, t) {
    for (int c = (int)t.x; c < cols; c += (int)ctx->block_dim.x) y[c] /= sum;
  }
}
