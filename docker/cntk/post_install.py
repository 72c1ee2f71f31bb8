"""Run by the CNTK environment's own python after pip (scripts/launch/venvs.py, docker/cntk/Dockerfile).

CNTK 2.7's native libraries were linked against OpenMPI 1.10 (libmpi.so.12, libmpi_cxx.so.1), which no current
distribution ships. Debian's libopenmpi3 (OpenMPI 4) keeps the same C ABI for what CNTK calls, so the old sonames are
links to it, placed in cntk/libs (already on the libraries' RUNPATH) rather than in a system directory.
"""

import os
import sys
import sysconfig

LINKS = {"libmpi.so.12": "libmpi.so.40", "libmpi_cxx.so.1": "libmpi_cxx.so.40"}
SEARCH = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")


def main():
    libs = os.path.join(sysconfig.get_paths()["purelib"], "cntk", "libs")
    for old, new in LINKS.items():
        target = next((os.path.join(d, new) for d in SEARCH if os.path.exists(os.path.join(d, new))), None)
        if target is None:
            sys.exit(
                f"{new} not found in {', '.join(SEARCH)}: CNTK needs OpenMPI's libraries "
                f"(Debian/Ubuntu: apt-get install libopenmpi3)"
            )
        link = os.path.join(libs, old)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(target, link)
        print(f"cntk: {link} -> {target}")


if __name__ == "__main__":
    main()
