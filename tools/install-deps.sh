#!/usr/bin/env bash
# Makes sure the Debian packages that packedfunc builds and tests with are
# installed. As root it installs what is missing; otherwise it prints the
# exact apt-get line and fails. With --check it only reports.
set -euo pipefail

PACKAGES=(
  gcc g++ make binutils pkg-config
  libffi-dev uthash-dev libdlpack-dev libcmocka-dev
  clang libclang-rt-14-dev valgrind
  python3 python3-pytest python3-numpy python3-hypothesis
  python3-venv python3-setuptools python3-pip
  python3-matplotlib
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == *"install ok installed"* ]] || missing+=("$p")
done

[[ ${#missing[@]} -eq 0 ]] && exit 0

line="apt-get install -y ${missing[*]}"
if [[ "${1:-}" == "--check" ]]; then
  echo "packedfunc: missing Debian packages: ${missing[*]}" >&2
  echo "packedfunc: install them with: $line" >&2
  exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "packedfunc: missing Debian packages: ${missing[*]}" >&2
  echo "packedfunc: run as root: apt-get update && $line" >&2
  exit 1
fi
echo "packedfunc: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
