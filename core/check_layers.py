#!/usr/bin/env python3
"""check_layers.py - the one map of core/: its modules in order, and the check that calls run
down it.

A module is a header and the file that implements it (task.h, task.c), or a lone file
(run_firing.h, ops.h); a few files implement one header together (see MODULES). The modules are
ordered in MODULES, grouped in layers for the reader. A file may include only headers of its
own module or of one before it, and may call (or take the address of) only functions defined,
or defined inline, in its own module or in one before it: within a layer too, so no module
calls one after it and no sibling calls back. A declaration is not a use: a header may declare
what later modules define (threads.h does), but calling it is checked against the definition.

core/README.md's table lists the modules in this order, and core/meson.build's core_sources
lists the .c files in it: both are checked, so that neither can disagree with this map.
Reads the sources as text: a failure names the file, the line and what it reaches up to.
Usage: check_layers.py CORE_DIR
"""
import os
import re
import sys

# (layer, modules in order). A module is named by its files' stem; 'base.h rcu.c' lists the
# files of a module whose files do not share one stem: the header calls them inline and they
# include it (rcu.c registers the threads that base.h's read-side sections use; engine_clock.c
# is engine.h's coarse clock).
MODULES = [
    ('base', ['base.h rcu.c', 'futex', 'errors', 'abi', 'alloc', 'snapshot', 'snapshot_format']),
    ('record', ['record.h record_ring.h record.c record_hooks.c']),
    ('task', ['task.h task_delay.h task_tally.h task_table.h task.c task_table.c', 'names']),
    ('engine', ['engine.h engine_clock.c', 'log']),
    ('handover', ['handover']),
    ('threads', ['threads', 'ends', 'calendar_tasks', 'run_firing', 'executor', 'executor_pool', 'watch',
                 'wheel_round', 'wheel_mail', 'wheel_fire', 'wheel_sleep', 'wheel_thread']),
    ('lifecycle', ['lifecycle', 'fork', 'stop', 'engine_create', 'engine_stats', 'manual_clock']),
    ('api', ['query', 'list', 'metrics_sink', 'metrics', 'ops', 'ops_due', 'ops_state', 'ops_add',
             'snapshot_file', 'snapshot_plan', 'snapshot_write', 'snapshot_restore']),
]
CALL = re.compile(r'\b(\w+)\s*\(|\b(tw__\w+)\b')
FUNC_DEF = re.compile(r'^(?:static\s+)?(?:inline\s+)?(?:__attribute__\(\([^)]*\)\)\s+)*'
                      r'[A-Za-z_][\w\s\*]*?\b(\w+)\s*\([^;]*$', re.M)


def module_files(core):
    """{module: [its files]} in order, and {file: module}; unknown names the files left out."""
    files = sorted(f for f in os.listdir(core) if f.endswith(('.c', '.h')))
    order, of_file, missing = [], {}, []
    for _, modules in MODULES:
        for entry in modules:
            names = entry.split()
            name = os.path.splitext(names[0])[0]
            if len(names) == 1 and '.' not in names[0]:
                names = [f for f in (name + '.h', name + '.c') if f in files]
            found = [f for f in names if f in files]
            if not found or len(found) < len(names) and len(entry.split()) > 1:
                missing.append(entry)
            order.append((name, found))
            for f in found:
                of_file[f] = len(order) - 1
    unknown = [f for f in files if f not in of_file]
    return order, of_file, unknown, missing


def strip_comments(source):
    """The source with every comment blanked, its lines kept (so line numbers hold)."""
    return re.sub(r'/\*.*?\*/|//[^\n]*',
                  lambda m: re.sub(r'[^\n]', ' ', m.group(0)), source, flags=re.S)


def strip_strings(source):
    """The source with every string literal emptied (a brace or a call in a message is text)."""
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', source)


def owners(text):
    """function name -> file that defines it (or defines it inline)."""
    owner = {}
    for f, source in text.items():
        for m in FUNC_DEF.finditer(source):
            line = source[m.start():source.index('\n', m.start())]
            if f.endswith('.c') and line.startswith('static'):
                continue  # a file's own helpers
            if f.endswith('.h') and not line.startswith('static'):
                continue  # a declaration: the definition says where it lives
            owner.setdefault(m.group(1), f)
    return owner


def uses(source):
    """(line number, line, names it uses): inside a function body or a macro, where a name
    followed by ( or any tw__ name is a call or an address taken; at file scope a name
    followed by ( is declared, not used."""
    depth, in_macro = 0, False
    for n, line in enumerate(source.split('\n'), 1):
        macro = in_macro or line.lstrip().startswith('#define')
        in_macro = macro and line.rstrip().endswith('\\')
        names = []
        if depth > 0 or macro:
            names = [a or b for a, b in CALL.findall(line)]
        elif '=' in line:  # a file-scope initializer may take an address
            names = re.findall(r'\b(tw__\w+)\b', line.split('=', 1)[1])
        if not line.lstrip().startswith('#'):
            depth += line.count('{') - line.count('}')
        yield n, line, names


def check_readme(core, order):
    """core/README.md's table names the modules' files in MODULES' order."""
    path = os.path.join(core, 'README.md')
    if not os.path.exists(path):
        return ['README.md: missing']
    listed = []
    for line in open(path):
        if line.startswith('|') and '`' in line:
            cell = line.split('|')[2]
            listed += re.findall(r'`([\w.]+\.[ch])`', cell)
    want = [f for _, files in order for f in sorted(files, key=lambda f: not f.endswith('.h'))]
    if listed != want:
        for i, (a, b) in enumerate(zip(listed + [None] * len(want), want + [None] * len(listed))):
            if a != b:
                return ['README.md: its table lists %s where check_layers.py has %s (entry %d)'
                        % (a, b, i + 1)]
    return []


def check_meson(core, order):
    """core/meson.build's core_sources lists the .c files in MODULES' order."""
    path = os.path.join(core, 'meson.build')
    if not os.path.exists(path):
        return []
    m = re.search(r'core_sources = files\(([^)]*)\)', open(path).read())
    listed = re.findall(r"'([\w.]+\.c)'", m.group(1)) if m else []
    want = [f for _, files in order for f in files if f.endswith('.c')]
    if listed != want:
        return ['meson.build: core_sources is not in check_layers.py\'s order: %s'
                % ', '.join(want)]
    return []


def main(core):
    order, of_file, unknown, missing = module_files(core)
    if unknown or missing:
        if unknown:
            print('check_layers: no module for %s: add it to MODULES' % ', '.join(unknown))
        if missing:
            print('check_layers: no files for %s: remove it from MODULES' % ', '.join(missing))
        return 1
    text = {f: strip_comments(open(os.path.join(core, f)).read()) for f in of_file}
    owner = owners(text)
    bad = []
    for f in sorted(text):
        lines = text[f].split('\n')
        for n, line, names in uses(strip_strings(text[f])):
            inc = re.match(r'\s*#include "([^"]+)"', lines[n - 1])
            if inc and inc.group(1) in of_file and of_file[inc.group(1)] > of_file[f]:
                bad.append('%s:%d: includes %s, of a module after its own' % (f, n, inc.group(1)))
            for name in names:
                where = owner.get(name)
                if where and of_file[where] > of_file[f]:
                    bad.append('%s:%d: uses %s (%s), a module after its own' % (f, n, name, where))
    bad += check_readme(core, order) + check_meson(core, order)
    for b in bad:
        print(b)
    if bad:
        print('check_layers: %d uses of a later module or disagreements (the order: %s)'
              % (len(bad), ' < '.join(name for name, _ in order)))
        return 1
    print('check_layers: %d files in %d modules and %d layers; every call runs down the order'
          % (len(of_file), len(order), len(MODULES)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)))
