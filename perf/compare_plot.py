"""compare_plot.py - compare.py --plot: A's and B's lateness by percentile on one chart.

One PNG per scenario group that has a lateness distribution: each run of A and of B as a thin
line, and the median of each side's runs at every percentile as a thick one, on the
log-percentile axis HdrHistogram's plotter uses (x = 1 / (1 - percentile): 50 % at 2, 99 % at
100, 99.99 % at 10 000), lateness in us on a log axis. A run's distribution comes from its
`lateness_percentiles` series (tw-perf replay: x already 1 / (1 - p)) or its `lateness_cdf`
(heartbeats, burst: x the lateness, y the fraction of runs up to it). gnuplot draws it, as it
draws tw-perf's own pictures.
"""
import os
import re
import shutil
import subprocess
import tempfile

# The percentiles drawn: HdrHistogram's halving levels up to 99.999 %.
LEVELS = [1 - 0.5 ** (k / 4) for k in range(0, 4 * 17)]


def _curve(report):
    """tickwheel's (percentile -> us) points of one run, as (p, us) sorted by p; None if the
    run has no distribution."""
    for s in report.get('series') or []:
        if not isinstance(s, dict) or s.get('impl', 'tickwheel') != 'tickwheel':
            continue
        xs, ys = s.get('x') or [], s.get('y') or []
        if s.get('name') == 'lateness_percentiles':
            return sorted((1 - 1 / x, y) for x, y in zip(xs, ys) if x >= 1)
        if s.get('name') == 'lateness_cdf':
            scale = 100.0 if ys and max(ys) > 1.0 + 1e-9 else 1.0
            return sorted((y / scale, x) for x, y in zip(xs, ys))
    return None


def _at(curve, p):
    """The lateness at percentile p: the first point at or above it (a step, as a histogram
    answers), or the largest."""
    for q, us in curve:
        if q >= p - 1e-12:
            return us
    return curve[-1][1]


def _median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def _side(reports):
    """{group: [curves]} of one side's runs."""
    out = {}
    for group, report in reports:
        curve = _curve(report)
        if curve:
            out.setdefault(group, []).append(curve)
    return out


def _slug(group):
    return re.sub(r'[^A-Za-z0-9]+', '-', group).strip('-')[:60] or 'runs'


def _levels(curves):
    top = max(c[-1][0] for c in curves)
    return [p for p in LEVELS if p <= max(top, 0.5)]


def _write_data(path, curves, levels):
    with open(path, 'w') as f:
        for curve in curves:
            for p in levels:
                f.write('%.9g %.9g\n' % (1 / (1 - p), max(_at(curve, p), 0.1)))
            f.write('\n\n')
        for p in levels:
            f.write('%.9g %.9g\n' % (1 / (1 - p), max(_median([_at(c, p) for c in curves]),
                                                      0.1)))


def _script(png, group, a_file, b_file, a_runs, b_runs):
    def runs(path, n, colour):
        return ', '.join("'%s' index %d with lines lc rgb '%s' lw 1 notitle" % (path, i, colour)
                         for i in range(n))
    return '\n'.join([
        "set terminal pngcairo size 900,560 noenhanced" if _has_cairo() else
        "set terminal png size 900,560 noenhanced",
        "set output '%s'" % png,
        "set title 'lateness by percentile: %s'" % group.replace("'", ''),
        "set logscale xy",
        "set xlabel 'percentile'",
        "set ylabel 'lateness (us)'",
        "set xtics ('0%%' 1, '50%%' 2, '90%%' 10, '99%%' 100, '99.9%%' 1000, "
        "'99.99%%' 10000, '99.999%%' 100000)",
        "set grid",
        "set key top left",
        "plot " + ', '.join([
            runs(a_file, a_runs, '#a0b8e0'), runs(b_file, b_runs, '#f0b0a0'),
            "'%s' index %d with lines lc rgb '#1040a0' lw 3 title 'A (median of %d runs)'"
            % (a_file, a_runs, a_runs),
            "'%s' index %d with lines lc rgb '#c03010' lw 3 title 'B (median of %d runs)'"
            % (b_file, b_runs, b_runs)]),
        ''])


def _has_cairo():
    try:
        out = subprocess.run(['gnuplot', '-e', 'set terminal'], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return 'pngcairo' in out.stdout + out.stderr


def plot(a_reports, b_reports, directory):
    """Draws every group both sides have a distribution of; returns (pictures, problems)."""
    if not shutil.which('gnuplot'):
        return [], ['--plot: gnuplot is not installed (Debian: gnuplot-nox)']
    a, b = _side(a_reports), _side(b_reports)
    groups = sorted(set(a) & set(b))
    if not groups:
        return [], ['--plot: no scenario has a lateness distribution on both sides']
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        return [], ['--plot %s: %s' % (directory, e.strerror)]
    pictures, problems = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for group in groups:
            levels = _levels(a[group] + b[group])
            a_file, b_file = os.path.join(tmp, 'a.dat'), os.path.join(tmp, 'b.dat')
            _write_data(a_file, a[group], levels)
            _write_data(b_file, b[group], levels)
            png = os.path.join(directory, _slug(group) + '-lateness-percentiles.png')
            script = _script(png, group, a_file, b_file, len(a[group]), len(b[group]))
            done = subprocess.run(['gnuplot'], input=script, capture_output=True, text=True,
                                  timeout=60)
            if done.returncode != 0 or not os.path.exists(png):
                problems.append('--plot: gnuplot failed for %s: %s' % (
                    group, done.stderr.strip().splitlines()[-1:] or ['?']))
            else:
                pictures.append(png)
    return pictures, problems


def load_runs(paths, load, group_of):
    """(group, report) of each run, read with compare.py's own loader."""
    out = []
    for path in paths:
        report = load(path)
        out.append((group_of(report), report))
    return out
