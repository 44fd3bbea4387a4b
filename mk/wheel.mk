# The wheel; included by the Makefile after the other mk/*.mk, whose
# variables it uses.
#
#   make wheel        dist/packedfunc-VERSION-TAGS.whl, which `pip install`
#                     puts into any venv, offline: the package with its
#                     libraries, every non-glibc library they load (renamed,
#                     found through $ORIGIN), the pf program behind a `pf`
#                     console script, and _cext compiled for $(PYTHON)
#                     (tools/build-wheel.sh; docs/building.md says what its
#                     tags mean)
#   make test-wheel   that wheel as a new user meets it, in a plain venv
#                     with nothing of the build tree around
#                     (tools/test-wheel.sh; part of make test)
.PHONY: wheel test-wheel

# Built once into $(BUILD)/wheel/dist, again when what it holds changes.
WHEEL_STAMP  := $(BUILD)/wheel/built
WHEEL_INPUTS := $(SHARED) $(RPC_SHARED) $(PF_TOOL) $(PY_PKG_HEADERS) $(PY_PKG_DLPACK) $(PY_PKG_LDSCRIPT) \
                $(PY_PKG_PC) $(wildcard bindings/python/src/* bindings/python/packedfunc/*.py \
                                        bindings/python/*.py bindings/python/*.toml) \
                tools/build-wheel.sh tools/bundle-libs.sh
$(WHEEL_STAMP): $(WHEEL_INPUTS) | python
	$(call quiet,WHEEL) PYTHON=$(PYTHON) tools/build-wheel.sh $(PF_TOOL) && touch $@
wheel: $(WHEEL_STAMP)
	@mkdir -p dist && cp -f $(BUILD)/wheel/dist/packedfunc-$(VERSION)-*.whl dist/ && \
	  cd $(BUILD)/wheel/dist && ls packedfunc-$(VERSION)-*.whl | sed 's|^|dist/|'

test-wheel: $(WHEEL_STAMP) | $(call DEPS_STAMP,test)
	@$(RUN) env PYTHON=$(PYTHON) tools/test-wheel.sh $(BUILD)/wheel/dist/packedfunc-$(VERSION)-*.whl
