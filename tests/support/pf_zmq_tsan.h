/* ThreadSanitizer's suppressions for a test that runs remote functions
 * (rpc/): libzmq (and libsodium, which decrypts CURVE messages for it) is
 * not instrumented, and its lock-free queues hand messages between its own
 * threads in ways ThreadSanitizer cannot see. Reports whose stacks are
 * inside it are not ours; every hand-off in rpc/ is a mutex. Include it
 * once, in the test's one file; without ThreadSanitizer it is empty. */
#ifndef PACKEDFUNC_TESTS_SUPPORT_PF_ZMQ_TSAN_H_
#define PACKEDFUNC_TESTS_SUPPORT_PF_ZMQ_TSAN_H_

#if defined(__SANITIZE_THREAD__)
#define PF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PF_TSAN 1
#endif
#endif

#ifdef PF_TSAN
const char* __tsan_default_suppressions(void);
__attribute__((visibility("default"))) const char* __tsan_default_suppressions(void) {
  return "called_from_lib:libzmq.so\nrace:libzmq.so\nrace:libsodium.so\n";
}
#endif

#endif /* PACKEDFUNC_TESTS_SUPPORT_PF_ZMQ_TSAN_H_ */
