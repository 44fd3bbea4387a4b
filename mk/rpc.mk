# Remote functions (rpc/, include/packedfunc/rpc.h): a library of its own,
# libpackedfunc_rpc, so that the core keeps depending only on libffi and
# uthash. Included by the Makefile after mk/tests.mk, whose variables it
# uses and whose targets it extends:
#
#   lib           also builds $(BUILD)/lib/libpackedfunc_rpc.so.N and .a
#   install       also installs them, rpc.h and packedfunc-rpc.pc
#   test          also runs test-rpc-abi; the C tests tests/test_rpc*.c, the
#                 Python tests tests/python/test_rpc*.py and the fuzzer
#                 tests/fuzz/fuzz_rpc_*.c join their suites
#
# rpc/*.c compile with each flavour's pattern rule (the Makefile's
# $(BUILD)/FLAVOUR/obj/%.o); only the links are here.
.PHONY: test-rpc-abi install-rpc

RPC_SRCS    := $(sort $(wildcard rpc/*.c))
RPC_LIBS    := -lzmq -lmsgpackc -lpthread
rpc_obj_of   = $(patsubst %.c,$(BUILD)/$(1)/obj/%.o,$(RPC_SRCS))
RPC_SONAME  := libpackedfunc_rpc.so.$(VERSION_MAJOR)
RPC_SHARED  := $(BUILD)/lib/libpackedfunc_rpc.so.$(VERSION)
RPC_STATIC  := $(BUILD)/lib/libpackedfunc_rpc.a

# Per flavour, a static archive of rpc/ for the tests and the fuzzer.
define RPC_FLAVOUR_RULES
$(BUILD)/$(1)/libpackedfunc_rpc.a: $(call rpc_obj_of,$(1))
	$$(call quiet,AR) rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach f,$(FLAVOURS),$(eval $(call RPC_FLAVOUR_RULES,$(f))))

# The shipped library: its soname, only PFRPC symbols exported, linked
# against libpackedfunc.so.N (found beside it at run time).
$(RPC_SHARED): $(call rpc_obj_of,rel) rpc/exports.map $(SHARED)
	@mkdir -p $(@D)
	$(call quiet,LD) $(CC) -shared -Wl,-soname,$(RPC_SONAME) -Wl,--version-script=rpc/exports.map \
	  -Wl,--no-undefined -o $@ $(call rpc_obj_of,rel) -L$(BUILD)/lib -lpackedfunc $(RPC_LIBS) \
	  -Wl,-rpath,'$$ORIGIN'
	$(Q)ln -sf $(@F) $(@D)/$(RPC_SONAME)
	$(Q)ln -sf $(RPC_SONAME) $(@D)/libpackedfunc_rpc.so
$(RPC_STATIC): $(BUILD)/rel/libpackedfunc_rpc.a
	@mkdir -p $(@D)
	$(call quiet,CP) cp -f $< $@

lib: $(RPC_SHARED) $(RPC_STATIC)

install: install-rpc
install-rpc: $(RPC_SHARED) $(RPC_STATIC)
	install -d $(DESTDIR)$(INCLUDEDIR)/packedfunc $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 include/packedfunc/rpc.h $(DESTDIR)$(INCLUDEDIR)/packedfunc/
	install -m 755 $(RPC_SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf libpackedfunc_rpc.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(RPC_SONAME)
	ln -sf $(RPC_SONAME) $(DESTDIR)$(LIBDIR)/libpackedfunc_rpc.so
	install -m 644 $(RPC_STATIC) $(DESTDIR)$(LIBDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' packedfunc-rpc.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/packedfunc-rpc.pc

# Only PFRPC-prefixed symbols leave the library, each declared in rpc.h;
# every declared entry point is exported; the soname carries the major
# version; the header compiles as C++.
test-rpc-abi: $(RPC_SHARED)
	@$(RUN) tools/check-abi-rpc.sh $(RPC_SHARED) $(RPC_SONAME)

# ---- tests ---------------------------------------------------------------------------
# The C tests link both archives of their flavour, so that the test, the
# servers it starts and the clients share one runtime; test_rpc also starts
# `pf serve` (the shipped pf, which loads the shipped libpackedfunc_rpc) on
# the demo plugin.
RPC_TEST_DEFS = -DPF_TEST_CLI_REL='"$(abspath $(PF_TOOL))"' \
                -DPF_TEST_DEMO_PLUGIN='"$(abspath $(DEMO_PLUGIN))"'
define RPC_TEST_RULE
$(BUILD)/$(1)/tests/$(2): tests/$(2).c $(BUILD)/$(1)/libpackedfunc_rpc.a $(BUILD)/$(1)/libpackedfunc.a \
                          $(PF_TOOL) $(RPC_SHARED) $(DEMO_PLUGIN) | $(call DEPS_STAMP,test)
	@mkdir -p $$(@D)
	$$(call quiet,CC) $$($(1)_CC) $$(BASE) $$($(1)_FLAGS) $$(DEPFLAGS) -Itests -Irpc $(RPC_TEST_DEFS) -o $$@ $$< \
	  $(BUILD)/$(1)/libpackedfunc_rpc.a $(BUILD)/$(1)/libpackedfunc.a -lcmocka $$(LIBS) $(RPC_LIBS)
endef
RPC_TEST_NAMES := $(filter test_rpc%,$(TEST_NAMES))
$(foreach f,asan tsan plain,$(foreach t,$(RPC_TEST_NAMES),$(eval $(call RPC_TEST_RULE,$(f),$(t)))))

# The decoder's fuzzer links the fuzz flavour of rpc/.
$(BUILD)/fuzz/bin/fuzz_rpc_%: tests/fuzz/fuzz_rpc_%.c $(BUILD)/fuzz/libpackedfunc_rpc.a \
                              $(BUILD)/fuzz/libpackedfunc.a | $(call DEPS_STAMP,test)
	@mkdir -p $(@D)
	$(call quiet,CC) $(FUZZ_CC) $(BASE) $(FUZZ_SAN) $(DEPFLAGS) -fsanitize=fuzzer -Itests -Irpc -o $@ $< \
	  $(BUILD)/fuzz/libpackedfunc_rpc.a $(BUILD)/fuzz/libpackedfunc.a $(LIBS) $(RPC_LIBS) -lm

# The Python tests find the library through PF_RPC_LIBRARY.
PY_TEST_ENV += PF_RPC_LIBRARY=$(abspath $(RPC_SHARED)) PF_TEST_CLI_REL=$(abspath $(PF_TOOL))
$(PY_SUITES): $(RPC_SHARED) $(PF_TOOL)

# ---- benchmarks ----------------------------------------------------------------------
# bench/bench_rpc.c (remote calls against raw ZeroMQ between the same two
# processes) links the shipped core and rpc/'s archive, whose internal
# codec builds the raw baseline's bytes; bench/report.py runs it.
$(BUILD)/bench/bench_rpc: bench/bench_rpc.c $(BUILD)/rel/libpackedfunc_rpc.a $(SHARED) \
                          | $(call DEPS_STAMP,bench)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) -O2 -g -Irpc $(DEPFLAGS) $< -o $@ $(BUILD)/rel/libpackedfunc_rpc.a \
	  -L$(BUILD)/lib -lpackedfunc -Wl,-rpath,$(abspath $(BUILD)/lib) $(RPC_LIBS)
bench: $(BUILD)/bench/bench_rpc

# make python puts libpackedfunc_rpc beside the package too (it finds
# libpackedfunc.so.N beside itself through its $ORIGIN runpath).
PY_PKG_RPC_LIB := bindings/python/packedfunc/$(RPC_SONAME)
$(PY_PKG_RPC_LIB): $(RPC_SHARED) | $(call DEPS_STAMP,python)
	$(call quiet,CP) cp -f $(RPC_SHARED) $@.tmp && mv -f $@.tmp $@
python: $(PY_PKG_RPC_LIB) $(PY_PKG_DIR)/libpackedfunc_rpc.so $(PY_PKG_DIR)/pkgconfig/packedfunc-rpc.pc

# Every rpc test runs under ThreadSanitizer too (test_rpc's and
# test_rpc_object_types' names do not match the threaded-test patterns of
# mk/tests.mk, but they run callbacks, nested calls and CURVE handshakes
# across threads, and servers on their own threads).
RPC_TSAN_TESTS := $(addprefix $(BUILD)/tsan/tests/,test_rpc test_rpc_object_types)
TSAN_TESTS += $(RPC_TSAN_TESTS)
test-tsan: $(RPC_TSAN_TESTS)
