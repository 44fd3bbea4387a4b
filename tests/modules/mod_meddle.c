/* Test fixture: md.Node, an object type with a child, a List of items and
 * two accessor fields that let another thread act at the moment a walk
 * (to_json, structural_equal) reads them: `meddle`, once armed (md.arm),
 * clears a List, as another thread would while the walk holds its
 * snapshot of it; `pause`, once armed (md.arm_pause), tells a waiting
 * thread (md.wait_reached) that the walk is there and waits until that
 * thread says it is done (md.resume), or half a second. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "packedfunc/c_api.h"

typedef struct {
  PFObjectHandle child;
  PFObjectHandle items;
} Node;

static PFObjectHandle g_armed; /* a reference of its own */

static int64_t arm(PFObjectHandle list) {
  PFObjectRetain(list);
  PFObjectFree(g_armed);
  g_armed = list;
  return 0;
}
PF_REGISTER_TYPED("md.arm", arm, "int64(list)");

static int get_meddle(const void* data, PFValue* out, int* out_code) {
  (void)data;
  PFObjectHandle list = g_armed;
  g_armed = NULL;
  if (list) {
    int rc = PFListClear(list);
    PFObjectFree(list);
    if (rc != 0) return -1;
  }
  out->v_int64 = 0;
  *out_code = kPFInt;
  return 0;
}

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_changed = PTHREAD_COND_INITIALIZER;
static int g_pause_armed, g_reached, g_resumed;

/* Waits on g_changed until *flag is set or `ms` pass; 1 when it is set. */
static int wait_for(const int* flag, int64_t ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)(ms / 1000);
  until.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec += 1;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&g_lock);
  int rc = 0;
  while (!*flag && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g_changed, &g_lock, &until);
  int set = *flag;
  pthread_mutex_unlock(&g_lock);
  return set;
}

static void set_flag(int* flag, int value) {
  pthread_mutex_lock(&g_lock);
  *flag = value;
  pthread_cond_broadcast(&g_changed);
  pthread_mutex_unlock(&g_lock);
}

static int64_t arm_pause(void) {
  pthread_mutex_lock(&g_lock);
  g_pause_armed = 1;
  g_reached = g_resumed = 0;
  pthread_mutex_unlock(&g_lock);
  return 0;
}
static int64_t wait_reached(int64_t ms) { return wait_for(&g_reached, ms); }
static int64_t resume(void) {
  set_flag(&g_resumed, 1);
  return 0;
}
PF_REGISTER_TYPED("md.arm_pause", arm_pause, "int64()");
PF_REGISTER_TYPED("md.wait_reached", wait_reached, "int64(int64)");
PF_REGISTER_TYPED("md.resume", resume, "int64()");

static int get_pause(const void* data, PFValue* out, int* out_code) {
  (void)data;
  pthread_mutex_lock(&g_lock);
  int armed = g_pause_armed;
  g_pause_armed = 0;
  pthread_mutex_unlock(&g_lock);
  if (armed) {
    set_flag(&g_reached, 1);
    wait_for(&g_resumed, 500);
  }
  out->v_int64 = 0;
  *out_code = kPFInt;
  return 0;
}

static const PFFieldDesc k_fields[] = {
    PF_FIELD(Node, child, "object", kPFFieldWritable, NULL),
    PF_FIELD(Node, items, "list", kPFFieldWritable, NULL),
};
static const PFAccessorDesc k_accessors[] = {
    PF_ACCESSOR("meddle", "int64", get_meddle, NULL, NULL),
    PF_ACCESSOR("pause", "int64", get_pause, NULL, NULL),
};
static const PFObjectTypeDesc2 k_node = {
    {PF_OBJECT_TYPE_DESC2_ABI, "md.Node", NULL, sizeof(Node), NULL, "A node that meddles.",
     k_fields, PF_COUNTOF(k_fields), NULL, 0},
    k_accessors,
    PF_COUNTOF(k_accessors)};
PF_REGISTER_OBJECT_TYPE(k_node.base);
