/*
 * The measurement the C benchmarks share: a case and its baseline run in
 * interleaved trials (alternating which goes first, so neither always
 * runs on a warmer machine), and each trial's ratio is taken on its own.
 * Medians, minima and maxima go to bench/report.py as one JSON line per
 * row. Header-only: each benchmark program includes it once.
 */
#ifndef PF_BENCH_MEASURE_H_
#define PF_BENCH_MEASURE_H_

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <valgrind/callgrind.h>

#define BENCH_MAX_TRIALS 64

typedef struct {
  double med, min, max;
} bench_stats;

static double bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Nanoseconds per iteration of run(n). */
static double bench_trial(void (*run)(long), long n) {
  double t0 = bench_now_ns();
  run(n);
  return (bench_now_ns() - t0) / (double)n;
}

static int bench_cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Sorts v[0..k) and returns its median, minimum and maximum. */
static bench_stats bench_summarize(double* v, int k) {
  qsort(v, (size_t)k, sizeof(double), bench_cmp);
  return (bench_stats){k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2, v[0], v[k - 1]};
}

/* Runs `trials` (at most BENCH_MAX_TRIALS) interleaved trials of n
 * iterations of run and of base, after a warm-up of each, and gives the
 * ns per iteration of each and their per-trial ratio. */
static void bench_interleave(void (*run)(long), void (*base)(long), long n, int trials,
                             bench_stats* a, bench_stats* b, bench_stats* ratio) {
  double ta[BENCH_MAX_TRIALS], tb[BENCH_MAX_TRIALS], tr[BENCH_MAX_TRIALS];
  if (trials > BENCH_MAX_TRIALS) trials = BENCH_MAX_TRIALS;
  run(n / 10 + 1);
  base(n / 10 + 1);
  for (int t = 0; t < trials; ++t) {
    if (t % 2) {
      ta[t] = bench_trial(run, n);
      tb[t] = bench_trial(base, n);
    } else {
      tb[t] = bench_trial(base, n);
      ta[t] = bench_trial(run, n);
    }
    tr[t] = ta[t] / tb[t];
  }
  *a = bench_summarize(ta, trials);
  *b = bench_summarize(tb, trials);
  *ratio = bench_summarize(tr, trials);
}

/* Under callgrind, ends one count and starts the next (a client request;
 * outside valgrind it does nothing): a program's --count calls it before
 * each run and after the last, so that one process under callgrind counts
 * each run on its own (bench/report.py). */
__attribute__((unused)) static void bench_count_mark(void) { CALLGRIND_DUMP_STATS; }

/* One row for bench/report.py. `extra` is "" or more JSON members, each
 * starting with ", ". */
static void bench_print_row(const char* id, const char* what, const char* base_id,
                            const char* base_what, bench_stats a, bench_stats b, bench_stats ratio,
                            double target, int trials, long n, const char* extra) {
  printf(
      "{\"id\": \"%s\", \"what\": \"%s\", \"base_id\": \"%s\", \"baseline\": \"%s\", "
      "\"ns\": [%.2f, %.2f, %.2f], \"base_ns\": [%.2f, %.2f, %.2f], "
      "\"ratio\": [%.3f, %.3f, %.3f], \"target\": %.2f, \"trials\": %d, \"iters\": %ld%s}\n",
      id, what, base_id, base_what, a.med, a.min, a.max, b.med, b.min, b.max, ratio.med, ratio.min,
      ratio.max, target, trials, n, extra);
  fflush(stdout);
}

#endif /* PF_BENCH_MEASURE_H_ */
