#!/usr/bin/env python3
"""The shared library's ABI against the one recorded in api/libtickwheel.abi.

usage: check_abi.py ABIDW ABIDIFF RECORD HEADERS_DIR LIBTICKWHEEL.so

abidw (Debian's abigail-tools) describes the library just built as the record
was made (ABIDW_OPTIONS, the same as tools/run.sh abi-update), and abidiff
compares the two. Its exit status is a bit set: 4, the ABI changed; 8, a
function was removed or changed incompatibly. A struct that grew at its end
is a compatible change here (api/tickwheel.h, "Growing structs"); a field
moved, removed or retyped is not, though abidiff only says 4 for it. An
incompatible change that keeps the soname fails with that said: bump
TW_VERSION_MAJOR and meson.build's version. Any change fails until the record
is rewritten, so that the record always describes the library as released.
"""
import os
import re
import subprocess
import sys
import tempfile

ABIDIFF_ERROR, ABIDIFF_USAGE_ERROR, ABIDIFF_CHANGE, ABIDIFF_INCOMPATIBLE = 1, 2, 4, 8
ABIDW_OPTIONS = ['--drop-private-types', '--no-show-locs', '--no-corpus-path',
                 '--no-comp-dir-path']
# What abidiff reports of a change that breaks callers even at exit status 4.
BREAKING = re.compile(r"offset changed|data member deletion|type of '[^']*' changed|"
                      r"name of '[^']*' changed|[1-9][0-9]* Removed|enumerator deletion|"
                      r"enumerator '[^']*' value changed")


def soname_of_record(path):
    with open(path, encoding='utf-8') as f:
        m = re.search(r"<abi-corpus [^>]*soname='([^']*)'", f.read())
    return m.group(1) if m else None


def soname_of_library(path):
    out = subprocess.run(['readelf', '-d', path], check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r'\(SONAME\)\s+Library soname: \[([^\]]*)\]', out)
    return m.group(1) if m else None


def main():
    abidw, abidiff, record, headers, library = sys.argv[1:6]
    with tempfile.TemporaryDirectory() as tmp:
        built = os.path.join(tmp, 'built.abi')
        subprocess.run([abidw, '--headers-dir', headers] + ABIDW_OPTIONS +
                       ['--out-file', built, library], check=True)
        run = subprocess.run([abidiff, record, built], capture_output=True, text=True)
    rc = run.returncode
    if rc & ABIDIFF_CHANGE and BREAKING.search(run.stdout):
        rc |= ABIDIFF_INCOMPATIBLE
    old, new = soname_of_record(record), soname_of_library(library)
    if rc & (ABIDIFF_ERROR | ABIDIFF_USAGE_ERROR):
        print(run.stdout + run.stderr)
        print('FAIL: abidiff could not compare (exit status %d)' % rc)
        return 1
    if rc == 0:
        print('ABI of %s: as recorded in %s' % (new, record))
        return 0
    print(run.stdout)
    if rc & ABIDIFF_INCOMPATIBLE and old == new:
        print('FAIL: an incompatible ABI change keeps the soname %s: bump TW_VERSION_MAJOR in '
              'api/tickwheel.h and the version in meson.build, then tools/run.sh abi-update'
              % new)
    else:
        print('FAIL: the ABI changed (%s, soname %s -> %s): record it with tools/run.sh '
              'abi-update and say so in CHANGELOG.md'
              % ('incompatibly' if rc & ABIDIFF_INCOMPATIBLE else 'compatibly', old, new))
    return 1


if __name__ == '__main__':
    sys.exit(main())
