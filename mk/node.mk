# The Node.js package (bindings/node); included by the Makefile, whose
# variables it uses.
#
#   make node        bindings/node usable from the tree: its npm dependencies
#                    (koffi, from the committed package-lock.json: npm ci),
#                    its C helper and the shared library beside the package
#   make test-node   node --test over bindings/node/test against this build,
#                    with resolved targets in their checking mode
#                    (PF_CHECK_TARGETS=1: a call the binding builds wrong is
#                    an error); its counts join the tally (part of make test)
#   make demo-node   examples/demo.mjs on the demo plugin
#   make node-pack   dist/packedfunc-VERSION.tgz, which `npm install` puts
#                    into any project: the package with this build's
#                    library and helper, and every non-glibc library they
#                    load, found through $ORIGIN (tools/build-node-pack.sh)
#   make test-node-pack  that tarball as a new user meets it, installed into
#                    an empty project with nothing of the build tree around,
#                    and the declarations `pf stubgen --lang ts` writes,
#                    checked by tsc (tools/test-node-pack.sh; part of make test)
.PHONY: node test-node demo-node node-pack test-node-pack

NODE ?= node
NPM  ?= npm
NODE_PKG := bindings/node

# The package's C half (bindings/node/src/pfnode.c: callbacks from any
# thread, see its header comment), a library of its own that links
# libpackedfunc. Built like the library: same warnings, -Werror.
NODE_HELPER     := $(BUILD)/node/libpfnode.so
NODE_PKG_HELPER := $(NODE_PKG)/lib/native/libpfnode.so
NODE_PKG_LIB    := $(NODE_PKG)/lib/native/$(SONAME)
$(NODE_HELPER): $(NODE_PKG)/src/pfnode.c $(SHARED)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(CFLAGS) $(DEPFLAGS) -shared -o $@ $< -L$(BUILD)/lib -lpackedfunc \
	  -lpthread -Wl,-rpath,'$$ORIGIN/../lib'

# The tests' C fixture (beside tests/python/pf_testlib.c, which they load too).
NODE_TESTLIB := $(BUILD)/node/libpf_nodetest.so
$(NODE_TESTLIB): tests/node/pf_nodetest.c $(SHARED)
	@mkdir -p $(@D)
	$(call quiet,CC) $(CC) $(BASE) $(CFLAGS) $(DEPFLAGS) -shared -o $@ $< -L$(BUILD)/lib -lpackedfunc \
	  -lpthread -Wl,-rpath,'$$ORIGIN/../lib'

# koffi, exactly as package-lock.json pins it (npm ci never rewrites the
# lock); the stamp is newer than the lock file once installed.
$(NODE_PKG)/node_modules/.package-lock.json: $(NODE_PKG)/package-lock.json $(NODE_PKG)/package.json
	$(call quiet,NPM) cd $(NODE_PKG) && $(NPM) ci --no-audit --no-fund --loglevel=error >/dev/null
	@touch $@

# Copied beside the package under a temporary name and renamed, so that a
# running process that has the old copy mapped is not disturbed.
$(NODE_PKG_LIB): $(SHARED)
	@mkdir -p $(@D)
	$(call quiet,CP) cp -f $(SHARED) $@.tmp && mv -f $@.tmp $@
$(NODE_PKG_HELPER): $(NODE_HELPER)
	@mkdir -p $(@D)
	$(call quiet,CP) cp -f $(NODE_HELPER) $@.tmp && mv -f $@.tmp $@

node: lib $(NODE_PKG)/node_modules/.package-lock.json $(NODE_PKG_LIB) $(NODE_PKG_HELPER)

NODE_TEST_ENV = PACKEDFUNC_LIBRARY=$(abspath $(SHARED)) PACKEDFUNC_NODE_HELPER=$(abspath $(NODE_HELPER)) \
                PF_TESTLIB=$(abspath $(PY_TESTLIB)) PF_NODETEST=$(abspath $(NODE_TESTLIB)) \
                PF_DEMO_PLUGIN=$(abspath $(DEMO_PLUGIN)) PF_BENCHLIB=$(abspath $(BUILD)/bench/libpf_benchlib.so) \
                PF_TEST_MODULE_DIR=$(abspath $(MOD_DIR))

test-node: node $(NODE_HELPER) $(NODE_TESTLIB) $(PY_TESTLIB) $(DEMO_PLUGIN) $(BUILD)/bench/libpf_benchlib.so \
           $(MOD_DIR)/mod_cxx_layer.so
	@$(RUN) env $(NODE_TEST_ENV) PF_CHECK_TARGETS=1 NODE=$(NODE) tools/test-node.sh

demo-node: node $(DEMO_PLUGIN)
	@$(NODE) examples/demo.mjs $(DEMO_PLUGIN)

# Built once into $(BUILD)/node/pack/dist, again when what it holds changes.
NODE_PACK       := $(BUILD)/node/pack/dist/packedfunc-$(VERSION).tgz
NODE_PACK_STAMP := $(BUILD)/node/pack/built
$(NODE_PACK_STAMP): $(SHARED) $(NODE_HELPER) $(wildcard $(NODE_PKG)/*.js $(NODE_PKG)/*.mjs $(NODE_PKG)/*.ts \
                    $(NODE_PKG)/*.mts $(NODE_PKG)/*.json $(NODE_PKG)/*.md $(NODE_PKG)/lib/*.js $(NODE_PKG)/lib/*/*.js) \
                    tools/build-node-pack.sh tools/bundle-libs.sh
	$(call quiet,NPM) NODE=$(NODE) NPM=$(NPM) tools/build-node-pack.sh $(SHARED) $(NODE_HELPER) $(VERSION) && touch $@
node-pack: $(NODE_PACK_STAMP)
	@mkdir -p dist && cp -f $(NODE_PACK) dist/ && echo dist/$(notdir $(NODE_PACK))

# The install test takes koffi from npm's cache, where `make node`'s npm ci
# left it (the registry when it is not there), tsc from the package's
# devDependencies; pf writes the declarations with this tree's Python package.
# TypeScript declarations of these modules must type-check too.
NODE_PACK_TS_MODULES := $(addprefix $(MOD_DIR)/,mod_types.so mod_cxx.so mod_echo.so)
test-node-pack: $(NODE_PACK_STAMP) node python $(PF_TOOL) $(DEMO_PLUGIN) $(NODE_PACK_TS_MODULES) \
                | $(call DEPS_STAMP,test)
	@$(RUN) env NODE=$(NODE) NPM=$(NPM) PYTHON=$(PYTHON) tools/test-node-pack.sh $(NODE_PACK) $(DEMO_PLUGIN) $(PF_TOOL) \
	  $(NODE_PACK_TS_MODULES)

# The benchmarks' Node.js rows (bench/bench_node.mjs) need the package.
bench: node $(NODE_HELPER)

# tests/test_pfnode_threads.c drives the helper from C (its main thread
# plays the JavaScript thread), so that ASan, TSan and valgrind see it
# without node or koffi: each flavour compiles pfnode.c into the test, with
# the flavour's flags, beside that flavour's archive. The test's name puts
# it on TEST_NAMES and TSAN_NAMES (mk/tests.mk) like any other.
define NODE_HELPER_TEST_RULE
$(BUILD)/$(1)/tests/test_pfnode_threads: tests/test_pfnode_threads.c $(NODE_PKG)/src/pfnode.c \
                                         $(BUILD)/$(1)/libpackedfunc.a | $(call DEPS_STAMP,test)
	@mkdir -p $$(@D)
	$$(call quiet,CC) $$($(1)_CC) $$(BASE) $$($(1)_FLAGS) -Itests -o $$@ \
	  tests/test_pfnode_threads.c $(NODE_PKG)/src/pfnode.c $(BUILD)/$(1)/libpackedfunc.a -lcmocka $$(LIBS)
endef
$(foreach f,asan tsan plain,$(eval $(call NODE_HELPER_TEST_RULE,$(f))))
