// Row softmax: one block per row, blockDim.x a power of two; the reduction runs in dynamic shared memory
// (blockDim.x floats, passed as a local-memory argument).
extern "C" __global__ void softmax_rows(const float* in, float* out, int rows, int cols) {
  extern __shared__ float partial[];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* x = in + (long long)row * cols;
  float* y = out + (long long)row * cols;
  float m = -__int_as_float(0x7f800000);  // -inf (NVRTC has no math.h)
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
  partial[threadIdx.x] = m;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);
    __syncthreads();
  }
  const float row_max = partial[0];
  __syncthreads();
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(x[c] - row_max);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float total = partial[0];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[c] = expf(x[c] - row_max) / total;
}
