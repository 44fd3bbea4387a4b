/* Modules from shared library files: find the file, check it, dlopen it, read its table. */
#define _GNU_SOURCE /* dlinfo, dladdr1, RTLD_NOLOAD, the GNU strerror_r */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "module.h"

typedef void (*pf_descriptors_fn)(const PFFuncDescriptor* const**, const PFFuncDescriptor* const**);

/* dlopen's search for a name without a slash, without the loader's cache:
 * the directories that RTLD_DI_SERINFO lists for this library (the caller
 * of dlopen), in order. Writes the first path there that opens as a
 * regular file with an ELF header for this machine, as dlopen would take
 * it, or NULL when none does (dlopen then gets the name as it is). */
static int resolve_name(const char* where, const char* name, char** out) {
  *out = NULL;
  const struct link_map* self = pf_self_map;
  void* h = self == NULL || self->l_name == NULL || self->l_name[0] == '\0'
                ? dlopen(NULL, RTLD_LAZY)
                : dlopen(self->l_name, RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL) {
    dlerror();
    return 0;
  }
  Dl_serinfo size;
  if (dlinfo(h, RTLD_DI_SERINFOSIZE, &size) != 0) {
    dlerror();
    dlclose(h);
    return 0;
  }
  Dl_serinfo* info = pf_malloc(size.dls_size);
  if (info == NULL) {
    dlclose(h);
    return pf_oom(where);
  }
  info->dls_size = size.dls_size;
  info->dls_cnt = size.dls_cnt;
  if (dlinfo(h, RTLD_DI_SERINFO, info) != 0) {
    dlerror();
    info->dls_cnt = 0;
  }
  int rc = 0;
  size_t nlen = strlen(name);
  for (unsigned i = 0; i < info->dls_cnt && *out == NULL; ++i) {
    const char* dir = info->dls_serpath[i].dls_name;
    if (dir == NULL || dir[0] == '\0') dir = ".";
    size_t dlen = strlen(dir);
    char* cand = pf_malloc(dlen + nlen + 2);
    if (cand == NULL) {
      rc = pf_oom(where);
      break;
    }
    memcpy(cand, dir, dlen);
    cand[dlen] = '/';
    memcpy(cand + dlen + 1, name, nlen + 1);
    int fd = open(cand, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0 && pf_elf_file_matches(fd)) *out = cand;
    else pf_free(cand);
    if (fd >= 0) close(fd);
  }
  pf_free(info);
  dlclose(h);
  return rc;
}

/* Checks `file` before dlopen reads it (see pf_elf_file_problem); opened
 * without blocking, for a FIFO would block open and read. `shown` is the
 * path as the caller gave it, for messages. */
static int check_file(const char* where, const char* shown, const char* file) {
  char why[160];
  int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return PF_ERROR(kPFErrRuntimeError,
                    "%s: cannot load '%s': %s: cannot open shared object file: %s", where, shown,
                    file, strerror_r(errno, why, sizeof(why)));
  int bad = pf_elf_file_problem(fd, why, sizeof(why));
  close(fd);
  if (!bad) return 0;
  if (strcmp(shown, file) == 0)
    return PF_ERROR(kPFErrRuntimeError, "%s: cannot load '%s': %s", where, shown, why);
  return PF_ERROR(kPFErrRuntimeError, "%s: cannot load '%s' (found as '%s'): %s", where, shown,
                  file, why);
}

/* dlopen's handle of the library `path` names, after the checks above. */
static int open_library(const char* where, const char* path, void** out) {
  void* dl = NULL;
  char* found = NULL;
  struct stat st;
  if (strchr(path, '/') == NULL && stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
    /* A file here: the one the caller means, which dlopen would not see. */
    size_t n = strlen(path);
    if ((found = pf_malloc(n + 3)) == NULL) return pf_oom(where);
    memcpy(found, "./", 2);
    memcpy(found + 2, path, n + 1);
  } else if (strchr(path, '/') == NULL) {
    /* Already loaded under this name: the loader has mapped it whole. */
    dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (dl == NULL && resolve_name(where, path, &found) != 0) return -1;
  }
  if (dl == NULL) {
    const char* file = found ? found : path;
    /* A bare name that no directory holds goes to dlopen as it is: only
     * the loader's cache (ldconfig's system libraries) can still find it. */
    if ((found != NULL || strchr(path, '/') != NULL) && check_file(where, path, file) != 0) {
      pf_free(found);
      return -1;
    }
    dlerror();
    dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    pf_free(found);
    if (dl == NULL) {
      const char* e = dlerror();
      return PF_ERROR(kPFErrRuntimeError, "%s: cannot load '%s': %s", where, path,
                      e ? e : "dlopen failed without a message");
    }
  }
  *out = dl;
  return 0;
}

/* The function table of the module library `dl` (its link map in *lm, its
 * segments in *segs), checked to lie in the library's loaded data; closes
 * `dl` on failure. */
static int read_table(const char* where, const char* path, void* dl, struct link_map** lm,
                      pf_segments* segs, const PFFuncDescriptor* const** table, size_t* count) {
  /* The accessor must be the library's own: dlsym also searches the
   * libraries it depends on, and one of those may be a module. */
  dlerror();
  void* sym = dlsym(dl, "PFModuleDescriptorsV1");
  struct link_map* sym_lm = NULL;
  Dl_info info;
  if (sym == NULL || dlinfo(dl, RTLD_DI_LINKMAP, lm) != 0 ||
      dladdr1(sym, &info, (void**)&sym_lm, RTLD_DL_LINKMAP) == 0 || sym_lm != *lm) {
    dlclose(dl);
    return PF_ERROR(kPFErrValueError,
                    "%s: '%s' is not a packedfunc module: it registers no functions "
                    "(no PF_REGISTER_PACKED or PF_REGISTER_TYPED in it)",
                    where, path);
  }
  if (pf_elf_segments((*lm)->l_ld, segs) <= 0) {
    dlclose(dl);
    return PF_ERROR(kPFErrValueError, "%s: '%s': cannot find the library's loaded segments%s",
                    where, path, segs->count < 0 ? " (more than 32)" : "");
  }
  pf_descriptors_fn get;
  memcpy(&get, &sym, sizeof(get));
  const PFFuncDescriptor* const* begin = NULL;
  const PFFuncDescriptor* const* end = NULL;
  get(&begin, &end);
  uintptr_t b = (uintptr_t)begin, e = (uintptr_t)end;
  if ((begin == NULL) != (end == NULL) || e < b || (e - b) % sizeof(*begin) != 0 ||
      b % _Alignof(const PFFuncDescriptor*) != 0 ||
      (e > b && !pf_elf_in_segment(segs, begin, e - b, PF_R, NULL))) {
    dlclose(dl);
    return PF_ERROR(kPFErrValueError, "%s: '%s' has a corrupt function table", where, path);
  }
  *table = begin;
  *count = (e - b) / sizeof(*begin);
  return 0;
}

int PFModLoadFromFile(const char* path, PFModuleHandle* out) {
  static const char* const where = "PFModLoadFromFile";
  PF_CHECK_ARG(path);
  PF_CHECK_ARG(out);
  if (path[0] == '\0') return PF_ERROR(kPFErrValueError, "%s: argument 'path' is empty", where);
  pf_library_setup();
  void* dl = NULL;
  struct link_map* lm = NULL;
  pf_segments segs;
  const PFFuncDescriptor* const* table = NULL;
  size_t count = 0;
  if (open_library(where, path, &dl) != 0 ||
      read_table(where, path, dl, &lm, &segs, &table, &count) != 0)
    return -1;
  pf_code_span span = {UINTPTR_MAX, 0};
  for (int i = 0; i < segs.count; ++i) {
    if (segs.seg[i].start < span.start) span.start = segs.seg[i].start;
    if (segs.seg[i].end > span.end) span.end = segs.seg[i].end;
  }
  pf_object* lib = NULL;
  if (pf_library_adopt(dl, lm, span, &lib, where) != 0) return -1;
  pf_module* m = NULL;
  int rc = pf_module_build(where, path, lib, &segs, table, count, &m);
  pf_object_release(lib); /* the module and its functions hold it now */
  if (rc != 0) return -1;
  *out = m;
  return 0;
}
