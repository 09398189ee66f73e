#!/usr/bin/env python3
"""perf/test_gate.py - the regression gate's logic on small fixtures, run by
meson (suite 'perf'). gate.py runs as a program, as CI runs it, so that its
exit status and the names it prints are what is checked; measuring itself
needs valgrind and a release build and is left to tools/run.sh perf-gate."""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GATE = os.path.join(HERE, 'gate.py')
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
import gate  # noqa: E402  (parse_dump and dumps_report, used directly below)

failures = []


def check(what, condition, detail=''):
    print('%s: %s' % ('ok  ' if condition else 'FAIL', what))
    if not condition:
        failures.append(what)
        if detail:
            print('      ' + detail.replace('\n', '\n      '))


def fig(name, value, unit='instr', better='lower', impl='tickwheel'):
    return {'impl': impl, 'name': name, 'value': value, 'unit': unit, 'better': better}


def report(figures, build='buildtype=release b_sanitize=none allocator=jemalloc',
           tolerances=None, scenario='icount'):
    r = {'tool': 'gate', 'scenario': scenario, 'command': 'test',
         'machine': {'compiler': 'gcc 12.2.0', 'build': build},
         'params': {'tasks': 1000}, 'figures': figures, 'targets': [], 'series': [],
         'notes': []}
    if tolerances is not None:
        r['tolerances'] = tolerances
    return r


def gate_run(tmp, args, run=None, base=None):
    paths = []
    for i, doc in enumerate((run, base)):
        if doc is not None:
            path = os.path.join(tmp, 'doc%d.json' % i)
            with open(path, 'w') as f:
                json.dump(doc, f)
            paths.append(path)
    proc = subprocess.run([sys.executable, GATE] + args[:1] + paths + args[1:],
                          capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def main():
    base_figs = [fig('wheel_add', 60.0), fig('wheel_cancel', 18.0),
                 fig('lateness_p99', 300.0, 'us'), fig('runs_per_s', 1000.0, '/s', 'higher')]
    base = report(base_figs)

    with tempfile.TemporaryDirectory() as tmp:
        def compare(run, baseline=base, extra=()):
            return gate_run(tmp, ['compare'] + list(extra), run, baseline)

        rc, out = compare(report(base_figs))
        check('identical figures pass', rc == 0, out)

        rc, out = compare(report([fig('wheel_add', 66.0)] + base_figs[1:]))
        check('a 10 % instruction regression fails', rc == 1, out)
        failed = out.split('FAILED', 1)[-1]
        check('  and names the figure', 'wheel_add' in failed and 'wheel_cancel' not in failed,
              out)

        rc, out = compare(report([fig('wheel_add', 61.2)] + base_figs[1:]))
        check('a 2 % instruction rise is within the built-in 3 %', rc == 0, out)

        rc, out = compare(report([fig('wheel_add', 48.0)] + base_figs[1:]))
        check('an improvement passes', rc == 0, out)
        check('  and is reported as one, with a hint to update the baseline',
              'better' in out and 'update' in out, out)

        rc, out = compare(report([f for f in base_figs if f['name'] != 'wheel_cancel']))
        check('a figure missing from the run fails', rc == 1, out)
        check('  and is named', 'wheel_cancel' in out.split('FAILED', 1)[-1], out)

        rc, out = compare(report(base_figs + [fig('engine_add', 600.0)]))
        check('a figure new in the run passes, reported as new', rc == 0 and 'new' in out, out)

        slow = [f if f['name'] != 'lateness_p99' else fig('lateness_p99', 500.0, 'us')
                for f in base_figs]
        rc, out = compare(report(slow))
        check('a timing 67 % worse (over the 50 % tolerance) is only reported', rc == 0, out)
        check('  as worse, not gated', 'worse (not gated)' in out, out)
        rc, out = compare(report(slow), extra=['--gate-timings'])
        check('  but fails with --gate-timings', rc == 1, out)
        check('  naming it', 'lateness_p99' in out.split('FAILED', 1)[-1], out)
        rc, out = compare(report(slow), extra=['--gate-timings', '--tolerance', 'us=0.8'])
        check('  unless --tolerance us=0.8 allows it', rc == 0, out)

        fewer = [f if f['name'] != 'runs_per_s' else fig('runs_per_s', 500.0, '/s', 'higher')
                 for f in base_figs]
        rc, out = compare(report(fewer), extra=['--gate-timings'])
        check('"better": "higher" falling by half fails with --gate-timings',
              rc == 1 and 'runs_per_s' in out.split('FAILED', 1)[-1], out)

        loose = report(base_figs, tolerances={'wheel_add': 0.20, 'instr': 0.01})
        rc, out = compare(report([fig('wheel_add', 66.0)] + base_figs[1:]), loose)
        check('the baseline\'s tolerance by name comes before its tolerance by unit', rc == 0,
              out)
        rc, out = compare(report([base_figs[0], fig('wheel_cancel', 18.5)] + base_figs[2:]),
                          loose)
        check('the baseline\'s tolerance by unit comes before the built-in one', rc == 1, out)
        rc, out = compare(report([fig('wheel_add', 66.0)] + base_figs[1:]), loose,
                          ['--tolerance', 'wheel_add=5%'])
        check('--tolerance comes before the baseline\'s', rc == 1, out)

        rc, out = compare(report(base_figs, build='buildtype=debug b_sanitize=none '
                                 'allocator=jemalloc'))
        check('different build options are warned about', rc == 0 and 'warning' in out
              and 'build' in out, out)

        # update: a baseline with one figure per line, its tolerances kept
        base_path = os.path.join(tmp, 'baseline.json')
        with open(base_path, 'w') as f:
            f.write(gate.dumps_report(report(base_figs, tolerances={'instr': 0.02})))
        run_path = os.path.join(tmp, 'run.json')
        with open(run_path, 'w') as f:
            json.dump(report([fig('wheel_add', 50.0)] + base_figs[1:]), f)
        before = open(base_path).read().splitlines()
        rc, out = gate_run(tmp, ['update', '--json', run_path, '--baseline', base_path])
        after = open(base_path).read().splitlines()
        changed = [line for line in after if line not in before]
        check('update rewrites the baseline', rc == 0, out)
        check('  keeping its tolerances', json.loads('\n'.join(after)).get('tolerances')
              == {'instr': 0.02}, '\n'.join(after))
        check('  and its diff is the one figure that moved',
              len(changed) == 1 and 'wheel_add' in changed[0], '\n'.join(changed))
        rc, out = gate_run(tmp, ['compare', run_path, base_path])
        check('  against which the run passes', rc == 0, out)

        # callgrind dumps: "totals:" is read, "summary:" (stale after a zero) is not
        dump = os.path.join(tmp, 'callgrind.out.1.1')
        with open(dump, 'w') as f:
            f.write('version: 1\ncreator: callgrind-3.19.0\npid: 1\ncmd: tw-perf icount\n'
                    'part: 1\n\ndesc: I1 cache: \ndesc: Timerange: Basic block 0 - 9\n'
                    'desc: Trigger: Client Request: wheel_add 1000\n\npositions: line\n'
                    'events: Ir\nsummary: 999999\n\n\ntotals: 65800\n')
        check('a dump gives its phase and its totals',
              gate.parse_dump(dump) == ('Client Request: wheel_add 1000', 65800),
              repr(gate.parse_dump(dump)))

    # several runs under callgrind: per phase the median of instructions per operation
    runs = [{'engine_dispatch': (663000, 1000), 'wheel_add': (33000, 1000)},
            {'engine_dispatch': (686000, 1000), 'wheel_add': (66200, 2000)},
            {'engine_dispatch': (664000, 1000), 'wheel_add': (33200, 1000)}]
    median = gate.median_counts(runs)
    check('one run far off does not move the median of three',
          median == {'engine_dispatch': 664.0, 'wheel_add': 33.1}, repr(median))
    median = gate.median_counts(runs[:2])
    check('of two runs, the mean', median['engine_dispatch'] == 674.5, repr(median))

    print('test_gate: %d failed' % len(failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
