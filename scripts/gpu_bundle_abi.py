#!/usr/bin/env python3
"""The oldest glibc / libstdc++ a GPU machine needs to link the bundle's static libraries.

The static .a files of the bundle reference C library and C++ runtime symbols by name (no
version: the version is bound when the GPU machine links). A symbol can be bound only if that
machine's library has it, i.e. is at least as new as the version that introduced the symbol:
the oldest version tag the symbol has in this machine's library. The floor is the newest of
those over all referenced symbols. Symbols found nowhere are listed (they must not be pulled in
by what nanovllm calls, or the link fails: e.g. OpenBLAS's LAPACK parts need libgfortran).

    gpu_bundle_abi.py PREFIX      (PREFIX: the unpacked bundle, with usr/lib/...)
"""
import glob
import os
import re
import subprocess
import sys

SYSTEM_LIBS = ["libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1"]
# Only what nanovllm links: the 16/32-bit PCRE2 and POSIX wrappers and the *_main objects of
# GoogleTest are unused.
SKIP = re.compile(r"pcre2-(16|32)|pcre2-posix|_main\.a$")
VERSION = re.compile(r"\(?((?:GLIBC|GLIBCXX|CXXABI|GCC)_[0-9.]+)\)?\s+(\S+)$")


def version_key(tag):
    family, num = tag.rsplit("_", 1)
    return family, tuple(int(x) for x in num.split(".") if x)


def archive_symbols(paths):
    """(undefined, defined) symbol names over the archives, via `nm -P`."""
    undefined, defined = set(), set()
    for a in paths:
        out = subprocess.run(["nm", "-P", a], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) < 2 or f[0].endswith(":"):  # member headers "lib.a[obj.o]:"
                continue
            (undefined if f[1] == "U" else defined).add(f[0])
    return undefined, defined


def library_versions(lib_dirs):
    """symbol -> every version tag it has in the system libraries (objdump -T)."""
    tags = {}
    for name in SYSTEM_LIBS:
        path = next((os.path.join(d, name) for d in lib_dirs
                     if os.path.exists(os.path.join(d, name))), None)
        if not path:
            continue
        out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if "*UND*" in line:
                continue
            m = VERSION.search(line)
            if m:
                tags.setdefault(m.group(2), set()).add(m.group(1))
    return tags


def floor(undefined, tags):
    """(family -> newest of the per-symbol oldest tags, unresolved symbols)."""
    best, unresolved = {}, []
    for sym in sorted(undefined):
        if sym not in tags:
            unresolved.append(sym)
            continue
        oldest = {}
        for t in tags[sym]:
            fam = version_key(t)[0]
            if fam not in oldest or version_key(t) < version_key(oldest[fam]):
                oldest[fam] = t
        for fam, t in oldest.items():
            if fam not in best or version_key(t) > version_key(best[fam]):
                best[fam] = t
    return best, unresolved


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    archives = [a for a in glob.glob(os.path.join(argv[1], "usr/lib/**/*.a"), recursive=True)
                if not SKIP.search(a) and not os.path.islink(a)]
    undefined, defined = archive_symbols(archives)
    external = undefined - defined
    tags = library_versions(["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64"])
    best, unresolved = floor(external, tags)
    for fam in sorted(best):
        print(f"needs {fam} >= {best[fam]}")
    # Linker-provided names are not library symbols.
    linker = {"_GLOBAL_OFFSET_TABLE_", "__dso_handle", "__tls_get_addr"}
    rest = [s for s in unresolved if s not in linker]
    print(f"{len(external)} external symbols; not in libc/libm/libstdc++/libgcc_s: "
          f"{', '.join(rest) if rest else 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
