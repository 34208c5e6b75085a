// A compile error on line 4 (an undeclared name): the error must come back with that line.
extern "C" __global__ void broken(float* y) {
  (void)y;
  y[0] = undeclared_value;
}
