#!/usr/bin/env bash
# Makes a staged Python package self-contained, as auditwheel's repair does
# (auditwheel is not packaged by Debian; patchelf is).
#   tools/bundle-libs.sh PKGDIR
#   tools/bundle-libs.sh --check PKGDIR   only the check (of an installed copy)
# PKGDIR is a staged copy of bindings/python/packedfunc (tools/build-wheel.sh
# makes it). Every shared library that its ELF files load and that is not
# glibc's is copied into PKGDIR/_libs under a name with a hash of its
# contents (libzmq.so.5 -> libzmq-1a2b3c4d.so.5, so that it cannot clash
# with another copy of that library in the same process), its soname set
# to that name; every DT_NEEDED entry naming it is rewritten, and every ELF
# file finds the copies through its RUNPATH ($ORIGIN). Then ldd of every
# ELF file must list only glibc's libraries and the package's own, or it
# fails and says which library came from where.
set -euo pipefail
check_only=0
if [[ $1 == --check ]]; then check_only=1; shift; fi
pkg=$1
libs=$pkg/_libs
# glibc's libraries (and the kernel's vDSO): every Linux system has them,
# so they are neither copied nor allowed to come from the package.
glibc='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libresolv|libutil|libnsl|libanl)\.so'

is_elf() { [[ -f $1 && $(head -c 4 "$1" | od -An -c | tr -d ' ') == '177ELF' ]]; }
# "SONAME PATH" for every library that ldd resolves for $1.
resolved() { ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'; }
# The check: each library that an ELF file of the package loads comes from
# glibc or from the package, and none is missing.
check() {
  local f soname path status=0
  while IFS= read -r f; do
    is_elf "$f" || continue
    if ldd "$f" | grep -q 'not found'; then
      echo "bundle-libs: $f: $(ldd "$f" | grep 'not found')" >&2
      status=1
    fi
    while read -r soname path; do
      [[ $soname =~ $glibc || $(realpath "$path") == "$(realpath "$pkg")"/* ]] && continue
      echo "bundle-libs: $f loads $soname from $path, outside the package" >&2
      status=1
    done < <(resolved "$f")
  done < <(find "$pkg" -type f | sort)
  return $status
}
if [[ $check_only -eq 1 ]]; then check; exit; fi

own=()
while IFS= read -r f; do is_elf "$f" && own+=("$f"); done < <(find "$pkg" -type f | sort)
[[ ${#own[@]} -gt 0 ]] || { echo "bundle-libs: no ELF file in $pkg" >&2; exit 1; }
own_names=" "
for f in "${own[@]}"; do own_names+="$(basename "$f") "; done

# The package's own files find each other and the copies from where they
# are: the libraries at the top, programs in bin/.
for f in "${own[@]}"; do
  case ${f#"$pkg"/} in
    bin/*) patchelf --set-rpath '$ORIGIN/..:$ORIGIN/../_libs' "$f" ;;
    */*) ;;
    *) patchelf --set-rpath '$ORIGIN:$ORIGIN/_libs' "$f" ;;
  esac
done

# Every library they load, directly or not (ldd lists the whole closure).
declare -A copy_of=()
mkdir -p "$libs"
# (One that is not found is left for the check to report.)
for f in "${own[@]}"; do
  while read -r soname path; do
    [[ $soname =~ $glibc || $own_names == *" $soname "* || -n ${copy_of[$soname]:-} ]] && continue
    hash=$(sha256sum "$path" | cut -c1-8)
    new=${soname%%.so*}-$hash.so${soname#*.so}
    cp -L "$path" "$libs/$new"
    chmod 644 "$libs/$new"
    patchelf --set-soname "$new" --set-rpath '$ORIGIN' "$libs/$new"
    copy_of[$soname]=$new
  done < <(resolved "$f")
done

# Every DT_NEEDED that names a copied library names the copy.
for f in "${own[@]}" "$libs"/*; do
  [[ -f $f ]] || continue
  for needed in $(patchelf --print-needed "$f"); do
    [[ -n ${copy_of[$needed]:-} ]] && patchelf --replace-needed "$needed" "${copy_of[$needed]}" "$f"
  done
done

check
