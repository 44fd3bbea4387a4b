# packedfunc — the one build: library, tools, examples, tests, install.
#
#   make                  shared + static library (build/lib)
#   make test             install missing Debian packages (as root), then
#                         every test: C under ASan+UBSan, concurrency under
#                         TSan, the shared library's ABI, install, Python
#   make install PREFIX=  headers, libraries, pkg-config file
#   make clean

VERSION_MAJOR := 0
VERSION       := 0.1.0
PREFIX        ?= /usr/local
LIBDIR        ?= $(PREFIX)/lib
INCLUDEDIR    ?= $(PREFIX)/include
CC            ?= cc
# The interpreter that sees Debian's python3-* packages.
PYTHON        ?= $(firstword $(wildcard /usr/bin/python3) python3)
BUILD         ?= build
export BUILD

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wno-missing-field-initializers
BASE    := -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -fPIC -fvisibility=hidden -fno-semantic-interposition $(WARN)
CFLAGS  ?= -O2 -g
LIBS    := -lffi -ldl -lpthread
SAN_ASAN := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
SAN_TSAN := -O1 -g -fsanitize=thread

LIB_SRCS := $(sort $(wildcard runtime/*.c registry/*.c))
LIB_HDRS := $(wildcard include/packedfunc/*.h runtime/*.h registry/*.h)
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
TEST_NAMES := $(patsubst tests/%.c,%,$(TEST_SRCS))
# Tests that exercise threads; they also run under ThreadSanitizer.
TSAN_NAMES := $(filter %concurrency %threads %closure,$(TEST_NAMES))
TEST_SUPPORT := $(wildcard tests/support/*.c tests/support/*.h)

SONAME   := libpackedfunc.so.$(VERSION_MAJOR)
SHARED   := $(BUILD)/lib/libpackedfunc.so.$(VERSION)
STATIC   := $(BUILD)/lib/libpackedfunc.a
DEPS_OK  := $(BUILD)/.deps-ok

.PHONY: all lib clean install test test-c test-asan test-tsan test-abi test-install \
        test-readme test-python deps python
.DEFAULT_GOAL := all

all: lib

# ---- dependencies ----------------------------------------------------------
# A missing build dependency stops the build naming the Debian package.
define header_check
	@printf '#include <$(1)>\n' | $(CC) -E -x c - >/dev/null 2>&1 || \
	  { echo "packedfunc: <$(1)> not found; install it with: apt-get install $(2)" >&2; exit 1; }
endef
$(DEPS_OK):
	@mkdir -p $(@D)
	$(call header_check,ffi.h,libffi-dev)
	$(call header_check,uthash.h,uthash-dev)
	$(call header_check,dlpack/dlpack.h,libdlpack-dev)
	@touch $@

deps:
	@tools/install-deps.sh

# ---- library -----------------------------------------------------------------
# One object directory per flavour: rel (shipped), asan, tsan.
obj_of = $(patsubst %.c,$(BUILD)/$(1)/obj/%.o,$(LIB_SRCS))

$(BUILD)/rel/obj/%.o: %.c $(LIB_HDRS) | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(CFLAGS) -c $< -o $@
$(BUILD)/asan/obj/%.o: %.c $(LIB_HDRS) | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(SAN_ASAN) -c $< -o $@
$(BUILD)/tsan/obj/%.o: %.c $(LIB_HDRS) | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(SAN_TSAN) -c $< -o $@

$(SHARED): $(call obj_of,rel) runtime/exports.map
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=runtime/exports.map \
	  -Wl,--no-undefined -o $@ $(call obj_of,rel) $(LIBS)
	ln -sf libpackedfunc.so.$(VERSION) $(BUILD)/lib/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/lib/libpackedfunc.so

$(STATIC): $(call obj_of,rel)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# One archive per sanitizer flavour. (A pattern rule cannot work here:
# obj_of's patsubst would put the stem in the wrong place.)
$(BUILD)/asan/libpackedfunc.a: $(call obj_of,asan)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/tsan/libpackedfunc.a: $(call obj_of,tsan)
	rm -f $@ && ar rcs $@ $^

lib: $(SHARED) $(STATIC)

# ---- C tests -----------------------------------------------------------------
# Test binaries link the flavour's static archive, so they can also reach
# the runtime's hidden internals where a test needs to.
$(BUILD)/asan/tests/%: tests/%.c $(BUILD)/asan/libpackedfunc.a $(TEST_SUPPORT) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(SAN_ASAN) -Itests -o $@ $< $(BUILD)/asan/libpackedfunc.a -lcmocka $(LIBS)
$(BUILD)/tsan/tests/%: tests/%.c $(BUILD)/tsan/libpackedfunc.a $(TEST_SUPPORT) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(SAN_TSAN) -Itests -o $@ $< $(BUILD)/tsan/libpackedfunc.a -lcmocka $(LIBS)

ASAN_TESTS := $(addprefix $(BUILD)/asan/tests/,$(TEST_NAMES))
TSAN_TESTS := $(addprefix $(BUILD)/tsan/tests/,$(TSAN_NAMES))

export ASAN_OPTIONS := detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS := halt_on_error=1:second_deadlock_stack=1

test-asan: $(ASAN_TESTS)
	@tools/run-c-tests.sh "ASan+UBSan" $(ASAN_TESTS)
test-tsan: $(TSAN_TESTS)
	@tools/run-c-tests.sh "TSan" $(TSAN_TESTS)
test-c: test-asan test-tsan

# Only PF-prefixed symbols leave the shared library, and its soname carries
# the major version.
test-abi: $(SHARED)
	@bad=$$(nm -D --defined-only $(SHARED) | awk '{print $$3}' | grep -v '^PF' | grep -v '^$$' || true); \
	  if [ -n "$$bad" ]; then echo "test-abi: non-PF symbols exported: $$bad"; exit 1; fi
	@readelf -d $(SHARED) | grep -q "SONAME.*\[$(SONAME)\]" || { echo "test-abi: soname is not $(SONAME)"; exit 1; }
	@printf '#include <packedfunc/c_api.h>\nint main(void){return PFGetApiBase()==0;}\n' | \
	  g++ -x c++ -std=c++11 -Wall -Wextra -Werror -Iinclude -fsyntax-only - \
	  || { echo "test-abi: the header does not compile as C++"; exit 1; }
	@echo "test-abi: exports, soname and C++ use of the header OK"

# Installs into a scratch prefix and builds a program outside the tree with
# pkg-config alone, against the shared and then the static library.
test-install: lib
	@tools/test-install.sh

# The README's C example is examples/quickstart.c, word for word, and runs.
test-readme: lib
	@tools/test-readme.sh

# ---- Python binding (issue 3) --------------------------------------------------
# make python       copies the shared library beside the package, so that
#                   `import packedfunc` works with bindings/python on sys.path
#                   and `pip install bindings/python` ships it inside.
# make test-python  builds the tests' C library and runs pytest on tests/python
#                   against this build's library; its counts join the tally.
PY_PKG_LIB := bindings/python/packedfunc/$(SONAME)
PY_TESTLIB := $(BUILD)/python/libpf_testlib.so

# Copied under a temporary name and renamed, so that a Python process that
# has the old copy mapped is not disturbed.
$(PY_PKG_LIB): $(SHARED)
	cp -f $(SHARED) $@.tmp && mv -f $@.tmp $@

python: lib $(PY_PKG_LIB)

$(PY_TESTLIB): tests/python/pf_testlib.c $(SHARED) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(CFLAGS) -shared -o $@ $< -L$(BUILD)/lib -lpackedfunc -lpthread \
	  -Wl,-rpath,'$$ORIGIN/../lib'

test-python: python $(PY_TESTLIB)
	@log=$(BUILD)/python/pytest.log; \
	  PACKEDFUNC_LIBRARY=$(abspath $(SHARED)) PF_TESTLIB=$(abspath $(PY_TESTLIB)) \
	    $(PYTHON) -m pytest -q -p no:cacheprovider tests/python >$$log 2>&1; rc=$$?; \
	  cat $$log; \
	  summary=$$(tail -n 1 $$log); \
	  passed=$$(echo "$$summary" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+'); \
	  failed=$$(echo "$$summary" | grep -oE '[0-9]+ (failed|errors?)' | awk '{s+=$$1} END {print s+0}'); \
	  if [ $$rc -ne 0 ] && [ "$$failed" -eq 0 ]; then failed=1; fi; \
	  tools/run-c-tests.sh --add "$${passed:-0}" "$$failed"; \
	  exit $$rc

test:
	@tools/install-deps.sh
	@rm -f $(BUILD)/.tally  # counts left by an interrupted run must not add up
	@$(MAKE) --no-print-directory test-all

# fuzz-short and valgrind: see the Hardening section below.
test-all: lib test-abi test-install test-readme test-c test-python fuzz-short valgrind bench-quick
	@tools/run-c-tests.sh --summary

# ---- benchmarks ----------------------------------------------------------------
# make bench writes bench/results.md and bench/results.png; QUICK=1 runs short
# trials into $(BUILD)/bench instead, and is part of `make test`.
$(BUILD)/bench/bench_c: bench/bench_c.c $(SHARED)
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Iinclude $(WARN) $< -L$(BUILD)/lib -lpackedfunc \
	  -Wl,-rpath,$(abspath $(BUILD)/lib) -lffi -lpthread -o $@

# The C side of bench/bench_python.py: packed functions and their raw twins.
$(BUILD)/bench/libpf_benchlib.so: bench/bench_pylib.c $(SHARED) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(CFLAGS) -shared -o $@ $< -L$(BUILD)/lib -lpackedfunc \
	  -Wl,-rpath,$(abspath $(BUILD)/lib)
BENCH_DEPS := $(BUILD)/bench/libpf_benchlib.so

.PHONY: bench bench-quick
bench-quick:
	@$(MAKE) --no-print-directory bench QUICK=1
bench: $(BUILD)/bench/bench_c $(BENCH_DEPS)
	$(PYTHON) bench/report.py --build $(BUILD) $(if $(QUICK),--quick --out $(BUILD)/bench)

# ---- modules, the pf command, the demo plugin --------------------------------
# A module is a shared library that links against libpackedfunc.so, so that
# it binds to the copy of the runtime its host already loaded.
#   $(BUILD)/bin/pf                      the pf command (make builds it)
#   $(BUILD)/examples/demo_plugin.so     the demo plugin module
#   $(BUILD)/modules/*.so                test fixture modules (tests/modules)
# test_module and test_pf_cli link an ASan+UBSan *shared* libpackedfunc
# (same soname, in $(BUILD)/asan-shared/lib), so that the test, the fixture
# modules and pf share one runtime instance.
PF_TOOL       := $(BUILD)/bin/pf
DEMO_PLUGIN   := $(BUILD)/examples/demo_plugin.so
MOD_DIR       := $(BUILD)/modules
MOD_FIXTURES  := $(addprefix $(MOD_DIR)/,mod_basic.so mod_other.so mod_multi.so mod_dup.so \
                   mod_badsig.so mod_plain.so mod_depends.so mod_echo.so mod_owner.so \
                   mod_junk.so mod_badname.so mod_badcode.so)
ASAN_SHARED_DIR := $(BUILD)/asan-shared
ASAN_SHARED   := $(ASAN_SHARED_DIR)/lib/libpackedfunc.so.$(VERSION)
ASAN_PF_TOOL  := $(ASAN_SHARED_DIR)/bin/pf
# Links a module: -shared, its own soname, and libpackedfunc.so.0 as DT_NEEDED.
MODULE_LINK    = -shared -Wl,-soname,$(@F) -L$(BUILD)/lib -Wl,--no-as-needed -lpackedfunc

all: $(PF_TOOL) $(DEMO_PLUGIN)
modules: $(PF_TOOL) $(DEMO_PLUGIN) $(MOD_FIXTURES)
.PHONY: modules

$(PF_TOOL): tools/pf.c $(SHARED) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(CFLAGS) -o $@ $< -L$(BUILD)/lib -lpackedfunc -Wl,-rpath,'$$ORIGIN/../lib' -lm

$(DEMO_PLUGIN): examples/plugin/demo_plugin.c $(SHARED) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(CFLAGS) $(MODULE_LINK) -o $@ $< -lm

$(MOD_DIR)/%.so: tests/modules/%.c $(SHARED) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(CFLAGS) $(MODULE_LINK) -o $@ $<
$(MOD_DIR)/mod_multi.so: tests/modules/mod_multi_a.c tests/modules/mod_multi_b.c $(SHARED) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(CFLAGS) $(MODULE_LINK) -o $@ $(filter %.c,$^)
# Not linked against libpackedfunc at all; not a module.
$(MOD_DIR)/mod_plain.so: tests/modules/mod_plain.c
	@mkdir -p $(@D)
	$(CC) $(BASE) $(CFLAGS) -shared -o $@ $<
# Depends on a module (DT_NEEDED mod_basic.so) without being one.
$(MOD_DIR)/mod_depends.so: tests/modules/mod_depends.c $(MOD_DIR)/mod_basic.so
	$(CC) $(BASE) $(CFLAGS) -shared -Wl,-soname,$(@F) -o $@ $< -Wl,--no-as-needed \
	  $(MOD_DIR)/mod_basic.so -Wl,-rpath,'$$ORIGIN'

$(ASAN_SHARED): $(call obj_of,asan) runtime/exports.map
	@mkdir -p $(@D)
	$(CC) $(SAN_ASAN) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=runtime/exports.map \
	  -o $@ $(call obj_of,asan) $(LIBS)
	ln -sf libpackedfunc.so.$(VERSION) $(@D)/$(SONAME)
	ln -sf $(SONAME) $(@D)/libpackedfunc.so

$(ASAN_PF_TOOL): tools/pf.c $(ASAN_SHARED) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(SAN_ASAN) -o $@ $< -L$(ASAN_SHARED_DIR)/lib -lpackedfunc \
	  -Wl,-rpath,$(abspath $(ASAN_SHARED_DIR)/lib) -lm

ASAN_SHARED_LINK = -L$(ASAN_SHARED_DIR)/lib -lpackedfunc -Wl,-rpath,$(abspath $(ASAN_SHARED_DIR)/lib)
MODULE_TEST_DEFS = -DPF_TEST_MODULE_DIR='"$(abspath $(MOD_DIR))"' \
                   -DPF_TEST_DEMO_PLUGIN='"$(abspath $(DEMO_PLUGIN))"'

$(BUILD)/asan/tests/test_module: tests/test_module.c $(ASAN_SHARED) $(MOD_FIXTURES) $(DEMO_PLUGIN) \
                                 $(TEST_SUPPORT) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(SAN_ASAN) -Itests $(MODULE_TEST_DEFS) -o $@ $< $(ASAN_SHARED_LINK) \
	  -lcmocka $(LIBS)
$(BUILD)/asan/tests/test_pf_cli: tests/test_pf_cli.c $(ASAN_PF_TOOL) $(PF_TOOL) $(DEMO_PLUGIN) \
                                 $(MOD_FIXTURES) $(TEST_SUPPORT) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(SAN_ASAN) -Itests $(MODULE_TEST_DEFS) \
	  -DPF_TEST_CLI='"$(abspath $(ASAN_PF_TOOL))"' -DPF_TEST_CLI_REL='"$(abspath $(PF_TOOL))"' \
	  -o $@ $< -lcmocka

# ---- The demo (issue 4, Python parts) ---------------------------------------------
#   make demo   builds the library, the demo plugin and the Python package, then
#               runs examples/demo.py on them; README.md shows what it prints
#               (tests/python/test_readme.py checks that it still does).
# Placed after the modules section, whose variables it uses.
.PHONY: demo
demo: python $(DEMO_PLUGIN)
	@PACKEDFUNC_LIBRARY=$(abspath $(SHARED)) PYTHONPATH=$(abspath bindings/python) \
	  $(PYTHON) examples/demo.py $(DEMO_PLUGIN)

# The Python tests load the demo plugin (tests/python/test_module.py, the
# README's Python examples, examples/demo.py)...
test-python: $(DEMO_PLUGIN)
test-python: export PF_DEMO_PLUGIN := $(abspath $(DEMO_PLUGIN))
# ...and the fixture modules of tests/modules, for the error paths of load_module.
test-python: $(MOD_FIXTURES)
test-python: export PF_TEST_MODULE_DIR := $(abspath $(MOD_DIR))
# The README's C examples load the demo plugin; its sessions run pf.
test-readme: $(DEMO_PLUGIN) $(PF_TOOL)

# ---- Hardening: fuzzing, valgrind, soak (issue 6) ---------------------------------
#   make fuzz [FUZZ_SECONDS=60]  every libFuzzer target in tests/fuzz for that long
#   make fuzz-short              every target for FUZZ_SHORT_SECONDS from its seed
#                                corpus (part of make test)
#   make valgrind                every C test, built without sanitizers, under
#                                valgrind memcheck (part of make test)
#   make soak [SOAK_OPS=1000000] the threaded soak test, long, under ASan and TSan;
#                                the short form (100000) runs with the C tests
# The fuzz targets and a fuzz flavour of the runtime are built with clang's
# libFuzzer plus ASan+UBSan. New inputs that a run finds go to a scratch corpus
# under $(BUILD)/fuzz/work, crashes to $(BUILD)/fuzz/artifacts; the committed
# seeds in tests/fuzz/corpus stay small. A crash becomes a regression test in
# the C suite and its input a seed.
FUZZ_CC            ?= clang
FUZZ_SECONDS       ?= 60
FUZZ_SHORT_SECONDS ?= 8
SOAK_OPS           ?= 1000000
FUZZ_SAN   := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_BINS  := $(addprefix $(BUILD)/fuzz/bin/fuzz_,$(FUZZ_NAMES))
PLAIN_CFLAGS := -O1 -g
PLAIN_TESTS  := $(addprefix $(BUILD)/plain/tests/,$(TEST_NAMES))
VALGRIND     := valgrind -q --error-exitcode=99 --leak-check=full \
                --errors-for-leak-kinds=definite,indirect --suppressions=tests/valgrind.supp
# The soak test's operation count under valgrind, which runs threads one at a time.
VALGRIND_SOAK_OPS ?= 20000

$(BUILD)/fuzz/obj/%.o: %.c $(LIB_HDRS) | $(DEPS_OK)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(BASE) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -c $< -o $@
$(BUILD)/fuzz/libpackedfunc.a: $(call obj_of,fuzz)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/fuzz/bin/fuzz_%: tests/fuzz/fuzz_%.c $(BUILD)/fuzz/libpackedfunc.a $(LIB_HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(BASE) $(FUZZ_SAN) -fsanitize=fuzzer -Itests -o $@ $< \
	  $(BUILD)/fuzz/libpackedfunc.a $(LIBS) -lm
# The pf command's parser: tools/pf.c without its main().
$(BUILD)/fuzz/bin/fuzz_pf_args: tests/fuzz/fuzz_pf_args.c tools/pf.c $(BUILD)/fuzz/libpackedfunc.a \
                                $(LIB_HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(BASE) $(FUZZ_SAN) -fsanitize=fuzzer -DPF_CLI_NO_MAIN -Itests -o $@ \
	  $(filter %.c,$^) $(BUILD)/fuzz/libpackedfunc.a $(LIBS) -lm

fuzz: $(FUZZ_BINS)
	@tests/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS) work $(FUZZ_NAMES)
fuzz-short: $(FUZZ_BINS)
	@tests/fuzz/run.sh $(BUILD) $(FUZZ_SHORT_SECONDS) short $(FUZZ_NAMES)

# The plain flavour: no sanitizers, for valgrind.
$(BUILD)/plain/obj/%.o: %.c $(LIB_HDRS) | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(PLAIN_CFLAGS) -c $< -o $@
$(BUILD)/plain/libpackedfunc.a: $(call obj_of,plain)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/plain/tests/%: tests/%.c $(BUILD)/plain/libpackedfunc.a $(TEST_SUPPORT) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(PLAIN_CFLAGS) -Itests -o $@ $< $(BUILD)/plain/libpackedfunc.a -lcmocka $(LIBS)
# The module tests share one runtime with the fixture modules: the shipped
# shared library, which is built without sanitizers too.
$(BUILD)/plain/tests/test_module: tests/test_module.c $(SHARED) $(MOD_FIXTURES) $(DEMO_PLUGIN) \
                                  $(TEST_SUPPORT) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(PLAIN_CFLAGS) -Itests $(MODULE_TEST_DEFS) -o $@ $< -L$(BUILD)/lib -lpackedfunc \
	  -Wl,-rpath,$(abspath $(BUILD)/lib) -lcmocka $(LIBS)
$(BUILD)/plain/tests/test_pf_cli: tests/test_pf_cli.c $(PF_TOOL) $(DEMO_PLUGIN) $(MOD_FIXTURES) \
                                  $(TEST_SUPPORT) $(LIB_HDRS)
	@mkdir -p $(@D)
	$(CC) $(BASE) $(PLAIN_CFLAGS) -Itests $(MODULE_TEST_DEFS) \
	  -DPF_TEST_CLI='"$(abspath $(PF_TOOL))"' -DPF_TEST_CLI_REL='"$(abspath $(PF_TOOL))"' \
	  -o $@ $< -lcmocka

# Each test under memcheck: any error, or a definite or indirect leak, fails it.
# The pf processes that test_pf_cli starts are not traced (that costs minutes);
# pf_cli_main itself runs under LeakSanitizer in fuzz_pf_args.
valgrind: $(PLAIN_TESTS)
	@status=0; for t in $(PLAIN_TESTS); do rm -f $$t.valgrind.*.log; \
	  if PF_SOAK_OPS=$(VALGRIND_SOAK_OPS) $(VALGRIND) --log-file=$$t.valgrind.%p.log $$t \
	       > $$t.out 2>&1; then \
	    echo "ok   [valgrind] $$(basename $$t)"; rm -f $$t.valgrind.*.log; \
	  else cat $$t.out $$t.valgrind.*.log | tail -n 80; \
	    echo "FAIL [valgrind] $$(basename $$t)"; status=1; fi; \
	done; exit $$status

soak: $(BUILD)/asan/tests/test_soak_threads $(BUILD)/tsan/tests/test_soak_threads
	PF_SOAK_OPS=$(SOAK_OPS) $(BUILD)/asan/tests/test_soak_threads
	PF_SOAK_OPS=$(SOAK_OPS) $(BUILD)/tsan/tests/test_soak_threads

.PHONY: fuzz fuzz-short valgrind soak

# ---- Hardening, Python side (issue 6) -------------------------------------------
#   make soak-python [SOAK_OPS=1000000]  tests/python/test_soak.py in its long form
#                                        (make soak runs it too); its short form
#                                        (250000 operations) is part of test-python
.PHONY: soak-python
soak: soak-python
soak-python: python $(PY_TESTLIB)
	PF_PY_SOAK_OPS=$(SOAK_OPS) PACKEDFUNC_LIBRARY=$(abspath $(SHARED)) \
	  PF_TESTLIB=$(abspath $(PY_TESTLIB)) \
	  $(PYTHON) -m pytest -q -s -p no:cacheprovider tests/python/test_soak.py

# ---- install -----------------------------------------------------------------
BINDIR ?= $(PREFIX)/bin
install: lib $(PF_TOOL)
	install -d $(DESTDIR)$(INCLUDEDIR)/packedfunc $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(BINDIR)
	install -m 644 include/packedfunc/*.h $(DESTDIR)$(INCLUDEDIR)/packedfunc/
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libpackedfunc.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libpackedfunc.so
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	# Written at each install, so that it always names this PREFIX.
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' packedfunc.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/packedfunc.pc
	install -m 755 $(PF_TOOL) $(DESTDIR)$(BINDIR)/pf  # finds ../lib through its rpath

clean:
	rm -rf $(BUILD)
