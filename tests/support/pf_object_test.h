/* Helpers of the object type tests (test_object_types.c,
 * test_object_accessors.c): each asserts that its entry point succeeded
 * and gives its output. Header-only; include after pf_test.h. */
#ifndef PACKEDFUNC_TESTS_SUPPORT_PF_OBJECT_TEST_H_
#define PACKEDFUNC_TESTS_SUPPORT_PF_OBJECT_TEST_H_

#include "support/pf_test.h"

static inline uint32_t reg(const PFObjectTypeDesc* d) {
  uint32_t ix = 0;
  assert_pf_ok(PFObjectTypeRegister(d, &ix));
  assert_true(ix >= kPFObjectTypeRegisteredBegin);
  return ix;
}

static inline const PFObjectTypeInfo* info(uint32_t ix) {
  const PFObjectTypeInfo* ti = NULL;
  assert_pf_ok(PFObjectTypeGetInfo(ix, &ti));
  return ti;
}

static inline const PFFieldInfo* field(uint32_t ix, const char* name) {
  const PFFieldInfo* f = NULL;
  assert_pf_ok(PFObjectTypeGetField(ix, name, &f));
  return f;
}

static inline PFObjectHandle alloc(uint32_t ix) {
  PFObjectHandle o = NULL;
  assert_pf_ok(PFObjectAlloc(ix, &o));
  return o;
}

static inline void* data(PFObjectHandle o) {
  void* d = NULL;
  assert_pf_ok(PFObjectGetData(o, &d));
  return d;
}

#endif /* PACKEDFUNC_TESTS_SUPPORT_PF_OBJECT_TEST_H_ */
