# Benchmarks; included by the Makefile, whose variables it uses.
#
#   make bench      writes bench/results.md and bench/results.png (a few minutes)
#   make bench QUICK=1 / make bench-quick
#                   short trials into $(BUILD)/bench; part of make test, where
#                   it prints one line (bench/report.py --quick)
.PHONY: bench bench-quick

$(BUILD)/bench/bench_c: bench/bench_c.c $(SHARED) | $(call DEPS_STAMP,bench)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Iinclude $(WARN) $(DEPFLAGS) $< -L$(BUILD)/lib \
	  -lpackedfunc -Wl,-rpath,$(abspath $(BUILD)/lib) -lffi -lpthread -o $@

$(BUILD)/bench/bench_matmul: bench/bench_matmul.c $(SHARED) | $(call DEPS_STAMP,bench)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Iinclude $(WARN) $(DEPFLAGS) $< -L$(BUILD)/lib \
	  -lpackedfunc -Wl,-rpath,$(abspath $(BUILD)/lib) -o $@

# The C side of bench/bench_python.py: packed functions and their raw twins.
$(BUILD)/bench/libpf_benchlib.so: bench/bench_pylib.c $(SHARED) | $(call DEPS_STAMP,bench)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(CFLAGS) $(DEPFLAGS) -shared -o $@ $< -L$(BUILD)/lib -lpackedfunc \
	  -Wl,-rpath,$(abspath $(BUILD)/lib)

# The floor of bench_python.py: a hand-written METH_FASTCALL extension.
BENCH_FLOOR = $(BUILD)/bench/pf_bench_floor$(PY_EXT_SUFFIX)
$(BENCH_FLOOR): bench/bench_floor.c | $(call DEPS_STAMP,bench) $(call DEPS_STAMP,python)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(PY_CEXT_FLAGS) -O2 -g $(DEPFLAGS) -shared -o $@ $<

# bench-quick is bench with QUICK=1, a target-specific variable that bench
# inherits, not a make of its own: in make test's build phase that make
# would build the library and what bench needs beside the parent's jobs,
# the same files twice at once, and leave them newer than what links them.
bench-quick: QUICK := 1
bench-quick: bench
bench: $(BUILD)/bench/bench_c $(BUILD)/bench/bench_matmul $(BUILD)/bench/libpf_benchlib.so \
       $(BENCH_FLOOR) $(DEMO_PLUGIN) python
	$(if $(QUICK),$(Q))$(RUN) $(PYTHON) bench/report.py --build $(BUILD) $(if $(QUICK),--quick --out $(BUILD)/bench)
