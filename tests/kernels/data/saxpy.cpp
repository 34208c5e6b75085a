// y = alpha * x + y. Plain C as well as C++: the tests also compile it as C (cc).
void saxpy(const gantry_kernel_ctx* ctx, float alpha, const float* x, float* y, int64_t n) {
  GANTRY_FOR_EACH_THREAD(ctx, t) {
    const int64_t i = (int64_t)ctx->block_idx.x * ctx->block_dim.x + t.x;
    if (i < n) y[i] = alpha * x[i] + y[i];
  }
}
