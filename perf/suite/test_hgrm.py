#!/usr/bin/env python3
"""tw-perf burst --hgrm: each loop's lateness in HdrHistogram's percentile text, tickwheel's
to FILE and each peer's beside it (FILE-NAME.hgrm), levels rising to 100 %, the count at
100 % the loop's runs, and the values the JSON's percentiles to HdrHistogram's precision
(the bucket's lower edge: the microsecond below 2 ms, 0.1 % above).

  test_hgrm.py TW_PERF
"""
import json
import os
import subprocess
import sys
import tempfile


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok:", what)


def read_hgrm(path):
    """The (value_ms, percentile, count) lines, and the footer lines."""
    levels, footer = [], []
    with open(path) as f:
        header = f.readline()
        check("Value" in header and "1/(1-Percentile)" in header, path + ": the header line")
        for line in f:
            if line.startswith("#["):
                footer.append(line)
            elif line.strip():
                v, p, c = line.split()[:3]
                levels.append((float(v), float(p), int(c)))
    return levels, footer


def bracket(levels, p):
    """The values of the levels either side of percentile p (HdrHistogram's levels are its
    own: 99 % falls between two of them)."""
    below = [v for v, q, _ in levels if q <= p + 1e-12]
    above = [v for v, q, _ in levels if q >= p - 1e-12]
    return below[-1], above[0]


def within(levels, p, figure_us):
    """Each value is its bucket's lower edge (at most the exact value, the microsecond below
    2 ms, 0.1 % above): the exact p-quantile of the JSON lies between the levels around p."""
    lo, hi = bracket(levels, p)
    exact = figure_us / 1e3
    return lo - 1e-9 <= exact < hi * 1.001 + 0.001 + 1e-9


def main():
    tw_perf = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        hgrm, out = os.path.join(tmp, "burst.hgrm"), os.path.join(tmp, "burst.json")
        p = subprocess.run([tw_perf, "burst", "--quick", "--tasks", "2000", "--json", out,
                            "--hgrm", hgrm], capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, "exit status 0 (got %d: %s)" % (p.returncode, p.stderr))
        with open(out) as f:
            report = json.load(f)
        fig = {(x["impl"], x["name"]): x["value"] for x in report["figures"]}
        impls = sorted({i for i, name in fig if name == "lateness_p50"})
        check("tickwheel" in impls, "tickwheel measured (and %d more)" % (len(impls) - 1))
        for impl in impls:
            path = hgrm if impl == "tickwheel" else hgrm[:-5] + "-" + impl + ".hgrm"
            check(os.path.exists(path), "%s: %s written" % (impl, os.path.basename(path)))
            levels, footer = read_hgrm(path)
            check(len(levels) > 10, "%s: %d levels" % (impl, len(levels)))
            check(all(a[1] < b[1] and a[2] <= b[2] and a[0] <= b[0]
                      for a, b in zip(levels, levels[1:])),
                  "%s: percentiles, counts and values rise" % impl)
            check(levels[-1][1] == 1.0 and levels[-1][2] == fig[(impl, "runs")],
                  "%s: 100 %% counts its %d runs" % (impl, fig[(impl, "runs")]))
            check(abs(levels[-1][0] - fig[(impl, "lateness_max")] / 1e3) < 0.0015,
                  "%s: the largest value is lateness_max" % impl)
            for name, q in (("lateness_p50", 0.5), ("lateness_p99", 0.99)):
                check(within(levels, q, fig[(impl, name)]),
                      "%s: %s %.1f us in the JSON, between %.3f and %.3f ms in the file" %
                      ((impl, name, fig[(impl, name)]) + bracket(levels, q)))
            check(any(line.startswith("#[Max") for line in footer), "%s: footers" % impl)


if __name__ == "__main__":
    main()
