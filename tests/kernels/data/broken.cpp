// A compile error on line 4 (an undeclared name): the error must come back with that line.
void broken(const gantry_kernel_ctx* ctx, float* y) {
  (void)ctx;
  y[0] = undeclared_value;
}
