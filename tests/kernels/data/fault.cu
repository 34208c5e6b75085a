// Writes through a wild pointer: an illegal address on any GPU (the fault test; run on a GPU only).
extern "C" __global__ void fault(float* y) {
  float* wild = (float*)(0x10ull + (unsigned long long)threadIdx.x * 0x100000000ull);
  wild[0] = y[0];
}
