# The C++ layer (include/packedfunc/packedfunc.hpp); included by the
# Makefile, whose variables it uses.
#
#   make test-cpp   tests/cpp/test_cpp_layer.cc built by g++ and clang++, as
#                   C++17 and C++20, -Werror, under ASan+UBSan, and run; then
#                   the registrations that must not compile
#                   (tests/cpp/compile_fail, tools/test-cxx-compile-fail.sh).
#                   Part of make test.
# The tests link the shipped shared library, built without sanitizers: the
# layer is header-only, so the code under test is the test's own, and one
# compiler's sanitizer runtime never meets the other's.
.PHONY: test-cpp

CPP_COMPILERS := g++ clang++
CPP_STDS      := 17 20
# Under ASan+UBSan at -O0: the sanitizers check the same, and the four
# compiles of the template-heavy test take 15 s of CPU each instead of 37
# at the C tests' -O1 (a warning that only the optimizer finds still
# shows in tests/modules/mod_cxx_layer.cc, built -O2).
CPP_FLAGS     := -Iinclude -Wall -Wextra -Werror -Wshadow $(SAN_ASAN) -O0
CPP_TESTS     := $(foreach c,$(CPP_COMPILERS),$(foreach s,$(CPP_STDS),$(BUILD)/cpp/test_cpp_layer-$(c)-$(s)))

define CPP_TEST_RULE
$(BUILD)/cpp/test_cpp_layer-$(1)-$(2): tests/cpp/test_cpp_layer.cc include/packedfunc/packedfunc.hpp \
                                       $(SHARED) | $(call DEPS_STAMP,test)
	@mkdir -p $$(@D)
	$$(call quiet,CXX) $(1) -std=c++$(2) $(CPP_FLAGS) -o $$@ $$< -L$(BUILD)/lib -lpackedfunc \
	  -Wl,-rpath,$(abspath $(BUILD)/lib) -lcmocka
endef
$(foreach c,$(CPP_COMPILERS),$(foreach s,$(CPP_STDS),$(eval $(call CPP_TEST_RULE,$(c),$(s)))))

test-cpp: $(CPP_TESTS)
	@$(RUN) tools/run-c-tests.sh test-cpp $(CPP_TESTS)
	@$(RUN) tools/test-cxx-compile-fail.sh $(CPP_COMPILERS)
