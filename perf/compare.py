#!/usr/bin/env python3
"""perf/compare.py - is candidate B different from baseline A, beyond noise?

  perf/compare.py A B [--threshold 5%] [--confidence 0.95] [--gate FIG,...] [--json OUT]

A and B are sets of repeated tw-perf runs, one JSON per invocation (measure/report.h): each a
directory (its *.json), a file, a glob or a comma-separated list of those. Runs are grouped
by scenario and options (the command line without the program, --json and --plot); per group
and figure, the table gives the medians, the ratio of medians B/A, the Hodges-Lehmann
estimate of the ratio with its distribution-free confidence interval from the Mann-Whitney
U distribution, and a verdict. A lateness figure that the run's wake-up floor also has
(lateness_p50, _p99, _max, interval_*) is compared again as "NAME/floor": each run's
figure divided by its own floor's, which cancels a machine that is slower in one run than
in another. The method and its reasons: perf/COMPARE.md.

Exit status: 0 when no gated figure regressed beyond the threshold, 1 when one did, 2 on
bad input (a path that is not there, a file that is not a tw-perf JSON, no scenario in
common, too few runs for the confidence, a gated figure missing on one side).
"""

import argparse
import fnmatch
import glob
import json
import math
import os
import statistics
import sys

import compare_plot  # beside this file

FLOOR_IMPL = 'wake-up floor'
FLOOR_SUFFIX = '/floor'
# Normalised lateness cancels the machine's own drift; CPU per run has no floor but moves
# less than lateness does under load. Raw lateness is shown, not gated: on a shared VM it
# follows the neighbours (perf/COMPARE.md).
DEFAULT_GATE = ('lateness_p50/floor', 'lateness_p99/floor', 'cpu_per_run')
# Options whose values are outputs, not part of what was measured.
OUTPUT_OPTIONS = ('--json', '--plot')


class BadInput(Exception):
    pass


# ---------------------------------------------------------------- input

def expand(spec):
    """The JSON files a command-line set names, in a stable order."""
    paths = []
    for part in [p for p in spec.split(',') if p]:
        if os.path.isdir(part):
            found = sorted(glob.glob(os.path.join(part, '*.json')))
            if not found:
                raise BadInput('%s: a directory with no *.json in it' % part)
            paths += found
        elif any(c in part for c in '*?['):
            found = sorted(glob.glob(part))
            if not found:
                raise BadInput('%s: matches no file' % part)
            paths += found
        elif os.path.isfile(part):
            paths.append(part)
        else:
            raise BadInput('%s: no such file or directory' % part)
    if not paths:
        raise BadInput('%r: names no run' % spec)
    return paths


def load(path):
    try:
        with open(path) as f:
            report = json.load(f)
    except OSError as e:
        raise BadInput('%s: %s' % (path, e.strerror))
    except ValueError as e:
        raise BadInput('%s: not JSON: %s' % (path, e))
    if not isinstance(report, dict) or not isinstance(report.get('figures'), list):
        raise BadInput('%s: not a tw-perf report (no "figures" list)' % path)
    return report


def group_of(report):
    """The scenario and its options: runs of one group measured the same thing."""
    words = str(report.get('command') or '').split()[1:]
    kept, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w in OUTPUT_OPTIONS:
            skip = True
        elif not any(w.startswith(o + '=') for o in OUTPUT_OPTIONS):
            kept.append(w)
    if kept and kept[0] == report.get('scenario'):
        kept = kept[1:]
    return ' '.join([str(report.get('scenario', '?'))] + kept)


def number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def collect(paths):
    """{group: {(impl, name): {'unit', 'better', 'values': [one per run]}}}, with the
    floor-normalised figures added beside the raw ones."""
    out = {}
    for path in paths:
        report = load(path)
        figs = out.setdefault(group_of(report), {})
        floor = {f.get('name'): number(f.get('value')) for f in report['figures']
                 if isinstance(f, dict) and f.get('impl') == FLOOR_IMPL}
        for f in report['figures']:
            if not isinstance(f, dict) or 'name' not in f:
                continue
            impl, name, value = str(f.get('impl', 'tickwheel')), str(f['name']), number(
                f.get('value'))
            if value is None:
                continue
            better = f.get('better', 'neither')
            add(figs, (impl, name), f.get('unit', ''), better, value)
            base = floor.get(name)
            if impl != FLOOR_IMPL and base is not None and base > 0:
                add(figs, (impl, name + FLOOR_SUFFIX), 'x floor', better, value / base)
    return out


def add(figs, key, unit, better, value):
    entry = figs.setdefault(key, {'unit': str(unit), 'better': better, 'values': []})
    entry['values'].append(value)


# ---------------------------------------------------------------- statistics

def u_counts(m, n):
    """How many of the C(m+n, m) orderings of two samples give each U = 0 .. m*n, with no
    ties: the coefficients of the Gaussian binomial [m+n choose m], built one factor
    (1 - q^(n+i)) / (1 - q^i) at a time (each partial product is a polynomial)."""
    poly = [1]
    for i in range(1, m + 1):
        k = n + i
        poly = poly + [0] * k
        for j in range(len(poly) - 1, k - 1, -1):
            poly[j] -= poly[j - k]
        for j in range(i, len(poly)):
            poly[j] += poly[j - i]
        poly = poly[:len(poly) - i]
    return poly


def rank_interval(m, n, confidence):
    """(k, coverage): the interval from the k-th smallest to the k-th largest of the m*n
    differences b - a covers the true shift with probability `coverage` >= confidence
    (exact under a pure shift, Hollander & Wolfe); k = 0 when m and n are too few."""
    counts = u_counts(m, n)
    total = math.comb(m + n, m)
    tail, k, below = (1 - confidence) / 2, 0, 0
    while k < len(counts) and (below + counts[k]) / total <= tail + 1e-12:
        below += counts[k]
        k += 1
    return k, 1 - 2 * below / total


def fewest_runs(confidence):
    """The fewest runs on each side that give an interval at this confidence."""
    n = 1
    while rank_interval(n, n, confidence)[0] == 0:
        n += 1
    return n


def hodges_lehmann(a, b, confidence):
    """The median of all differences b_j - a_i and its confidence interval, or None."""
    k, coverage = rank_interval(len(a), len(b), confidence)
    if k == 0:
        return None
    diffs = sorted(y - x for x in a for y in b)
    return statistics.median(diffs), diffs[k - 1], diffs[len(diffs) - k], coverage


def compare_figure(a, b, better, threshold, confidence):
    """One row: medians, ratio, estimate and interval (as ratios when every value is
    above 0, else as differences B - A) and the verdict."""
    row = {'n_a': len(a), 'n_b': len(b), 'median_a': statistics.median(a),
           'median_b': statistics.median(b)}
    ma, mb = row['median_a'], row['median_b']
    positive = min(a + b) > 0
    # a ratio of values that can be 0 or below says nothing: those rows are differences
    row['ratio_of_medians'] = mb / ma if positive else None
    row['mode'] = 'ratio' if positive else 'difference'
    hl = hodges_lehmann([math.log(x) for x in a] if positive else a,
                        [math.log(x) for x in b] if positive else b, confidence)
    if hl is None:
        row.update(estimate=None, ci_low=None, ci_high=None, coverage=None,
                   verdict='too few runs')
        return row
    est, lo, hi, row['coverage'] = hl
    if positive:
        est, lo, hi = math.exp(est), math.exp(lo), math.exp(hi)
        up, down, neutral = 1 + threshold, 1 / (1 + threshold), 1.0
    else:
        up, down, neutral = threshold * abs(ma), -threshold * abs(ma), 0.0
    row.update(estimate=est, ci_low=lo, ci_high=hi)
    higher, lower = lo > up, hi < down
    if better == 'lower':
        verdict = 'regressed' if higher else 'improved' if lower else 'no difference'
    elif better == 'higher':
        verdict = 'regressed' if lower else 'improved' if higher else 'no difference'
    else:
        verdict = 'changed' if higher or lower else 'no difference'
    if verdict == 'no difference' and (lo > neutral or hi < neutral):
        verdict += ' (B %s, within threshold)' % ('higher' if lo > neutral else 'lower')
    row['verdict'] = verdict
    return row


# ---------------------------------------------------------------- the comparison

def label(impl, name):
    return name if impl == 'tickwheel' else '%s:%s' % (impl, name)


def gated(lab, patterns):
    return any(fnmatch.fnmatchcase(lab, p) for p in patterns)


def compare(a_runs, b_runs, threshold, confidence, patterns):
    """Rows of every figure both sides have, the problems that make the input bad and
    warnings."""
    common = [g for g in a_runs if g in b_runs]
    if not common:
        raise BadInput('no scenario in common: A has %s; B has %s' % (
            ', '.join(sorted(a_runs)), ', '.join(sorted(b_runs))))
    rows, problems = [], []
    warnings = ['%s: only in %s, not compared' % (g, side)
                for side, mine, other in (('A', a_runs, b_runs), ('B', b_runs, a_runs))
                for g in mine if g not in other]
    for g in common:
        fa, fb = a_runs[g], b_runs[g]
        for key in list(fa) + [k for k in fb if k not in fa]:
            lab = label(*key)
            gate = gated(lab, patterns)
            if key not in fa or key not in fb:
                if gate:
                    problems.append('%s: %s only in %s' % (g, lab, 'A' if key in fa else 'B'))
                continue
            entry = fa[key]
            row = compare_figure(entry['values'], fb[key]['values'], entry['better'],
                                 threshold, confidence)
            row.update(group=g, impl=key[0], name=key[1], label=lab, unit=entry['unit'],
                       better=entry['better'], gated=gate)
            if gate and row['verdict'] == 'too few runs':
                problems.append('%s: %s: %d runs of A and %d of B are too few for %g %% '
                                'confidence (%d of each would do)' % (
                                    g, lab, row['n_a'], row['n_b'], 100 * confidence,
                                    fewest_runs(confidence)))
            rows.append(row)
    if not any(r['gated'] for r in rows):
        problems.append('no gated figure (%s) in these runs; name some with --gate'
                        % ','.join(patterns))
    return rows, problems, warnings


def fmt(v):
    if v is None:
        return '-'
    if abs(v) >= 1000 or v == int(v):
        return '%.0f' % v
    return '%.3g' % v if abs(v) < 10 else '%.1f' % v


def interval_text(r):
    if r['estimate'] is None:
        return '-'
    if r['mode'] == 'ratio':
        return '%.3f [%.3f, %.3f]' % (r['estimate'], r['ci_low'], r['ci_high'])
    return '%+.4g [%+.4g, %+.4g]' % (r['estimate'], r['ci_low'], r['ci_high'])


def print_table(rows, confidence, out):
    groups = []
    for r in rows:
        if r['group'] not in groups:
            groups.append(r['group'])
    head = ('figure', 'unit', 'median A', 'median B', 'B/A',
            'estimate [%g %% CI]' % (100 * confidence), 'verdict')
    for g in groups:
        mine = [r for r in rows if r['group'] == g]
        cover = [r['coverage'] for r in mine if r['coverage'] is not None]
        print('%s: %d runs of A, %d of B%s (* gated; an estimate with a sign is B - A)'
              % (g, max(r['n_a'] for r in mine), max(r['n_b'] for r in mine),
                 ', intervals cover %.1f %%' % (100 * min(cover)) if cover else ''), file=out)
        table = [head] + [(('* ' if r['gated'] else '  ') + r['label'], r['unit'],
                           fmt(r['median_a']), fmt(r['median_b']),
                           '-' if r['ratio_of_medians'] is None
                           else '%.3f' % r['ratio_of_medians'],
                           interval_text(r), r['verdict']) for r in mine]
        widths = [max(len(t[i]) for t in table) for i in range(len(head))]
        for t in table:
            print('  '.join(c.ljust(w) if i in (0, 1, 6) else c.rjust(w)
                            for i, (c, w) in enumerate(zip(t, widths))).rstrip(), file=out)
        print(file=out)


def parse_threshold(text):
    try:
        value = float(text.rstrip('%')) / (100 if text.endswith('%') else 1)
    except ValueError:
        value = -1
    if not math.isfinite(value) or value < 0:
        raise BadInput('--threshold %s: expected a fraction (0.05) or a percentage (5%%)'
                       % text)
    return value


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog='perf/compare.py', description='repeated tw-perf runs of a baseline A and a '
        'candidate B: ratios with confidence intervals, a verdict per figure, exit 1 when a '
        'gated figure regressed (perf/COMPARE.md)')
    ap.add_argument('a', help='baseline runs: a directory, files, globs, comma-separated')
    ap.add_argument('b', help='candidate runs, the same way')
    ap.add_argument('--threshold', default='5%',
                    help='a change smaller than this is no difference (default 5%%)')
    ap.add_argument('--confidence', type=float, default=0.95,
                    help='of the intervals, in (0, 1) (default 0.95)')
    ap.add_argument('--gate', default=','.join(DEFAULT_GATE),
                    help='figures that fail the comparison, comma-separated shell patterns on '
                    'NAME (tickwheel\'s) or IMPL:NAME (default: %(default)s)')
    ap.add_argument('--json', help='write every row and the verdict here')
    ap.add_argument('--plot', metavar='DIR', help='draw A\'s and B\'s lateness by percentile '
                    'on one log-percentile chart per scenario into DIR (gnuplot)')
    args = ap.parse_args(argv)
    try:
        threshold = parse_threshold(args.threshold)
        if not 0 < args.confidence < 1:
            raise BadInput('--confidence %g: expected a number in (0, 1)' % args.confidence)
        patterns = [p for p in args.gate.split(',') if p]
        a_paths, b_paths = expand(args.a), expand(args.b)
        rows, problems, warnings = compare(collect(a_paths), collect(b_paths), threshold,
                                           args.confidence, patterns)
    except BadInput as e:
        print('compare: %s' % e, file=sys.stderr)
        return 2
    for w in warnings:
        print('compare: warning: %s' % w, file=sys.stderr)
    print_table(rows, args.confidence, sys.stdout)
    regressed = ['%s: %s' % (r['group'], r['label']) for r in rows
                 if r['gated'] and r['verdict'] == 'regressed']
    status = 2 if problems else 1 if regressed else 0
    if args.json:
        try:
            with open(args.json, 'w') as f:
                json.dump({'a': a_paths, 'b': b_paths, 'threshold': threshold,
                           'confidence': args.confidence, 'gate': patterns, 'rows': rows,
                           'regressed': regressed, 'problems': problems, 'status': status},
                          f, indent=1)
                f.write('\n')
        except OSError as e:
            problems.append('--json %s: %s' % (args.json, e.strerror))
            status = 2
    if args.plot:
        pictures, trouble = compare_plot.plot(
            compare_plot.load_runs(a_paths, load, group_of),
            compare_plot.load_runs(b_paths, load, group_of), args.plot)
        for png in pictures:
            print('compare: drew %s' % png)
        problems += trouble
        status = 2 if trouble else status
    for p in problems:
        print('compare: %s' % p, file=sys.stderr)
    if regressed:
        print('compare: REGRESSED beyond %g %% at %g %% confidence: %s' % (
            100 * threshold, 100 * args.confidence, '; '.join(regressed)))
    elif not problems:
        print('compare: no gated figure regressed beyond %g %% at %g %% confidence' % (
            100 * threshold, 100 * args.confidence))
    return status


if __name__ == '__main__':
    sys.exit(main())
