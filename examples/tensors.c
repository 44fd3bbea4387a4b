#include <packedfunc/c_api.h>
#include <stdio.h>

/* A packed function that takes a tensor, whatever form it came in, and
 * returns a new one: x scaled so that its elements sum to `total`. The
 * signature names the parameters, constrains the tensor and gives `total`
 * a default; keyword calls and hosts read them from it. */
static int normalized(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  DLTensor* x;
  if (PFArgGetTensor(args, codes, n, 0, "tensor<float64, 1, contiguous>", &x) != 0) return -1;
  if (n != 2 || codes[1] != kPFFloat)
    return PFErrorSetFormat(kPFErrTypeError, "normalized: argument 1 'total' must be a float");
  const double* in = (const double*)((const char*)x->data + x->byte_offset);
  double sum = 0;
  for (int64_t i = 0; i < x->shape[0]; ++i) sum += in[i];
  PFObjectHandle y;
  DLTensor* out;
  if (PFTensorAlloc(1, x->shape, x->dtype, 0, &y, &out) != 0) return -1;
  for (int64_t i = 0; i < x->shape[0]; ++i)
    ((double*)out->data)[i] = in[i] * args[1].v_float64 / sum;
  PFValue v = {.v_handle = y};
  int code = kPFObjectHandle;
  int rc = PFCFuncSetReturn(ret, &v, &code, 1); /* the result holds its own reference */
  PFObjectFree(y);
  return rc;
}
PF_REGISTER_PACKED_SIG("example.normalized", normalized,
                       "tensor<float64,1>(x: tensor<float64, 1, contiguous>, total: float64 = 1)",
                       "x scaled so that its elements sum to total.");

static void show(const char* what, int rc, PFValue out) {
  if (rc != 0) {
    printf("%s failed: %s: %s\n", what, PFErrorGetKind(), PFErrorGetMessage());
    return;
  }
  DLTensor* y;
  PFTensorGetDLTensor(out.v_handle, &y);
  printf("%s -> [", what);
  for (int64_t i = 0; i < y->shape[0]; ++i) printf("%s%g", i ? ", " : "", ((double*)y->data)[i]);
  printf("]\n");
  PFObjectFree(out.v_handle);
}

int main(void) {
  PFModuleHandle self;
  PFFunctionHandle f;
  if (PF_MODULE_LOAD_SELF(&self) != 0 || PFModGetFunction(self, "example.normalized", 0, &f)) {
    fprintf(stderr, "%s\n", PFGetLastError());
    return 1;
  }
  PFModFree(self);
  const char* sig;
  PFFuncGetInfo(f, NULL, &sig, NULL);
  printf("signature: %s\n", sig);

  double data[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  DLTensor x = {
      .data = data, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 64, 1}, .shape = shape};
  PFValue args[1] = {{.v_handle = &x}}, kw[1] = {{.v_float64 = 100}}, out;
  int codes[1] = {kPFDLTensorHandle}, kw_codes[1] = {kPFFloat}, out_code;
  const char* kw_names[1] = {"total"};
  /* normalized(x): total takes its default. */
  show("normalized(x)", PFFuncCallKw(f, args, codes, 1, NULL, NULL, NULL, 0, &out, &out_code), out);
  /* normalized(x, total=100) */
  show("normalized(x, total=100)",
       PFFuncCallKw(f, args, codes, 1, kw_names, kw, kw_codes, 1, &out, &out_code), out);
  /* Python's own errors, and the tensor's constraint. */
  const char* wrong[1] = {"scale"};
  show("normalized(x, scale=100)",
       PFFuncCallKw(f, args, codes, 1, wrong, kw, kw_codes, 1, &out, &out_code), out);
  x.dtype.bits = 32;
  show("normalized(float32 x)",
       PFFuncCallKw(f, args, codes, 1, NULL, NULL, NULL, 0, &out, &out_code), out);
  PFFuncFree(f);
  return 0;
}
