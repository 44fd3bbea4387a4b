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
TSAN_NAMES := $(filter %concurrency %threads,$(TEST_NAMES))
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

test-python: lib

test:
	@tools/install-deps.sh
	@$(MAKE) --no-print-directory test-all

test-all: lib test-abi test-install test-readme test-c test-python
	@tools/run-c-tests.sh --summary

# ---- install -----------------------------------------------------------------
$(BUILD)/packedfunc.pc: packedfunc.pc.in
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' $< > $@

install: lib $(BUILD)/packedfunc.pc
	install -d $(DESTDIR)$(INCLUDEDIR)/packedfunc $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 include/packedfunc/*.h $(DESTDIR)$(INCLUDEDIR)/packedfunc/
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libpackedfunc.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libpackedfunc.so
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 644 $(BUILD)/packedfunc.pc $(DESTDIR)$(LIBDIR)/pkgconfig/

clean:
	rm -rf $(BUILD)
