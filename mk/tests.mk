# Tests and hardening; included by the Makefile, whose variables it uses.
#
#   make test                    every suite below, then one summary line; each
#                                suite prints one line as it runs (its make
#                                target, a dot per program or test file, its
#                                counts), and its failures after it
#   make test-asan / test-tsan   the C tests under ASan+UBSan / TSan
#   make test-python             pytest over tests/python against this build, once
#                                with the compiled extension and once with ctypes
#   make fuzz [FUZZ_SECONDS=60]  every libFuzzer target in tests/fuzz for that long
#   make fuzz-short              every target on its committed seeds, then
#                                FUZZ_SHORT_RUNS inputs from FUZZ_SEED: the
#                                same inputs every run (part of make test)
#   make valgrind                every C test, built without sanitizers, under
#                                valgrind memcheck (part of make test)
#   make soak [SOAK_OPS=1000000] the threaded soak tests, long, under ASan and TSan
#                                and in Python; their short forms run with the suites
#   make test-cpp                the C++ layer's tests, g++ and clang++, C++17 and C++20,
#                                under ASan+UBSan, and its compile-fail cases (mk/cpp.mk)
#   make test-format             every C and C++ file as .clang-format lays it out
#                                (part of make test)
#   make test-clang              the libraries built, and every C test, example and
#                                tool compiled, by clang with -Werror (part of make test)
.PHONY: test test-format test-clang test-all test-c test-asan test-tsan test-abi test-install test-readme test-checked \
        test-python test-python-cext test-python-ctypes fuzz fuzz-short valgrind soak soak-python modules

TEST_SRCS  := $(sort $(wildcard tests/test_*.c))
TEST_NAMES := $(patsubst tests/%.c,%,$(TEST_SRCS))
# Tests that exercise threads; they also run under ThreadSanitizer.
TSAN_NAMES := $(filter %concurrency %threads %closure %host_gate %call_frame %structural %serialize,$(TEST_NAMES))

export ASAN_OPTIONS := detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS := halt_on_error=1:second_deadlock_stack=1

# make test runs the suites of TEST_SUITES, TEST_JOBS at a time (the
# machine's cores): first it builds what all of them need at once (make -j,
# with RUN=true: each suite's command starts with $(RUN), and `true` runs
# nothing), then tools/run-suites.sh runs each suite as its own make, its
# output in $(BUILD)/suites/SUITE.log, printed whole and in this order,
# each with its time (SUITE.time and SUITE.cpu hold its wall and CPU
# seconds); a failed suite stops it. The longest suites start first
# (TEST_SUITES_FIRST, longest first: the Python suites took 308 s on ctypes
# and 266 s on the extension, valgrind's programs 322 s on two cores), so
# that the short ones fill the other cores meanwhile and none that is long
# starts last; the others follow in TEST_SUITES' order.
TEST_SUITES := test-python-cext test-format test-clang test-abi test-rpc-abi test-install test-wheel test-readme \
               test-checked valgrind test-python-ctypes test-asan test-tsan fuzz-short test-node test-node-pack test-cpp bench-quick
TEST_SUITES_FIRST := test-python-ctypes test-python-cext valgrind test-asan
TEST_ORDER  := $(filter $(TEST_SUITES),$(TEST_SUITES_FIRST)) $(filter-out $(TEST_SUITES_FIRST),$(TEST_SUITES))
TEST_JOBS   ?= $(shell nproc)
RUN         ?=

test:
	@tools/install-deps.sh build python test bench
	@rm -f $(BUILD)/.tally  # counts left by an interrupted run must not add up
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) $(TEST_SUITES) RUN=true $(if $(V),,V=0)
	@MAKE="$(MAKE)" V=$(or $(V),0) tools/run-suites.sh $(TEST_JOBS) $(TEST_ORDER)
	@tools/run-c-tests.sh --summary

# Every suite, one after the other.
test-all: $(TEST_SUITES)
	@tools/run-c-tests.sh --summary

# The layout check (tools/check-format.sh --fix rewrites what differs).
test-format:
	@$(RUN) tools/check-format.sh

# The C sources under clang, -Werror: the libraries built and linked, every
# test, example and tool compiled (tools/test-clang.sh).
test-clang:
	@$(RUN) env BUILD=$(BUILD) MAKE="$(MAKE)" CLANG_FLAGS="$(BASE) $(CFLAGS)" tools/test-clang.sh

# ---- C tests ---------------------------------------------------------------------
ASAN_TESTS := $(addprefix $(BUILD)/asan/tests/,$(TEST_NAMES))
TSAN_TESTS := $(addprefix $(BUILD)/tsan/tests/,$(TSAN_NAMES))

test-asan: $(ASAN_TESTS)
	@$(RUN) tools/run-c-tests.sh test-asan $(ASAN_TESTS)
test-tsan: $(TSAN_TESTS)
	@$(RUN) tools/run-c-tests.sh test-tsan $(TSAN_TESTS)
test-c: test-asan test-tsan

# ---- fixture modules and the sanitized shared runtime ----------------------------
#   $(BUILD)/modules/*.so   test fixture modules (tests/modules)
# test_module, test_object_types_module and test_pf_cli link an ASan+UBSan
# *shared* libpackedfunc (same soname, in $(BUILD)/asan-shared/lib), so that
# the test, the fixture modules and pf share one runtime instance.
MOD_DIR      := $(BUILD)/modules
MOD_FIXTURES := $(addprefix $(MOD_DIR)/,mod_basic.so mod_other.so mod_multi.so mod_dup.so \
                  mod_badsig.so mod_plain.so mod_depends.so mod_echo.so mod_owner.so \
                  mod_junk.so mod_badname.so mod_badcode.so mod_badprepack.so \
                  mod_types.so mod_types_clash.so mod_badtype.so mod_badaccessor.so mod_pyobj.so \
                  mod_badprepare.so mod_cxx.so mod_elements.so mod_cxx_layer.so mod_stale.so \
                  mod_nonblocking.so mod_badflags.so mod_stale_method.so mod_meddle.so)
modules: $(PF_TOOL) $(DEMO_PLUGIN) $(MOD_FIXTURES)

$(MOD_DIR)/%.so: tests/modules/%.c $(SHARED)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(CFLAGS) $(DEPFLAGS) $(MODULE_LINK) -o $@ $<
$(MOD_DIR)/mod_multi.so: tests/modules/mod_multi_a.c tests/modules/mod_multi_b.c $(SHARED)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(CFLAGS) $(MODULE_LINK) -o $@ $(filter %.c,$^)
# Written in C++: the registration macros as a C++17 library uses them,
# under the warnings the C code has.
CXX          ?= g++
MODULE_CXXFLAGS := -std=c++17 -Iinclude -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Wshadow
# Its second file is C: both languages' registrations share one table.
$(MOD_DIR)/mod_cxx_c.o: tests/modules/mod_cxx_c.c | $(call DEPS_STAMP,build)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(CFLAGS) $(DEPFLAGS) -c -o $@ $<
$(MOD_DIR)/mod_cxx.so: tests/modules/mod_cxx.cc $(MOD_DIR)/mod_cxx_c.o $(SHARED)
	@mkdir -p $(@D)
	$(call quiet,CXX) $(CXX) $(MODULE_CXXFLAGS) $(CFLAGS) $(DEPFLAGS) $(MODULE_LINK) -o $@ $< \
	  $(MOD_DIR)/mod_cxx_c.o
# Written with the C++ layer (packedfunc.hpp).
$(MOD_DIR)/mod_cxx_layer.so: tests/modules/mod_cxx_layer.cc $(SHARED)
	@mkdir -p $(@D)
	$(call quiet,CXX) $(CXX) $(MODULE_CXXFLAGS) $(CFLAGS) $(DEPFLAGS) $(MODULE_LINK) -o $@ $<
# Not linked against libpackedfunc at all; not a module.
$(MOD_DIR)/mod_plain.so: tests/modules/mod_plain.c
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(CFLAGS) -shared -o $@ $<
# Depends on a module (DT_NEEDED mod_basic.so) without being one.
$(MOD_DIR)/mod_depends.so: tests/modules/mod_depends.c $(MOD_DIR)/mod_basic.so
	$(call quiet,CC) $(CC) $(BASE) $(CFLAGS) -shared -Wl,-soname,$(@F) -o $@ $< -Wl,--no-as-needed \
	  $(MOD_DIR)/mod_basic.so -Wl,-rpath,'$$ORIGIN'

ASAN_SHARED_DIR := $(BUILD)/asan-shared
ASAN_SHARED     := $(ASAN_SHARED_DIR)/lib/libpackedfunc.so.$(VERSION)
ASAN_PF_TOOL    := $(ASAN_SHARED_DIR)/bin/pf
ASAN_SHARED_LINK = -L$(ASAN_SHARED_DIR)/lib -lpackedfunc -Wl,-rpath,$(abspath $(ASAN_SHARED_DIR)/lib)
MODULE_TEST_DEFS = -DPF_TEST_MODULE_DIR='"$(abspath $(MOD_DIR))"' \
                   -DPF_TEST_DEMO_PLUGIN='"$(abspath $(DEMO_PLUGIN))"'
CLI_TEST_DEFS    = -DPF_TEST_CLI='"$(abspath $(1))"' -DPF_TEST_CLI_REL='"$(abspath $(PF_TOOL))"'

$(ASAN_SHARED): $(call obj_of,asan) runtime/exports.map
	$(call SHARED_LINK,$(CC) $(SAN_ASAN),$(call obj_of,asan))
$(ASAN_PF_TOOL): $(call pf_tool_objs,asan) $(ASAN_SHARED)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(SAN_ASAN) -o $@ $(call pf_tool_objs,asan) $(ASAN_SHARED_LINK) -lm

# The module and pf tests, per flavour: ASan against the sanitized shared
# runtime; plain (for valgrind) against the shipped one, which is built
# without sanitizers too.
MODULE_TEST_NEEDS := $(MOD_FIXTURES) $(DEMO_PLUGIN) | $(call DEPS_STAMP,test)
$(BUILD)/asan/tests/test_module: tests/test_module.c $(ASAN_SHARED) $(MODULE_TEST_NEEDS)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(SAN_ASAN) $(DEPFLAGS) -Itests $(MODULE_TEST_DEFS) -o $@ $< \
	  $(ASAN_SHARED_LINK) -lcmocka $(LIBS)
$(BUILD)/asan/tests/test_object_types_module: tests/test_object_types_module.c $(ASAN_SHARED) \
                                               $(MODULE_TEST_NEEDS)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(SAN_ASAN) $(DEPFLAGS) -Itests $(MODULE_TEST_DEFS) -o $@ $< \
	  $(ASAN_SHARED_LINK) -lcmocka $(LIBS)
$(BUILD)/asan/tests/test_pf_cli: tests/test_pf_cli.c $(ASAN_PF_TOOL) $(PF_TOOL) $(MODULE_TEST_NEEDS) python
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(SAN_ASAN) $(DEPFLAGS) -Itests $(MODULE_TEST_DEFS) \
	  $(call CLI_TEST_DEFS,$(ASAN_PF_TOOL)) -o $@ $< -lcmocka
$(BUILD)/plain/tests/test_module: tests/test_module.c $(SHARED) $(MODULE_TEST_NEEDS)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(plain_FLAGS) $(DEPFLAGS) -Itests $(MODULE_TEST_DEFS) -o $@ $< \
	  -L$(BUILD)/lib -lpackedfunc -Wl,-rpath,$(abspath $(BUILD)/lib) -lcmocka $(LIBS)
$(BUILD)/plain/tests/test_object_types_module: tests/test_object_types_module.c $(SHARED) \
                                                $(MODULE_TEST_NEEDS)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(plain_FLAGS) $(DEPFLAGS) -Itests $(MODULE_TEST_DEFS) -o $@ $< \
	  -L$(BUILD)/lib -lpackedfunc -Wl,-rpath,$(abspath $(BUILD)/lib) -lcmocka $(LIBS)
$(BUILD)/plain/tests/test_pf_cli: tests/test_pf_cli.c $(PF_TOOL) $(MODULE_TEST_NEEDS) python
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(plain_FLAGS) $(DEPFLAGS) -Itests $(MODULE_TEST_DEFS) \
	  $(call CLI_TEST_DEFS,$(PF_TOOL)) -o $@ $< -lcmocka

# ---- the shared library's ABI ------------------------------------------------------
# Only PF-prefixed symbols leave the shared library, each of them a PFApi slot
# or on the header's list of deliberate exceptions; the soname carries the
# major version; the header compiles as C++.
test-abi: $(SHARED)
	@$(RUN) tools/check-abi.sh $(SHARED) $(SONAME)

# Installs into a scratch prefix and builds a program outside the tree with
# pkg-config alone, against the shared and then the static library.
test-install: lib $(PF_TOOL)
	@$(RUN) tools/test-install.sh

# The README's C example is examples/quickstart.c, word for word, and runs;
# its sessions run pf and the installed tree.
test-readme: lib python $(DEMO_PLUGIN) $(PF_TOOL)
	@$(RUN) env PYTHON=$(PYTHON) PACKEDFUNC_LIBRARY=$(abspath $(SHARED)) tools/test-readme.sh

# Checked registrations: each deliberate mismatch of tests/checked/mismatch.c
# fails to compile, under gcc and clang, at its line (a syntax-only compile
# each).
test-checked:
	@$(RUN) tools/test-checked.sh

# ---- Python ---------------------------------------------------------------------------
# make test-python builds the tests' C library and runs pytest on tests/python
# against this build's library; its counts join the tally. The tests load the
# demo plugin (test_module.py, the README's Python examples, examples/demo.py)
# and the fixture modules, for the error paths of load_module.
PY_TESTLIB := $(BUILD)/python/libpf_testlib.so
$(PY_TESTLIB): tests/python/pf_testlib.c $(SHARED)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(CFLAGS) $(DEPFLAGS) -shared -o $@ $< -L$(BUILD)/lib -lpackedfunc -lpthread \
	  -Wl,-rpath,'$$ORIGIN/../lib'

PY_TEST_ENV = PACKEDFUNC_LIBRARY=$(abspath $(SHARED)) PF_TESTLIB=$(abspath $(PY_TESTLIB)) \
              PF_DEMO_PLUGIN=$(abspath $(DEMO_PLUGIN)) PF_TEST_MODULE_DIR=$(abspath $(MOD_DIR))

# The whole suite runs once per backend (tools/test-python.sh): the compiled
# extension (which must then be importable: PACKEDFUNC_BACKEND=cext makes its
# absence an error) and pure ctypes. The extension is also compiled with
# clang, -Werror.
PY_BACKENDS := cext ctypes
$(BUILD)/python/cext-clang/_cext.so: $(PY_CEXT_SRCS) | $(call DEPS_STAMP,test)
	@mkdir -p $(@D)
	$(call quiet,CC) clang $(PY_CEXT_FLAGS) $(CFLAGS) $(DEPFLAGS) -shared -o $@ $(PY_CEXT_SRCS)

# make test runs the backends as two suites, test-python-cext and
# test-python-ctypes, side by side.
PY_SUITES := test-python $(addprefix test-python-,$(PY_BACKENDS))
$(PY_SUITES): python $(PY_TESTLIB) $(DEMO_PLUGIN) $(MOD_FIXTURES) $(BUILD)/python/cext-clang/_cext.so \
              | $(call DEPS_STAMP,test)
test-python:
	@$(RUN) env $(PY_TEST_ENV) PYTHON=$(PYTHON) tools/test-python.sh $(PY_BACKENDS)
$(addprefix test-python-,$(PY_BACKENDS)): test-python-%:
	@$(RUN) env $(PY_TEST_ENV) PYTHON=$(PYTHON) tools/test-python.sh $*

# ---- fuzzing -------------------------------------------------------------------------
# The fuzz targets link the fuzz flavour. New inputs that a run finds go to a
# scratch corpus under $(BUILD)/fuzz/work, crashes to $(BUILD)/fuzz/artifacts;
# the committed seeds in tests/fuzz/corpus stay small. A crash becomes a
# regression test in the C suite and its input a seed.
FUZZ_SECONDS    ?= 60
FUZZ_SHORT_RUNS ?= 20000
FUZZ_SEED       ?= 1
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_BINS  := $(addprefix $(BUILD)/fuzz/bin/fuzz_,$(FUZZ_NAMES))

$(BUILD)/fuzz/bin/fuzz_%: tests/fuzz/fuzz_%.c $(BUILD)/fuzz/libpackedfunc.a | $(call DEPS_STAMP,test)
	@mkdir -p $(@D)
	$(call quiet,CC) $(FUZZ_CC) $(BASE) $(FUZZ_SAN) $(DEPFLAGS) -fsanitize=fuzzer -Itests -o $@ $< \
	  $(BUILD)/fuzz/libpackedfunc.a $(LIBS) -lm
# The pf command's parser: tools/pf.c without its main(), with its JSON
# reader and printer and its key-file reader.
$(BUILD)/fuzz/bin/fuzz_pf_args: tests/fuzz/fuzz_pf_args.c tools/pf.c tools/pf_json.h tools/pf_keys.h \
                                $(BUILD)/fuzz/obj/tools/pf_json.o $(BUILD)/fuzz/obj/tools/pf_keys.o \
                                $(BUILD)/fuzz/libpackedfunc.a | $(call DEPS_STAMP,test)
	@mkdir -p $(@D)
	$(call quiet,CC) $(FUZZ_CC) $(BASE) $(FUZZ_SAN) -fsanitize=fuzzer -DPF_CLI_NO_MAIN -Itests -o $@ \
	  $(filter %.c %.o,$^) $(BUILD)/fuzz/libpackedfunc.a $(LIBS) -lm
# pf's JSON reader and printer on their own.
$(BUILD)/fuzz/bin/fuzz_pf_json: tests/fuzz/fuzz_pf_json.c $(BUILD)/fuzz/obj/tools/pf_json.o \
                                $(BUILD)/fuzz/libpackedfunc.a | $(call DEPS_STAMP,test)
	@mkdir -p $(@D)
	$(call quiet,CC) $(FUZZ_CC) $(BASE) $(FUZZ_SAN) $(DEPFLAGS) -fsanitize=fuzzer -Itools -o $@ $< \
	  $(BUILD)/fuzz/obj/tools/pf_json.o $(BUILD)/fuzz/libpackedfunc.a $(LIBS) -lm

fuzz: $(FUZZ_BINS)
	@tests/fuzz/run.sh $(BUILD) explore $(FUZZ_SECONDS) $(FUZZ_NAMES)
fuzz-short: $(FUZZ_BINS)
	@$(RUN) tests/fuzz/run.sh $(BUILD) replay $(FUZZ_SHORT_RUNS) $(FUZZ_SEED) $(FUZZ_NAMES)

# ---- valgrind --------------------------------------------------------------------------
# Each test, plain flavour, under memcheck: any error, or a definite or indirect
# leak, fails it. The pf processes that test_pf_cli starts are not traced (that
# costs minutes); pf_cli_main itself runs under LeakSanitizer in fuzz_pf_args.
PLAIN_TESTS := $(addprefix $(BUILD)/plain/tests/,$(TEST_NAMES))
VALGRIND    := valgrind -q --error-exitcode=99 --leak-check=full \
               --errors-for-leak-kinds=definite,indirect --suppressions=tests/valgrind.supp
# The soak test's operation count under valgrind, which runs threads one at a time.
VALGRIND_SOAK_OPS ?= 20000

# Its programs run TEST_JOBS at a time (each is one process at a time
# under valgrind), the longest first (VALGRIND_FIRST: test_rpc took 121 s
# of their 322 s), so that none that is long starts last.
VALGRIND_FIRST := $(addprefix $(BUILD)/plain/tests/,test_rpc test_rpc_threads)
VALGRIND_ORDER := $(filter $(PLAIN_TESTS),$(VALGRIND_FIRST)) $(filter-out $(VALGRIND_FIRST),$(PLAIN_TESTS))
valgrind: $(PLAIN_TESTS)
	@$(RUN) env PF_SOAK_OPS=$(VALGRIND_SOAK_OPS) PF_UNDER_VALGRIND=1 VALGRIND="$(VALGRIND)" \
	  PF_TEST_JOBS=$(TEST_JOBS) tools/run-c-tests.sh --valgrind valgrind $(VALGRIND_ORDER)

# ---- soak --------------------------------------------------------------------------------
SOAK_OPS ?= 1000000
soak: $(BUILD)/asan/tests/test_soak_threads $(BUILD)/tsan/tests/test_soak_threads soak-python
	PF_SOAK_OPS=$(SOAK_OPS) $(BUILD)/asan/tests/test_soak_threads
	PF_SOAK_OPS=$(SOAK_OPS) $(BUILD)/tsan/tests/test_soak_threads
# tests/python/test_soak.py in its long form; its short form (250000
# operations) is part of test-python.
soak-python: python $(PY_TESTLIB)
	for backend in $(PY_BACKENDS); do \
	  PACKEDFUNC_BACKEND=$$backend PF_PY_SOAK_OPS=$(SOAK_OPS) $(PY_TEST_ENV) \
	    $(PYTHON) -m pytest -q -s -p no:cacheprovider tests/python/test_soak.py || exit 1; \
	done
