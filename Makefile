# packedfunc — the one build: library, tools, examples, tests, install.
#
#   make                  shared + static library, the pf command, the demo plugin
#   make demo             the demo: a C plugin driven from Python
#   make test             every test: C under ASan+UBSan, concurrency under TSan,
#                         the ABI, install, README, Python, fuzzers, valgrind
#   make python           bindings/python importable from the tree
#   make wheel            dist/packedfunc-*.whl: pip installs it into any venv
#   make bench            the benchmarks (bench/results.md, bench/results.png)
#   make install PREFIX=  headers, libraries, pkg-config file, pf
#   make clean
#
# Build commands print one short line each ("  CC      build/rel/obj/runtime/api.o");
# V=1 prints the commands themselves. A command that fails is printed in full
# after the compiler's messages, V=1 or not.
#
# Every target first makes sure the Debian packages it needs are installed
# (tools/install-deps.sh: as root it installs them, otherwise it prints the
# exact apt-get line and stops). The test and hardening rules live in
# mk/tests.mk, the benchmark rules in mk/bench.mk.

# The version is the header's; nothing else spells it out.
HEADER        := include/packedfunc/base.h
VERSION       := $(shell sed -n 's/^\#define PF_VERSION_STRING "\([^"]*\)".*/\1/p' $(HEADER))
VERSION_MAJOR := $(firstword $(subst ., ,$(VERSION)))
ifeq ($(VERSION),)
$(error cannot read PF_VERSION_STRING from $(HEADER))
endif

PREFIX        ?= /usr/local
LIBDIR        ?= $(PREFIX)/lib
INCLUDEDIR    ?= $(PREFIX)/include
BINDIR        ?= $(PREFIX)/bin
CC            ?= cc
# The interpreter that sees Debian's python3-* packages.
PYTHON        ?= $(firstword $(wildcard /usr/bin/python3) python3)
BUILD         ?= build
export BUILD

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wno-missing-field-initializers
BASE    := -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -fPIC -fvisibility=hidden \
           -fno-semantic-interposition $(WARN)
CFLAGS  ?= -O2 -g
LIBS    := -lffi -lxxhash -ldl -lpthread -lm
# Each compile also writes the headers it read, so a header change rebuilds
# exactly what includes it.
DEPFLAGS = -MMD -MP

.DEFAULT_GOAL := all
.PHONY: all lib python wheel demo install clean deps

# ---- quiet rules ------------------------------------------------------------------
# A build command starts with $(call quiet,TAG): unless V=1, that prints
# "  TAG     TARGET" instead of the command, and an ERR trap prints the command
# if it fails (bash's $BASH_COMMAND: the recipes run in bash). $(Q) hides a
# command that has nothing to say beside its TAG line (the soname symlinks).
# V=0 (what make test passes down) prints not even the TAG lines: the
# suites' own lines are the whole output.
SHELL := /bin/bash
V     ?=
ifeq ($(V),1)
Q     :=
quiet  =
else ifeq ($(V),0)
Q     := @
quiet  = @trap 'printf "failed command for %s:\n  %s\n" "$@" "$$BASH_COMMAND" >&2' ERR;
else
Q     := @
quiet  = @trap 'printf "failed command for %s:\n  %s\n" "$@" "$$BASH_COMMAND" >&2' ERR; \
         printf '  %-7s %s\n' '$(1)' '$@';
endif

# ---- Debian packages -----------------------------------------------------------
# One stamp per group of packages (see tools/install-deps.sh); a target that
# needs a group lists its stamp as an order-only prerequisite.
DEPS_STAMP = $(BUILD)/.deps-$(1)
.PRECIOUS: $(BUILD)/.deps-%
$(BUILD)/.deps-%:
	@tools/install-deps.sh $*
	@mkdir -p $(@D) && touch $@
deps:
	@tools/install-deps.sh build python test bench

# ---- library flavours ------------------------------------------------------------
# One template for every way the runtime is compiled. A flavour has a compiler
# and flags; it gets objects in $(BUILD)/NAME/obj, a static archive
# $(BUILD)/NAME/libpackedfunc.a, and C test binaries $(BUILD)/NAME/tests/test_*
# linked against that archive (so tests can also reach hidden internals).
#   rel    the shipped library            asan   ASan + UBSan (the C tests)
#   tsan   ThreadSanitizer                plain  no sanitizers (valgrind)
#   fuzz   libFuzzer + ASan + UBSan (clang)
FUZZ_CC   ?= clang
SAN_ASAN  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
SAN_TSAN  := -O1 -g -fsanitize=thread
FUZZ_SAN  := $(SAN_ASAN)

FLAVOURS    := rel asan tsan plain fuzz
rel_CC      := $(CC)
rel_FLAGS   := $(CFLAGS)
asan_CC     := $(CC)
asan_FLAGS  := $(SAN_ASAN)
tsan_CC     := $(CC)
tsan_FLAGS  := $(SAN_TSAN)
plain_CC    := $(CC)
plain_FLAGS := -O1 -g
fuzz_CC     := $(FUZZ_CC)
fuzz_FLAGS  := $(FUZZ_SAN) -fsanitize=fuzzer-no-link

LIB_SRCS     := $(sort $(wildcard runtime/*.c registry/*.c))
TEST_SUPPORT := $(wildcard tests/support/*.h)
obj_of        = $(patsubst %.c,$(BUILD)/$(1)/obj/%.o,$(LIB_SRCS))

define FLAVOUR_RULES
$(BUILD)/$(1)/obj/%.o: %.c | $(call DEPS_STAMP,build)
	@mkdir -p $$(@D)
	$$(call quiet,CC) $$($(1)_CC) $$(BASE) $$($(1)_FLAGS) $$(DEPFLAGS) -c $$< -o $$@
$(BUILD)/$(1)/libpackedfunc.a: $(call obj_of,$(1))
	$$(call quiet,AR) rm -f $$@ && ar rcs $$@ $$^
$(BUILD)/$(1)/tests/%: tests/%.c $(BUILD)/$(1)/libpackedfunc.a | $(call DEPS_STAMP,test)
	@mkdir -p $$(@D)
	$$(call quiet,CC) $$($(1)_CC) $$(BASE) $$($(1)_FLAGS) $$(DEPFLAGS) -Itests -o $$@ $$< \
	  $(BUILD)/$(1)/libpackedfunc.a -lcmocka $$(LIBS)
endef
$(foreach f,$(FLAVOURS),$(eval $(call FLAVOUR_RULES,$(f))))

# ---- the shipped library ---------------------------------------------------------
SONAME  := libpackedfunc.so.$(VERSION_MAJOR)
SHARED  := $(BUILD)/lib/libpackedfunc.so.$(VERSION)
STATIC  := $(BUILD)/lib/libpackedfunc.a

# A shared libpackedfunc of a flavour: its soname, only PF symbols exported.
define SHARED_LINK
	@mkdir -p $(@D)
	$(call quiet,LD) $(1) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=runtime/exports.map \
	  -Wl,--no-undefined -o $@ $(2) $(LIBS)
	$(Q)ln -sf $(@F) $(@D)/$(SONAME)
	$(Q)ln -sf $(SONAME) $(@D)/libpackedfunc.so
endef

$(SHARED): $(call obj_of,rel) runtime/exports.map
	$(call SHARED_LINK,$(CC),$(call obj_of,rel))
$(STATIC): $(BUILD)/rel/libpackedfunc.a
	@mkdir -p $(@D)
	$(call quiet,CP) cp -f $< $@

lib: $(SHARED) $(STATIC)

# ---- modules, the pf command, the demo plugin ------------------------------------
# A module is a shared library that links against libpackedfunc.so, so that it
# binds to the copy of the runtime its host already loaded.
#   $(BUILD)/bin/pf                      the pf command
#   $(BUILD)/examples/demo_plugin.so     the demo plugin module
PF_TOOL     := $(BUILD)/bin/pf
DEMO_PLUGIN := $(BUILD)/examples/demo_plugin.so
# Links a module: -shared, its own soname, and libpackedfunc.so.0 as DT_NEEDED.
MODULE_LINK  = -shared -Wl,-soname,$(@F) -L$(BUILD)/lib -Wl,--no-as-needed -lpackedfunc

all: lib $(PF_TOOL) $(DEMO_PLUGIN)

# pf's sources compile as objects of a flavour (rel here, asan for its
# tests), so that each gets its own list of the headers it read.
PF_TOOL_SRCS := tools/pf.c tools/pf_json.c tools/pf_keys.c
pf_tool_objs  = $(patsubst %.c,$(BUILD)/$(1)/obj/%.o,$(PF_TOOL_SRCS))
$(PF_TOOL): $(call pf_tool_objs,rel) $(SHARED)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(CFLAGS) -o $@ $(call pf_tool_objs,rel) -L$(BUILD)/lib -lpackedfunc \
	  -Wl,-rpath,'$$ORIGIN/../lib' -lm

$(DEMO_PLUGIN): examples/plugin/demo_plugin.c examples/plugin/counter.c $(SHARED)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(CFLAGS) $(DEPFLAGS) $(MODULE_LINK) -o $@ $(filter %.c,$^) -lm

# ---- Python binding ----------------------------------------------------------------
# make python copies the shared libraries beside the package (this one, and
# libpackedfunc_rpc in mk/rpc.mk), so that `import packedfunc` works with
# bindings/python on sys.path and `pip install bindings/python` ships them
# inside (bindings/python/setup.py refuses to build without them). Copied
# under a temporary name and renamed, so that a Python process that has the
# old copy mapped is not disturbed.
PY_PKG_LIB := bindings/python/packedfunc/$(SONAME)
$(PY_PKG_LIB): $(SHARED) | $(call DEPS_STAMP,python)
	$(call quiet,CP) cp -f $(SHARED) $@.tmp && mv -f $@.tmp $@

# The compiled fast path, packedfunc._cext (bindings/python/src), built
# against Debian's python3-dev for $(PYTHON). It links to no libpackedfunc:
# it reaches the copy that the package loaded through its function table.
# Built like the library (same warnings, -Werror), with the Python headers
# as system headers; the test rules also compile it with clang.
PY_INCLUDE    = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
PY_EXT_SUFFIX = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
PY_CEXT_SRCS := $(wildcard bindings/python/src/*.c)
PY_CEXT       = bindings/python/packedfunc/_cext$(PY_EXT_SUFFIX)
PY_CEXT_FLAGS = $(BASE) -isystem $(PY_INCLUDE) -fvisibility=hidden
$(BUILD)/python/cext/_cext.so: $(PY_CEXT_SRCS) | $(call DEPS_STAMP,python)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(PY_CEXT_FLAGS) $(CFLAGS) $(DEPFLAGS) -shared -o $@ $(PY_CEXT_SRCS)
# The package is also a toolchain for plugins (packedfunc.get_include(),
# `python -m packedfunc --cflags --libs`, docs/building.md): the public
# headers, pkg-config files that find the package from where they are
# (${pcfiledir}), and for -lpackedfunc a linker script, libpackedfunc.so,
# that names the soname, as a symlink would (a wheel holds no symlinks).
# Its libraries have no rpath that the system would use, so the .pc files
# add one to the package's directory. Each is written under a temporary
# name and renamed, as the libraries are.
PY_PKG_DIR      := bindings/python/packedfunc
PY_PKG_HEADERS  := $(patsubst include/%,$(PY_PKG_DIR)/include/%,$(wildcard include/packedfunc/*.h))
PY_PKG_LDSCRIPT := $(PY_PKG_DIR)/libpackedfunc.so
PY_PKG_PC       := $(PY_PKG_DIR)/pkgconfig/packedfunc.pc
$(PY_PKG_DIR)/include/%.h: include/%.h
	@mkdir -p $(@D)
	$(call quiet,CP) cp -f $< $@.tmp && mv -f $@.tmp $@
$(PY_PKG_DIR)/lib%.so: $(HEADER)
	$(call quiet,GEN) printf '/* GNU ld script: -l%s links the library of this soname. */\nINPUT(-l:%s)\n' \
	  $(patsubst lib%,%,$(basename $(@F))) $(@F).$(VERSION_MAJOR) > $@.tmp && mv -f $@.tmp $@
# The package's .pc files from the install's templates: prefix is the
# package directory, and Libs gains an rpath to it.
PY_PKG_PC_SED = -e 's|@PREFIX@|$${pcfiledir}/..|' -e 's|@LIBDIR@|$${prefix}|' \
                -e 's|@INCLUDEDIR@|$${prefix}/include|' -e 's|@VERSION@|$(VERSION)|' \
                -e 's|^Libs: \(.*\)|Libs: \1 -Wl,-rpath,$${libdir}|'
$(PY_PKG_DIR)/pkgconfig/%.pc: %.pc.in $(HEADER)
	@mkdir -p $(@D)
	$(call quiet,GEN) sed $(PY_PKG_PC_SED) $< > $@.tmp && mv -f $@.tmp $@
# The headers include <dlpack/dlpack.h>: the package ships the copy it was
# built against (Debian's libdlpack-dev), so that a plugin builds against
# the package alone.
PY_PKG_DLPACK := $(PY_PKG_DIR)/include/dlpack/dlpack.h
$(PY_PKG_DLPACK): | $(call DEPS_STAMP,build)
	@mkdir -p $(@D)
	$(call quiet,CP) cp -f "$$(printf '#include <dlpack/dlpack.h>\n' | $(CC) -E -x c - | \
	  sed -n 's|^# [0-9]* "\(.*/dlpack/dlpack\.h\)".*|\1|p' | head -n 1)" $@.tmp && mv -f $@.tmp $@
python: lib $(PY_PKG_LIB) $(BUILD)/python/cext/_cext.so $(PY_PKG_HEADERS) $(PY_PKG_DLPACK) $(PY_PKG_LDSCRIPT) \
        $(PY_PKG_PC)
	@cmp -s $(BUILD)/python/cext/_cext.so $(PY_CEXT) || \
	  { cp -f $(BUILD)/python/cext/_cext.so $(PY_CEXT).tmp && mv -f $(PY_CEXT).tmp $(PY_CEXT); }

# make demo builds the library, the demo plugin and the Python package, then
# runs examples/demo.py on them; README.md shows what it prints
# (tests/python/test_readme.py checks that it still does).
demo: python $(DEMO_PLUGIN)
	@PACKEDFUNC_LIBRARY=$(abspath $(SHARED)) PYTHONPATH=$(abspath bindings/python) \
	  $(PYTHON) examples/demo.py $(DEMO_PLUGIN)

# ---- install -------------------------------------------------------------------------
install: lib $(PF_TOOL)
	install -d $(DESTDIR)$(INCLUDEDIR)/packedfunc $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(BINDIR)
	install -m 644 include/packedfunc/*.h include/packedfunc/*.hpp $(DESTDIR)$(INCLUDEDIR)/packedfunc/
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

include mk/tests.mk mk/bench.mk mk/rpc.mk mk/node.mk mk/wheel.mk mk/cpp.mk

# The header dependencies the compiler wrote (none before the first build).
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
