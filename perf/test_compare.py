#!/usr/bin/env python3
"""perf/test_compare.py - compare.py's verdicts on synthetic runs, run by meson (suite
'perf'). compare.py runs as a program, as a CI job runs it, so that its exit status and its
--json rows are what is checked; the samples are drawn from seeded generators, so every
outcome here repeats."""

import json
import math
import os
import random
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, 'compare.py')
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
import compare  # noqa: E402  (the rank statistics, checked directly below)

# A heartbeats run as tw-perf writes it: tickwheel's figures and the floor's beside them.
TICKWHEEL = {'lateness_p50': 120.0, 'lateness_p99': 1400.0, 'lateness_max': 7000.0,
             'interval_sd': 360.0, 'cpu_per_run': 1.0}
FLOOR = {'lateness_p50': 70.0, 'lateness_p99': 180.0, 'lateness_max': 4000.0,
         'interval_sd': 200.0}
# One run's figures move by a factor of the machine's, shared by the floor and the
# engine's lateness (a neighbour's load slows both), and by their own spread.
MACHINE_SIGMA = 0.30  # log-normal: a run 1.8x slower than another is common
OWN_SIGMA = 0.06


def heartbeats_run(rng, scale=1.0, floor_scale=1.0, cpu_scale=1.0, skipped=0, path='x.json',
                   scenario='heartbeats', options=''):
    machine = math.exp(rng.gauss(0, MACHINE_SIGMA))

    def noisy(v, shared=True):
        return v * (machine if shared else 1) * math.exp(rng.gauss(0, OWN_SIGMA))
    figs = []
    for name, v in TICKWHEEL.items():
        cpu = name == 'cpu_per_run'
        figs.append({'impl': 'tickwheel', 'name': name,
                     'value': noisy(v * (cpu_scale if cpu else scale), not cpu),
                     'unit': 'us', 'better': 'lower'})
    figs.append({'impl': 'tickwheel', 'name': 'skipped', 'value': skipped, 'unit': 'firings',
                 'better': 'lower'})
    figs.append({'impl': 'tickwheel', 'name': 'runs_per_second',
                 'value': noisy(8e4 / cpu_scale, False), 'unit': '1/s', 'better': 'higher'})
    figs.append({'impl': 'tickwheel', 'name': 'runs', 'value': 804559, 'unit': 'runs',
                 'better': 'neither'})
    for name, v in FLOOR.items():
        figs.append({'impl': 'wake-up floor', 'name': name, 'value': noisy(v * floor_scale),
                     'unit': 'us', 'better': 'lower'})
    command = '/tmp/wt/build/perf/suite/tw-perf %s %s--json %s' % (scenario, options, path)
    return {'tool': 'tw-perf', 'scenario': scenario, 'command': command,
            'machine': {}, 'params': {}, 'figures': figs, 'targets': [], 'series': [],
            'notes': []}


class CompareProgram(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write_set(self, side, seed, n=6, **kw):
        """n runs of one side into their own directory, as ab.sh leaves them."""
        rng = random.Random(seed)
        d = os.path.join(self.tmp.name, '%s-%d' % (side, seed))
        os.makedirs(d, exist_ok=True)
        for i in range(n):
            path = os.path.join(d, 'heartbeats-%d.json' % i)
            with open(path, 'w') as f:
                json.dump(heartbeats_run(rng, path=path, **kw), f)
        return d

    def run_compare(self, a, b, *extra):
        out = os.path.join(self.tmp.name, 'verdict.json')
        if os.path.exists(out):
            os.remove(out)
        proc = subprocess.run([sys.executable, COMPARE, a, b, '--json', out] + list(extra),
                              capture_output=True, text=True)
        rows = {}
        if os.path.exists(out):
            with open(out) as f:
                rows = {r['label']: r for r in json.load(f)['rows']}
        return proc.returncode, rows, proc.stdout + proc.stderr

    def test_30_percent_slower_regressed(self):
        a = self.write_set('a', 1)
        b = self.write_set('b', 2, scale=1.3, cpu_scale=1.3)
        rc, rows, out = self.run_compare(a, b)
        self.assertEqual(rc, 1, out)
        for fig in ('cpu_per_run', 'lateness_p50/floor', 'lateness_p99/floor'):
            self.assertEqual(rows[fig]['verdict'], 'regressed', out)
            self.assertTrue(rows[fig]['gated'])
            self.assertGreater(rows[fig]['ci_low'], 1.05, out)
        self.assertAlmostEqual(rows['cpu_per_run']['estimate'], 1.3, delta=0.1)
        # the machine's swings, shared with the floor, cancel: the interval narrows
        raw, norm = rows['lateness_p99'], rows['lateness_p99/floor']
        self.assertLess(norm['ci_high'] / norm['ci_low'], raw['ci_high'] / raw['ci_low'], out)
        self.assertIn('REGRESSED', out)
        self.assertIn('heartbeats: cpu_per_run', out.split('REGRESSED', 1)[1])
        # a rate that is better higher, falling by as much
        self.assertEqual(rows['runs_per_second']['verdict'], 'regressed', out)

    def test_same_distribution_no_difference_9_of_10(self):
        calm = {fig: 0 for fig in compare.DEFAULT_GATE}
        passed = 0
        for draw in range(10):
            a = self.write_set('a', 100 + draw)
            b = self.write_set('b', 200 + draw)
            rc, rows, out = self.run_compare(a, b)
            self.assertIn(rc, (0, 1), out)
            passed += rc == 0
            for fig in calm:
                calm[fig] += rows[fig]['verdict'].startswith('no difference')
        self.assertGreaterEqual(passed, 9)
        for fig, count in calm.items():
            self.assertGreaterEqual(count, 9, fig)

    def test_improvement(self):
        a = self.write_set('a', 3)
        b = self.write_set('b', 4, scale=0.7, cpu_scale=0.7)
        rc, rows, out = self.run_compare(a, b)
        self.assertEqual(rc, 0, out)
        for fig in ('cpu_per_run', 'lateness_p99/floor', 'lateness_max'):
            self.assertEqual(rows[fig]['verdict'], 'improved', out)
        self.assertLess(rows['cpu_per_run']['ci_high'], 1 / 1.05)

    def test_floor_cancels_a_slower_machine(self):
        a = self.write_set('a', 5)
        b = self.write_set('b', 6, scale=2.0, floor_scale=2.0)
        rc, rows, out = self.run_compare(a, b)
        self.assertEqual(rc, 0, out)
        self.assertEqual(rows['lateness_p99']['verdict'], 'regressed', out)
        self.assertFalse(rows['lateness_p99']['gated'])
        self.assertEqual(rows['wake-up floor:lateness_p99']['verdict'], 'regressed', out)
        for fig in ('lateness_p50/floor', 'lateness_p99/floor', 'lateness_max/floor'):
            self.assertTrue(rows[fig]['verdict'].startswith('no difference'), fig + out)
        # the floor has no p90 or p99.9: nothing to divide by, no /floor row
        self.assertNotIn('lateness_p99_9/floor', rows)
        # gating raw lateness instead fails the same runs
        rc, rows, out = self.run_compare(a, b, '--gate', 'lateness_p99')
        self.assertEqual(rc, 1, out)

    def test_threshold(self):
        a = self.write_set('a', 7, n=8)
        b = self.write_set('b', 8, n=8, cpu_scale=1.25)
        rc, rows, out = self.run_compare(a, b, '--threshold', '40%')
        self.assertEqual(rc, 0, out)
        self.assertEqual(rows['cpu_per_run']['verdict'],
                         'no difference (B higher, within threshold)', out)
        rc, rows, out = self.run_compare(a, b, '--threshold', '0.05')
        self.assertEqual(rc, 1, out)

    def test_counts_from_zero_compared_as_differences(self):
        a = self.write_set('a', 9)
        b = self.write_set('b', 10, skipped=12)
        rc, rows, out = self.run_compare(a, b, '--gate', 'skipped')
        self.assertEqual(rc, 1, out)
        self.assertEqual(rows['skipped']['mode'], 'difference')
        self.assertEqual(rows['skipped']['estimate'], 12)
        self.assertEqual(rows['runs']['verdict'], 'no difference', out)

    def test_groups_by_scenario_and_options(self):
        rng = random.Random(11)
        paths = {'a': [], 'b': []}
        for side in paths:
            for i in range(4):
                for opts in ('', '--quick '):
                    p = os.path.join(self.tmp.name, '%s%d%s.json' % (side, i, opts.strip()))
                    with open(p, 'w') as f:
                        json.dump(heartbeats_run(rng, path=p, options=opts), f)
                    paths[side].append(p)
        rc, _, out = self.run_compare(','.join(paths['a']), ','.join(paths['b']))
        self.assertIn(rc, (0, 1), out)
        self.assertIn('heartbeats: 4 runs of A, 4 of B, intervals cover 97.1 %', out)
        self.assertIn('heartbeats --quick: 4 runs of A, 4 of B', out)
        # a group on one side only is said, not compared
        rc, _, out = self.run_compare(','.join(paths['a']), ','.join(paths['b'][::2]))
        self.assertIn('heartbeats --quick: only in A, not compared', out)

    def test_bad_input_exits_2(self):
        good = self.write_set('a', 12)
        empty = os.path.join(self.tmp.name, 'empty')
        os.makedirs(empty)
        junk = os.path.join(self.tmp.name, 'junk.json')
        with open(junk, 'w') as f:
            f.write('{"figures": [')
        nofigs = os.path.join(self.tmp.name, 'nofigs.json')
        with open(nofigs, 'w') as f:
            json.dump({'scenario': 'heartbeats'}, f)
        cases = {
            'missing path': (good, os.path.join(self.tmp.name, 'nothere'), []),
            'empty directory': (good, empty, []),
            'not JSON': (good, junk, []),
            'no figures': (good, nofigs, []),
            'no scenario in common': (good, self.write_set('b', 13, scenario='blocker'), []),
            'too few runs': (good, self.write_set('b', 14, n=2), []),
            'gated figure absent': (good, self.write_set('b', 15), ['--gate', 'nonesuch']),
            'bad threshold': (good, good, ['--threshold', 'five']),
            'bad confidence': (good, good, ['--confidence', '1.5']),
        }
        for what, (a, b, extra) in cases.items():
            rc, _, out = self.run_compare(a, b, *extra)
            self.assertEqual(rc, 2, what + ': ' + out)
            self.assertIn('compare: ', out, what)
            self.assertNotIn('Traceback', out, what)


@unittest.skipUnless(subprocess.run(['git', '-C', HERE, 'rev-parse'], capture_output=True)
                     .returncode == 0, 'not a git checkout')
class AbScript(unittest.TestCase):
    """ab.sh's refusals, which cost no build: a bad revision or count exits 2, saying so,
    and leaves no worktree behind."""

    def ab(self, *args):
        return subprocess.run(['bash', os.path.join(HERE, 'ab.sh')] + list(args),
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)

    def worktrees(self):
        return subprocess.run(['git', '-C', HERE, 'worktree', 'list'], capture_output=True,
                              text=True).stdout

    def test_refusals(self):
        before = self.worktrees()
        for args, said in ((['no-such-revision', 'HEAD'], 'not a revision'),
                           (['HEAD', 'HEAD', '-n', 'x'], '-n x'),
                           (['HEAD', 'HEAD', '--bogus'], 'unknown option'),
                           (['HEAD'], 'REV_A REV_B'),
                           (['--tw-perf-a', sys.executable], 'go together'),
                           (['--tw-perf-b', sys.executable], 'go together'),
                           (['--tw-perf-a', '/no/such/tw-perf', '--tw-perf-b', sys.executable],
                            '/no/such/tw-perf: not an executable'),
                           (['--tw-perf-a', sys.executable, '--tw-perf-b', COMPARE + '.json'],
                            'not an executable'),
                           (['--tw-perf-a', sys.executable, '--tw-perf-b', sys.executable,
                             '-n', '0'], '-n 0')):
            proc = self.ab(*args)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn(said, proc.stderr)
        self.assertEqual(self.worktrees(), before)

    def fake_tw_perf(self, directory, seed, cpu_scale):
        """A stand-in for a built tw-perf: writes a synthetic heartbeats run where --json
        says, seeded by the side and the number of files already there (the order is ab.sh's,
        so every outcome repeats)."""
        path = os.path.join(directory, 'tw-perf-%d' % seed)
        with open(path, 'w') as f:
            f.write('#!%s\n' % sys.executable + '\n'.join((
                'import json, os, random, sys',
                'sys.dont_write_bytecode = True',
                'sys.path.insert(0, %r)' % HERE,
                'import test_compare',
                'out = sys.argv[sys.argv.index("--json") + 1]',
                'rng = random.Random(%d * 1000 + len(os.listdir(os.path.dirname(out))))' % seed,
                'run = test_compare.heartbeats_run(rng, cpu_scale=%r, path=out,' % cpu_scale,
                '                                  scenario=sys.argv[1])',
                'with open(out, "w") as f:',
                '    json.dump(run, f)', '')))
        os.chmod(path, 0o755)
        return path

    def test_prebuilt_programs(self):
        """--tw-perf-a/-b: no build, no worktree; B's CPU per run doubled is a regression,
        and DIR/session.txt names both programs."""
        before = self.worktrees()
        with tempfile.TemporaryDirectory() as tmp:
            a = self.fake_tw_perf(tmp, 1, 1.0)
            b = self.fake_tw_perf(tmp, 2, 2.0)
            out = os.path.join(tmp, 'runs')
            proc = self.ab('--tw-perf-a', a, '--tw-perf-b', b, '-n', '4', '-o', out,
                           'heartbeats --quick')
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn('cpu_per_run', proc.stdout.strip().splitlines()[-1])
            self.assertEqual(len(os.listdir(os.path.join(out, 'a'))), 8)  # 4 JSON, 4 tables
            with open(os.path.join(out, 'session.txt')) as f:
                session = f.read()
            self.assertIn('a: ' + a, session)
            self.assertIn('b: ' + b, session)
            self.assertIn('end: ', session)
        self.assertEqual(self.worktrees(), before)

    def test_demo_script(self):
        """ab_demo.sh: its refusals, and one session of each kind on stand-in programs."""
        demo = os.path.join(HERE, 'ab_demo.sh')
        for args, said in ((['a', 'b'], 'TW_PERF_A'), (['-s', 'x', 'a', 'b', 'c'], '-s x'),
                           (['--build', 'no-such-revision', '/nonexistent/x'],
                            'not a revision')):
            proc = subprocess.run(['bash', demo] + args, capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn(said, proc.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            progs = [self.fake_tw_perf(tmp, 1, 1.0), self.fake_tw_perf(tmp, 2, 2.0),
                     self.fake_tw_perf(tmp, 3, 1.0)]
            out = os.path.join(tmp, 'demo')
            proc = subprocess.run(['bash', demo, '-s', '1', '-n', '4', '-o', out] + progs,
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertIn('regressed in 1 of 1; A vs A2: no difference in 1 of 1', proc.stdout)
            self.assertTrue(os.path.exists(os.path.join(out, 'same-1', 'verdict.json')))


class RankStatistics(unittest.TestCase):
    def test_u_counts_against_enumeration(self):
        import itertools
        for m, n in ((1, 1), (2, 5), (4, 3), (5, 5)):
            counts = [0] * (m * n + 1)
            for pos in itertools.combinations(range(m + n), m):
                counts[sum(p - i for i, p in enumerate(pos))] += 1
            self.assertEqual(compare.u_counts(m, n), counts, (m, n))

    def test_interval_of_five_and_five(self):
        # the textbook's critical value for m = n = 5, two-sided 0.05, is U = 2
        k, coverage = compare.rank_interval(5, 5, 0.95)
        self.assertEqual(k, 3)
        self.assertAlmostEqual(coverage, 1 - 2 * 4 / 252)
        self.assertEqual(compare.rank_interval(3, 3, 0.95)[0], 0)
        self.assertEqual(compare.fewest_runs(0.95), 4)

    def test_hodges_lehmann_shift(self):
        est, lo, hi, _ = compare.hodges_lehmann([1, 2, 3, 4, 5], [11, 12, 13, 14, 15], 0.95)
        self.assertEqual(est, 10)
        self.assertLessEqual(lo, 10)
        self.assertGreaterEqual(hi, 10)
        self.assertGreater(lo, 5)


if __name__ == '__main__':
    unittest.main()
