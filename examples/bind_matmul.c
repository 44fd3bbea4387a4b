#include <packedfunc/c_api.h>
#include <stdio.h>

/* A 2 x 2 float32 matrix as a tensor object; the runtime calls the deleter
 * (here: nothing to free) when the object's last reference goes. */
static float w_data[4] = {1, 2, 3, 4};
static int64_t shape[2] = {2, 2};
static void keep(DLManagedTensor* m) { (void)m; }
static DLManagedTensor w_managed = {.dl_tensor = {.data = w_data,
                                                  .device = {kDLCPU, 0},
                                                  .ndim = 2,
                                                  .dtype = {kDLFloat, 32, 1},
                                                  .shape = shape},
                                    .deleter = keep};

/* Usage: bind_matmul PATH/demo_plugin.so */
int main(int argc, char** argv) {
  PFModuleHandle mod;
  PFFunctionHandle matmul, layer[3];
  PFObjectHandle w;
  PFPrePackCacheHandle cache;
  if (argc != 2 || PFModLoadFromFile(argv[1], &mod) != 0 ||
      PFModGetFunction(mod, "demo.matmul", 0, &matmul) != 0 ||
      PFTensorCreateFromDLPack(&w_managed, &w) != 0 || PFPrePackCacheCreate(&cache) != 0) {
    fprintf(stderr, "%s\n", argc == 2 ? PFGetLastError() : "usage: bind_matmul PLUGIN.so");
    return 1;
  }
  /* Bind w as argument 1 of three functions: demo.matmul's pre-pack hook
   * stores it column by column once, and the cache shares that copy. */
  int position = 1, code = kPFObjectHandle;
  PFValue value = {.v_handle = w};
  for (int i = 0; i < 3; ++i)
    if (PFFuncBind(matmul, 1, &position, &value, &code, cache, &layer[i]) != 0) {
      fprintf(stderr, "%s\n", PFGetLastError());
      return 1;
    }
  PFObjectFree(w); /* the bound functions keep what they need */

  /* layer[0](x) is matmul(x, w): x = [[1, 1]] gives [[4, 6]]. */
  float x_data[2] = {1, 1};
  int64_t x_shape[2] = {1, 2};
  DLTensor x = {.data = x_data,
                .device = {kDLCPU, 0},
                .ndim = 2,
                .dtype = {kDLFloat, 32, 1},
                .shape = x_shape};
  PFValue arg = {.v_handle = &x}, out;
  int arg_code = kPFDLTensorHandle, out_code;
  DLTensor* y;
  if (PFFuncCall(layer[0], &arg, &arg_code, 1, &out, &out_code) != 0 ||
      PFTensorGetDLTensor(out.v_handle, &y) != 0) {
    fprintf(stderr, "%s\n", PFGetLastError());
    return 1;
  }
  const float* r = y->data;
  printf("x @ w = [[%g, %g]]\n", r[0], r[1]);
  PFObjectFree(out.v_handle);

  int64_t entries, bytes, hits;
  PFPrePackCacheGetStats(cache, &entries, &bytes, &hits);
  printf("cache: %lld packed copy, %lld bytes, %lld hits\n", (long long)entries, (long long)bytes,
         (long long)hits);
  for (int i = 0; i < 3; ++i) PFFuncFree(layer[i]);
  PFObjectFree(cache);
  PFFuncFree(matmul);
  PFModFree(mod);
  return 0;
}
