/* ELF checks: a library file before dlopen reads it, a loaded library's segments. */
#define _GNU_SOURCE /* the GNU strerror_r, which returns the text */
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "module.h"

/* ---- the mapped segments of a loaded library ---- */

typedef struct {
  const void* dynamic;
  pf_segments* out;
} segments_query;

static int segments_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  segments_query* q = data;
  pf_segments* s = q->out;
  int match = 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum && !match; ++i)
    match = info->dlpi_phdr[i].p_type == PT_DYNAMIC &&
            (const void*)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr) == q->dynamic;
  if (!match) return 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || ph->p_memsz == 0) continue;
    if (s->count == PF_MAX_SEGMENTS) {
      s->count = -1;
      break;
    }
    pf_segment* g = &s->seg[s->count++];
    g->start = info->dlpi_addr + ph->p_vaddr;
    g->end = g->start + ph->p_memsz;
    g->flags = ph->p_flags;
  }
  return 1;
}

int pf_elf_segments(const void* dynamic, pf_segments* s) {
  segments_query q = {dynamic, s};
  s->count = 0;
  dl_iterate_phdr(segments_cb, &q);
  return s->count;
}

int pf_elf_in_segment(const pf_segments* s, const void* p, size_t len, uint32_t flags,
                      uintptr_t* seg_end) {
  uintptr_t a = (uintptr_t)p;
  for (int i = 0; i < s->count; ++i) {
    const pf_segment* g = &s->seg[i];
    if ((g->flags & flags) == flags && a >= g->start && a < g->end && len <= g->end - a) {
      if (seg_end) *seg_end = g->end;
      return 1;
    }
  }
  return 0;
}

int pf_elf_valid_string(const pf_segments* s, const char* str) {
  uintptr_t end;
  return pf_elf_in_segment(s, str, 1, PF_R, &end) &&
         memchr(str, '\0', end - (uintptr_t)str) != NULL;
}

/* 1 when the address at `data` lies in an executable segment of this
 * object. */
static int exec_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  uintptr_t a = *(const uintptr_t*)data;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && a >= start && a - start < ph->p_memsz)
      return 1;
  }
  return 0;
}

int pf_elf_valid_code(const pf_segments* s, const void* code) {
  if (pf_elf_in_segment(s, code, 1, PF_X, NULL)) return 1;
  uintptr_t a = (uintptr_t)code;
  return dl_iterate_phdr(exec_cb, &a) != 0;
}

/* ---- a file before dlopen reads it ---- */

static const char* file_type(mode_t mode) {
  return S_ISFIFO(mode)   ? "a FIFO"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "not a regular file";
}

static int read_at(int fd, void* buf, size_t len, off_t off) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, (char*)buf + done, len - done, off + (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

/* Why an ELF header is not one this process can load, or NULL. */
static const char* header_problem(const ElfW(Ehdr) * eh) {
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return "invalid ELF header";
  pf_library_setup();
  const ElfW(Ehdr)* own = pf_self_ehdr;
  unsigned char want_class = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
  if (eh->e_ident[EI_CLASS] != want_class) return "wrong ELF class (32 or 64 bits)";
  if (own != NULL && eh->e_ident[EI_DATA] != own->e_ident[EI_DATA])
    return "ELF file of the wrong byte order";
  if (eh->e_ident[EI_VERSION] != EV_CURRENT) return "unknown ELF version";
  if (own != NULL && eh->e_machine != own->e_machine) return "ELF file for another machine";
  return NULL;
}

int pf_elf_file_matches(int fd) {
  struct stat st;
  ElfW(Ehdr) eh;
  return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read_at(fd, &eh, sizeof(eh), 0) == 0 &&
         header_problem(&eh) == NULL;
}

/* pf_elf_file_problem for the program headers of `eh`, in a file of
 * `size` bytes. */
static int segments_problem(int fd, const ElfW(Ehdr) * eh, uint64_t size, char* why, size_t n) {
  uint64_t table = (uint64_t)eh->e_phnum * sizeof(ElfW(Phdr));
  if (eh->e_phoff > size || table > size - eh->e_phoff)
    return snprintf(why, n, "file truncated: its program headers end past its %llu bytes",
                    (unsigned long long)size);
  for (ElfW(Half) i = 0; i < eh->e_phnum; ++i) {
    ElfW(Phdr) ph;
    if (read_at(fd, &ph, sizeof(ph), (off_t)(eh->e_phoff + i * sizeof(ph))) != 0)
      return snprintf(why, n, "cannot read program header %u", (unsigned)i);
    if (ph.p_filesz > 0 && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset))
      return snprintf(
          why, n, "file truncated: segment %u needs bytes up to %llu, the file has %llu",
          (unsigned)i, (unsigned long long)ph.p_offset + ph.p_filesz, (unsigned long long)size);
    if (ph.p_type == PT_LOAD && ph.p_filesz > ph.p_memsz)
      return snprintf(why, n, "corrupt segment %u (more file than memory)", (unsigned)i);
  }
  return 0;
}

int pf_elf_file_problem(int fd, char* why, size_t n) {
  char text[128];
  struct stat st;
  ElfW(Ehdr) eh;
  if (fstat(fd, &st) != 0)
    return snprintf(why, n, "cannot stat it: %s", strerror_r(errno, text, sizeof(text)));
  if (!S_ISREG(st.st_mode))
    return snprintf(why, n, "it is %s, not a regular file", file_type(st.st_mode));
  if ((uint64_t)st.st_size < sizeof(eh) || read_at(fd, &eh, sizeof(eh), 0) != 0)
    return snprintf(why, n, "file too short (%lld bytes) for an ELF header", (long long)st.st_size);
  if (header_problem(&eh) != NULL) return snprintf(why, n, "%s", header_problem(&eh));
  if (eh.e_type != ET_DYN)
    return snprintf(why, n, "not a shared object (ELF type %u)", (unsigned)eh.e_type);
  if (eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0)
    return snprintf(why, n, "corrupt ELF program header table");
  return segments_problem(fd, &eh, (uint64_t)st.st_size, why, n);
}
