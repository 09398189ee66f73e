#!/usr/bin/env python3
"""The library exports exactly the functions that api/tickwheel.h declares.

usage: check_exports.py CLANG HEADER LIBTICKWHEEL.so LIBTICKWHEEL.a

The list of functions comes from the header itself, through clang's AST (so a
declaration that is not marked TW_API still counts, and a static inline
function does not). The shared library must export exactly those; every other
global symbol of the static library must carry the reserved prefix tw__, so
that a program's own names cannot clash with the library's internals.
"""
import json
import os
import subprocess
import sys


def header_functions(clang, header):
    out = subprocess.run([clang, '-Xclang', '-ast-dump=json', '-fsyntax-only', '-x', 'c',
                          header], check=True, capture_output=True, text=True).stdout
    ast = json.loads(out)
    name = os.path.basename(header)
    current, found = None, set()
    # clang names a node's file only where it differs from the node before.
    for node in ast.get('inner', []):
        for where in (node.get('loc', {}), node.get('range', {}).get('begin', {})):
            for loc in (where, where.get('expansionLoc', {})):
                if 'file' in loc:
                    current = loc['file']
        if node.get('kind') != 'FunctionDecl' or not current:
            continue
        if os.path.basename(current) == name and node.get('storageClass') != 'static':
            found.add(node['name'])
    return found


# What a sanitizer build adds of its own: ASan's ODR indicators of globals, and the like.
SANITIZER_PREFIXES = ('__odr_asan', '__asan', '__ubsan', '__tsan', '__sanitizer')


def symbols(args):
    out = subprocess.run(['nm', '--defined-only'] + args, check=True, capture_output=True,
                         text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and not parts[2].startswith(SANITIZER_PREFIXES):
            syms[parts[2]] = parts[1]
    return syms


def main():
    clang, header, shared, static = sys.argv[1:5]
    problems = []
    declared = header_functions(clang, header)
    if len(declared) < 10:
        problems.append('only %d functions found in %s: is the parse broken?'
                        % (len(declared), header))
    exported = {s for s, t in symbols(['-D', shared]).items() if t in 'TtWiu'}
    for s in sorted(exported - declared):
        problems.append('%s exports %s, which the header does not declare' % (shared, s))
    for s in sorted(declared - exported):
        problems.append('%s does not export %s, which the header declares' % (shared, s))
    globals_ = {s for s, t in symbols(['-g', static]).items() if t.isupper()}
    for s in sorted(globals_ - declared):
        if not s.startswith('tw__'):
            problems.append('%s has the global symbol %s without the tw__ prefix' % (static, s))
    for p in problems:
        print('FAIL: ' + p)
    print('%d functions declared, %d exported, %d global symbols in the static library'
          % (len(declared), len(exported), len(globals_)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
