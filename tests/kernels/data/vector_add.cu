// c[i] = a[i] + b[i]: one thread per element.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (unsigned)n) c[i] = a[i] + b[i];
}
