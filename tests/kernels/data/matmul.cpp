// C[M,N] = A[M,K] * B[K,N], row-major, in TILE x TILE blocks (block = TILE x TILE threads): each step
// stages a tile of A and of B in the block's local memory (static arrays here), as the CUDA version
// does in shared memory.
#define TILE 16

void matmul_tiled(const gantry_kernel_ctx* ctx, const float* A, const float* B, float* C, int M, int N, int K) {
  float As[TILE][TILE], Bs[TILE][TILE], acc[TILE][TILE] = {{0}};
  const int row0 = (int)(ctx->block_idx.y * TILE), col0 = (int)(ctx->block_idx.x * TILE);
  for (int k0 = 0; k0 < K; k0 += TILE) {
    GANTRY_FOR_EACH_THREAD(ctx, t) {
      const int r = row0 + (int)t.y, c = col0 + (int)t.x;
      As[t.y][t.x] = (r < M && k0 + (int)t.x < K) ? A[(long)r * K + k0 + t.x] : 0.f;
      Bs[t.y][t.x] = (k0 + (int)t.y < K && c < N) ? B[(long)(k0 + t.y) * N + c] : 0.f;
    }
    GANTRY_FOR_EACH_THREAD(ctx, t) {
      for (int k = 0; k < TILE; ++k) acc[t.y][t.x] += As[t.y][k] * Bs[k][t.x];
    }
  }
  GANTRY_FOR_EACH_THREAD(ctx, t) {
    const int r = row0 + (int)t.y, c = col0 + (int)t.x;
    if (r < M && c < N) C[(long)r * N + c] = acc[t.y][t.x];
  }
}
