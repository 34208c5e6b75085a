// c[i] = a[i] + b[i]: one thread per element (Gantry's CPU kernel convention, docs/kernels.md).
void vector_add(const gantry_kernel_ctx* ctx, const float* a, const float* b, float* c, int n) {
  GANTRY_FOR_EACH_THREAD(ctx, t) {
    const uint32_t i = ctx->block_idx.x * ctx->block_dim.x + t.x;
    if (i < (uint32_t)n) c[i] = a[i] + b[i];
  }
}
