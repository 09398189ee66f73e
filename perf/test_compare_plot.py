#!/usr/bin/env python3
"""perf/test_compare_plot.py - compare.py --plot, run by meson (suite 'perf'): the percentile
read from each kind of series tw-perf writes, and a chart drawn by gnuplot (a package the
README's set-up installs) for runs of each kind."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, 'compare.py')
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import compare_plot  # noqa: E402


def run_with(series, scenario, path):
    return {'tool': 'tw-perf', 'scenario': scenario,
            'command': 'tw-perf %s --json %s' % (scenario, path),
            'figures': [{'impl': 'tickwheel', 'name': 'lateness_p99', 'value': 100.0,
                         'unit': 'us', 'better': 'lower'}],
            'series': series}


def cdf(scale):
    return [{'impl': 'tickwheel', 'name': 'lateness_cdf', 'x': [10 * scale, 20 * scale,
                                                                 400 * scale],
             'y': [0.5, 0.9, 1.0]}]


def percentiles(scale):
    return [{'impl': 'tickwheel', 'name': 'lateness_percentiles', 'x': [1, 2, 10, 100],
             'y': [5 * scale, 30 * scale, 90 * scale, 700 * scale]},
            {'impl': 'recording', 'name': 'lateness_percentiles', 'x': [1, 2], 'y': [1, 1]}]


class Plot(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_percentile_of_a_cdf_and_of_percentiles(self):
        c = compare_plot._curve(run_with(cdf(1), 'heartbeats', 'x'))
        self.assertEqual(compare_plot._at(c, 0.5), 10)
        self.assertEqual(compare_plot._at(c, 0.75), 20, 'the first level at or above 75 %')
        self.assertEqual(compare_plot._at(c, 0.999), 400)
        p = compare_plot._curve(run_with(percentiles(1), 'replay', 'x'))
        self.assertEqual(compare_plot._at(p, 0.5), 30, 'x = 2 is the 50th percentile')
        self.assertEqual(compare_plot._at(p, 0.99), 700)
        self.assertIsNone(compare_plot._curve(run_with([], 'idle', 'x')))

    def write(self, side, make, scenario, scales):
        d = os.path.join(self.tmp.name, side)
        os.makedirs(d, exist_ok=True)
        for i, s in enumerate(scales):
            path = os.path.join(d, '%s-%d.json' % (scenario, i))
            with open(path, 'w') as f:
                json.dump(run_with(make(s), scenario, path), f)
        return d

    def compare(self, a, b, out):
        return subprocess.run([sys.executable, COMPARE, a, b, '--gate', 'lateness_p99',
                               '--plot', out], capture_output=True, text=True, timeout=120)

    def test_a_chart_per_scenario(self):
        for make, scenario in ((cdf, 'heartbeats'), (percentiles, 'replay')):
            a = self.write('a-' + scenario, make, scenario, [1, 1.1, 0.9, 1.05])
            b = self.write('b-' + scenario, make, scenario, [2, 2.2, 1.8, 2.1])
            out = os.path.join(self.tmp.name, 'plots-' + scenario)
            proc = self.compare(a, b, out)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            pngs = os.listdir(out)
            self.assertEqual(len(pngs), 1, pngs)
            with open(os.path.join(out, pngs[0]), 'rb') as f:
                self.assertEqual(f.read(8), b'\x89PNG\r\n\x1a\n')
            self.assertIn('drew ' + os.path.join(out, pngs[0]), proc.stdout)

    def test_no_distribution_exits_2(self):
        a = self.write('a', lambda s: [], 'idle', [1, 1, 1, 1])
        b = self.write('b', lambda s: [], 'idle', [1, 1, 1, 1])
        proc = self.compare(a, b, os.path.join(self.tmp.name, 'none'))
        self.assertEqual(proc.returncode, 2)
        self.assertIn('no scenario has a lateness distribution on both sides', proc.stderr)


if __name__ == '__main__':
    unittest.main()
