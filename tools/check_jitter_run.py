#!/usr/bin/env python3
"""check_jitter_run.py TW-JITTER PREFIX [OPTIONS...]

Runs tw-jitter with OPTIONS plus --json PREFIX.json --plot PREFIX.png and fails
unless it exits 0 and both files are there and sound: the JSON parses and has
the figures, targets and series tw-jitter promises (and a wake-up floor column
exactly when --floor is among OPTIONS, a floor-beside column exactly when the
task is also alone with one period), the PNG is a PNG.
"""
import json
import os
import subprocess
import sys

FIGURES = {
    'interval_mean': 'us', 'interval_sd': 'us', 'interval_smallest': 'us',
    'interval_largest': 'us', 'interval_worst': 'us', 'interval_off_p50': 'us',
    'interval_off_p99': 'us', 'intervals_off_1ms': '%', 'lateness_p50': 'us', 'lateness_p90': 'us',
    'lateness_p99': 'us', 'lateness_p99_9': 'us', 'lateness_max': 'us',
    'runs': 'runs', 'runs_before_due': 'runs', 'skipped_overlap': 'firings',
    'skipped_overload': 'firings', 'skipped_missed': 'firings',
    'cpu_percent': '% of a core', 'cpu_per_run_us': 'us', 'wheel_wakeups': '1/s',
}


def fail(why):
    print('check_jitter_run: FAIL: ' + why)
    sys.exit(1)


def main():
    tool, prefix, options = sys.argv[1], sys.argv[2], sys.argv[3:]
    json_path, png_path = prefix + '.json', prefix + '.png'
    for stale in (json_path, png_path):
        if os.path.exists(stale):
            os.remove(stale)
    rc = subprocess.call([tool] + options + ['--json', json_path, '--plot', png_path])
    if rc:
        fail('tw-jitter exited with %d' % rc)
    for path in (json_path, png_path):
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            fail('%s is missing or empty' % path)
    with open(png_path, 'rb') as f:
        if f.read(8) != b'\x89PNG\r\n\x1a\n':
            fail('%s is not a PNG' % png_path)
    with open(json_path, encoding='utf-8') as f:
        report = json.load(f)
    if (report['tool'], report['scenario']) != ('tw-jitter', 'jitter'):
        fail('tool/scenario are %r/%r' % (report['tool'], report['scenario']))
    if report['params'].get('tasks') != float(options[options.index('--tasks') + 1]):
        fail('params.tasks is %r' % report['params'].get('tasks'))
    if report['params'].get('on_wheel_thread') != float('--on-wheel-thread' in options):
        fail('params.on_wheel_thread is %r' % report['params'].get('on_wheel_thread'))
    for key in ('host', 'kernel', 'arch', 'cpu', 'cpus', 'compiler', 'build', 'git', 'date'):
        if report['machine'].get(key) in (None, ''):
            fail('machine.%s is empty' % key)
    units = {f['name']: f['unit'] for f in report['figures'] if f['impl'] == 'tickwheel'}
    if units != FIGURES:
        fail('figures differ: %r' % sorted(set(units.items()) ^ set(FIGURES.items())))
    floor = {f['name'] for f in report['figures'] if f['impl'] == 'wake-up floor'}
    # the floor's own: what one of its wake-ups cost its thread
    floor_own = {'cpu_per_wakeup'}
    if ('--floor' in options) != bool(floor) or (floor and not floor <= set(FIGURES) | floor_own):
        fail('wake-up floor figures: %r' % sorted(floor))
    # A lone task of one period is also judged against a thread that sleeps as long.
    period = options[options.index('--period') + 1]
    lone = '--floor' in options and report['params'].get('tasks') == 1 and '-' not in period
    beside = {f['name'] for f in report['figures'] if f['impl'] == 'floor beside'}
    if lone != bool(beside) or (beside and beside != floor):
        fail('floor beside figures: %r' % sorted(beside))
    if not all(t['met'] for t in report['targets']) or len(report['targets']) != 2:
        fail('targets: %r' % report['targets'])
    series = {s['name']: s for s in report['series']}
    cdf, hist = series.get('lateness_cdf'), series.get('interval_histogram')
    if not cdf or not cdf['y'] or cdf['y'][-1] != 1 or len(cdf['x']) != len(cdf['y']):
        fail('lateness_cdf: %r' % cdf)
    if not hist or not any(hist['y']) or len(hist['x']) != len(hist['y']):
        fail('interval_histogram: %r' % hist)
    print('check_jitter_run: ok: %s, %s (%d bytes)' %
          (json_path, png_path, os.path.getsize(png_path)))


if __name__ == '__main__':
    main()
