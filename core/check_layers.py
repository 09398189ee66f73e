#!/usr/bin/env python3
"""check_layers.py - core/'s modules use only those below them (base.h names the order).

Each file of core/ has a layer; a file may include only headers of its own layer or below,
and may call (or take the address of) only functions defined or declared inline in files of
its own layer or below. Reads the sources as text: a failure names the file, the line and
what it reaches up to. Usage: check_layers.py CORE_DIR
"""
import os
import re
import sys

LAYERS = [
    ('base', ['base.h', 'alloc.h', 'abi.c', 'alloc.c', 'futex.c', 'errors.c', 'rcu.c', 'snapshot.h',
              'snapshot_format.c']),
    ('task', ['task.h', 'task_delay.h', 'task_tally.h', 'task_table.h', 'task.c', 'task_table.c',
              'names.h', 'names.c']),
    ('engine', ['engine.h', 'engine_clock.c', 'log.c']),
    ('handover', ['handover.h', 'handover.c']),
    ('threads', ['threads.h', 'calendar_tasks.h', 'run.h', 'ends.c', 'executor.c', 'executor_pool.c', 'watch.c',
                 'wheel_round.h', 'wheel_mail.c', 'wheel_fire.c', 'wheel_sleep.c',
                 'wheel_thread.c', 'calendar_tasks.c']),
    ('lifecycle', ['lifecycle.h', 'engine.c', 'engine_stats.c', 'fork.c', 'stop.c', 'manual_clock.c']),
    ('api', ['query.h', 'query.c', 'list.c', 'metrics_sink.h', 'metrics_sink.c',
             'metrics.c', 'ops.h', 'ops_add.c', 'ops_due.c',
             'ops_state.c', 'snapshot_file.h', 'snapshot_file.c', 'snapshot_write.c',
             'snapshot_plan.h', 'snapshot_plan.c', 'snapshot_restore.c']),
]
LEVEL = {name: i for i, (_, names) in enumerate(LAYERS) for name in names}
FUNC_DEF = re.compile(r'^(?:static\s+)?(?:inline\s+)?(?:__attribute__\(\([^)]*\)\)\s+)*'
                      r'[A-Za-z_][\w\s\*]*?\b(\w+)\s*\([^;]*$', re.M)
DECL = re.compile(r'^[A-Za-z_][\w\s\*\(\)]*?\b(tw__\w+)\s*\(', re.M)


def strip_comments(source):
    """The source with every comment blanked, its lines kept (so line numbers hold)."""
    return re.sub(r'/\*.*?\*/|//[^\n]*',
                  lambda m: re.sub(r'[^\n]', ' ', m.group(0)), source, flags=re.S)


def main(core):
    files = sorted(f for f in os.listdir(core) if f.endswith(('.c', '.h')))
    unknown = [f for f in files if f not in LEVEL]
    if unknown:
        print('check_layers: no layer for %s: add it to LAYERS' % ', '.join(unknown))
        return 1
    text = {f: strip_comments(open(os.path.join(core, f)).read()) for f in files}
    owner = {}  # function name -> file that defines it (or declares it inline)
    for f in files:
        for m in FUNC_DEF.finditer(text[f]):
            name = m.group(1)
            line = text[f][m.start():text[f].index('\n', m.start())]
            if f.endswith('.c') and line.startswith('static'):
                continue  # a file's own helpers
            if f.endswith('.h') and not line.startswith('static'):
                continue  # a declaration: the definition says where it lives
            owner.setdefault(name, f)
    bad = 0
    for f in files:
        for n, line in enumerate(text[f].split('\n'), 1):
            inc = re.match(r'#include "([^"]+)"', line)
            if inc and inc.group(1) in LEVEL and LEVEL[inc.group(1)] > LEVEL[f]:
                print('%s:%d: includes %s, a layer above' % (f, n, inc.group(1)))
                bad += 1
            for name in re.findall(r'\b(\w+)\s*\(|\b(tw__\w+)\b', line):
                name = name[0] or name[1]
                where = owner.get(name)
                if where and LEVEL[where] > LEVEL[f]:
                    print('%s:%d: uses %s (%s), a layer above' % (f, n, name, where))
                    bad += 1
    if bad:
        print('check_layers: %d uses of a layer above (the order: %s)'
              % (bad, ' < '.join(name for name, _ in LAYERS)))
        return 1
    print('check_layers: %d files in %d layers, none reaches above its own'
          % (len(files), len(LAYERS)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)))
