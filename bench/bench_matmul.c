/*
 * Bound constants and pre-packing, measured (see bench/report.py).
 *
 *   bench_matmul PLUGIN.so [--quick]   JSON rows, one per line
 *
 * The demo plugin's demo.matmul(x, w) reads w column by column. Three ways
 * to compute x @ w for a float32 x (8 x 512) and a constant w (512 x 512):
 *  - bound: demo.matmul with w bound (PFFuncBind), pre-packed once;
 *  - unbound: demo.matmul(x, w), which copies w column by column per call;
 *  - naive: a plain C triple loop over w as it is, with no packedfunc call.
 * Each pair of cases runs interleaved trials; the ratio is taken trial by
 * trial. Then the heap that 100 functions bound to one 1024 x 1024 weight
 * hold, with a pre-pack cache (one packed copy) and without (one each).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mallinfo2 */
#endif
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"
#include "bench_measure.h"

enum { M = 8, K = 512, N = 512, BIG = 1024, NFUNCS = 100 };

static void die(const char* what) {
  fprintf(stderr, "bench_matmul: %s: %s\n", what, PFGetLastError());
  exit(1);
}

static void keep(DLManagedTensor* m) { (void)m; }

/* A tensor object over `data` (rows x cols float32, row-major), which the
 * caller keeps alive. */
static PFObjectHandle matrix(float* data, int64_t* shape, int64_t rows, int64_t cols,
                             DLManagedTensor* managed) {
  shape[0] = rows;
  shape[1] = cols;
  *managed = (DLManagedTensor){.dl_tensor = {.data = data,
                                             .device = {kDLCPU, 0},
                                             .ndim = 2,
                                             .dtype = {kDLFloat, 32, 1},
                                             .shape = shape},
                               .deleter = keep};
  PFObjectHandle o;
  if (PFTensorCreateFromDLPack(managed, &o) != 0) die("PFTensorCreateFromDLPack");
  return o;
}

static float xs[M * K], ws[K * N], ys[M * N];
static int64_t x_shape[2] = {M, K};
static DLTensor x_tensor = {
    .data = xs, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = x_shape};
static PFFunctionHandle g_matmul, g_bound;
static PFObjectHandle g_w;
static volatile float g_sink;

static void call(PFFunctionHandle f, int with_w) {
  PFValue a[2] = {{.v_handle = &x_tensor}, {.v_handle = g_w}}, r;
  int c[2] = {kPFDLTensorHandle, kPFObjectHandle}, rc;
  if (PFFuncCall(f, a, c, with_w ? 2 : 1, &r, &rc) != 0) die("PFFuncCall");
  DLTensor* y;
  if (PFTensorGetDLTensor(r.v_handle, &y) != 0) die("result");
  g_sink = ((float*)y->data)[0];
  PFObjectFree(r.v_handle);
}

static void run_bound(long n) {
  for (long i = 0; i < n; ++i) call(g_bound, 0);
}
static void run_unbound(long n) {
  for (long i = 0; i < n; ++i) call(g_matmul, 1);
}
/* The textbook loop: the inner loop strides down a column of w. */
static void run_naive(long n) {
  for (long t = 0; t < n; ++t) {
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        float acc = 0;
        for (int k = 0; k < K; ++k) acc += xs[i * K + k] * ws[k * N + j];
        ys[i * N + j] = acc;
      }
    g_sink = ys[0];
  }
}

static void measure(const char* id, const char* what, void (*run)(long), const char* base_id,
                    const char* base_what, void (*base)(long), double target, int trials, long n) {
  bench_stats sa, sb, sr;
  bench_interleave(run, base, n, trials, &sa, &sb, &sr);
  bench_print_row(id, what, base_id, base_what, sa, sb, sr, target, trials, n, "");
}

static size_t heap_in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd; /* small blocks, and large ones mapped apart */
}

/* Heap held by NFUNCS functions bound to one BIG x BIG weight. */
static void bound_heap(int with_cache) {
  static float big[BIG * BIG];
  for (int i = 0; i < BIG * BIG; ++i) big[i] = (float)(i % 7);
  int64_t shape[2];
  DLManagedTensor managed;
  PFObjectHandle w = matrix(big, shape, BIG, BIG, &managed);
  PFPrePackCacheHandle cache = NULL;
  if (with_cache && PFPrePackCacheCreate(&cache) != 0) die("PFPrePackCacheCreate");
  PFFunctionHandle fns[NFUNCS];
  int pos = 1, code = kPFObjectHandle;
  PFValue v = {.v_handle = w};
  size_t before = heap_in_use();
  for (int i = 0; i < NFUNCS; ++i)
    if (PFFuncBind(g_matmul, 1, &pos, &v, &code, cache, &fns[i]) != 0) die("PFFuncBind");
  size_t held = heap_in_use() - before;
  printf(
      "{\"id\": \"bind_heap_%s\", \"what\": \"heap held by %d functions bound to one "
      "%dx%d float32 weight (%.0f MB), %s\", \"bytes\": %zu}\n",
      with_cache ? "cache" : "nocache", NFUNCS, BIG, BIG,
      BIG * (double)BIG * sizeof(float) / (1 << 20),
      with_cache ? "with a pre-pack cache (one packed copy)"
                 : "without a cache (a packed copy each)",
      held);
  fflush(stdout);
  for (int i = 0; i < NFUNCS; ++i) PFFuncFree(fns[i]);
  if (cache) PFObjectFree(cache);
  PFObjectFree(w);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_matmul PLUGIN.so [--quick]\n");
    return 2;
  }
  int quick = argc > 2 && strcmp(argv[2], "--quick") == 0;
  PFModuleHandle mod;
  if (PFModLoadFromFile(argv[1], &mod) != 0) die("PFModLoadFromFile");
  if (PFModGetFunction(mod, "demo.matmul", 0, &g_matmul) != 0) die("demo.matmul");
  for (int i = 0; i < M * K; ++i) xs[i] = (float)((i * 7) % 11) / 11.0f;
  for (int i = 0; i < K * N; ++i) ws[i] = (float)((i * 5) % 13) / 13.0f;
  int64_t w_shape[2];
  DLManagedTensor w_managed;
  g_w = matrix(ws, w_shape, K, N, &w_managed);
  int pos = 1, code = kPFObjectHandle;
  PFValue v = {.v_handle = g_w};
  if (PFFuncBind(g_matmul, 1, &pos, &v, &code, NULL, &g_bound) != 0) die("PFFuncBind");
  int trials = quick ? 3 : 15;
  long n = quick ? 2 : 40;
  measure("matmul_prepacked", "bound demo.matmul, w pre-packed once (8x512 @ 512x512 float32)",
          run_bound, "matmul_unbound", "demo.matmul(x, w), w copied per call", run_unbound, 1.0,
          trials, n);
  measure("matmul_vs_naive", "bound demo.matmul, w pre-packed once (8x512 @ 512x512 float32)",
          run_bound, "matmul_naive", "a plain C triple loop, no packedfunc call", run_naive, 1.0,
          trials, n);
  bound_heap(1);
  bound_heap(0);
  PFFuncFree(g_bound);
  PFObjectFree(g_w);
  PFFuncFree(g_matmul);
  PFModFree(mod);
  return 0;
}
