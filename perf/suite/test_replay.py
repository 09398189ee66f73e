#!/usr/bin/env python3
"""tw-perf replay on a synthetic recording (make_recording.py, from the format's page): it
must re-issue every operation the recording holds but the two it cannot (an ADD that failed,
a cancel of an id never added), see the recording's runs within a few percent, report its
figures beside the wake-up floor, write its lateness in HdrHistogram's percentile text
(--hgrm), and exit 0; a file cut short or foreign is one clear line
on stderr and exit status 2.

  test_replay.py TW_PERF
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_recording  # noqa: E402

RUNS_TOLERANCE = 0.03  # the engine's rules give the recording's runs; a few may land late
# A replay that could not issue its operations on time (a sanitizer's build: each costs
# hundreds of us) moves its dues with them; its runs are then judged loosely.
LAG_LIMIT_US, LAGGING_TOLERANCE = 2000, 0.15


def figures(report):
    return {(f["impl"], f["name"]): f["value"] for f in report["figures"]}


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok:", what)


def replay(tw_perf, path, *args):
    return subprocess.run([tw_perf, "replay", path, *args], capture_output=True, text=True,
                          timeout=60)


def check_replay(tw_perf, tmp):
    data, rec = make_recording.build()
    path, out = os.path.join(tmp, "synthetic.twrec"), os.path.join(tmp, "replay.json")
    with open(path, "wb") as f:
        f.write(data)
    hgrm = os.path.join(tmp, "lateness.hgrm")
    p = replay(tw_perf, path, "--json", out, "--hgrm", hgrm)
    print(p.stdout)
    check(p.returncode == 0, "exit status 0 (got %d: %s)" % (p.returncode, p.stderr.strip()))
    with open(out) as f:
        report = json.load(f)
    fig = figures(report)
    check(report["scenario"] == "replay", "the JSON's scenario is replay")
    check("dropped 3 events in 1 places" in p.stderr, "a warning of the recorder's gap")
    check(fig[("recording", "ops")] == rec.ops, "operations recorded: %d" % rec.ops)
    check(fig[("tickwheel", "ops_left_out")] == rec.left_out,
          "left out: the failed ADD and the cancel of an unknown id")
    check(fig[("tickwheel", "ops")] == rec.ops - rec.left_out,
          "every other operation replayed (%d)" % fig[("tickwheel", "ops")])
    check(fig[("recording", "runs")] == rec.runs, "runs recorded: %d" % rec.runs)
    runs, lag = fig[("tickwheel", "runs")], fig[("tickwheel", "op_lag_p99")]
    tolerance = RUNS_TOLERANCE if lag <= LAG_LIMIT_US else LAGGING_TOLERANCE
    if lag > LAG_LIMIT_US:
        print("note: operations issued late (op_lag_p99 %.0f us): runs judged loosely" % lag)
    check(abs(runs / rec.runs - 1) <= tolerance,
          "runs replayed %d within %.0f %% of %d" % (runs, 100 * tolerance, rec.runs))
    mismatches = fig[("tickwheel", "result_mismatches")]
    check(mismatches == 0 or lag > LAG_LIMIT_US,
          "every call answered as recorded (%d did not)" % mismatches)
    for name in ("lateness_p50", "lateness_p99", "interval_off_p99", "cpu_per_run",
                 "skipped", "ops_ratio", "runs_ratio"):
        check(("tickwheel", name) in fig, "figure " + name)
    check(("wake-up floor", "lateness_p99") in fig, "the wake-up floor beside it")
    series = {(x["impl"], x["name"]): x for x in report["series"]}
    check(all(len(series[(impl, "lateness_percentiles")]["x"]) > 1
              for impl in ("tickwheel", "recording")), "lateness by percentile, both")
    check(fig[("tickwheel", "failures")] >= 1, "the recorded callback's failure returned")
    for name, n in ((hgrm, runs), (hgrm[:-5] + "-recording.hgrm", rec.runs)):
        with open(name) as f:
            last = [line.split() for line in f if line.strip()[:1].isdigit()][-1]
        check(float(last[1]) == 1.0 and int(last[2]) == n,
              "%s: HdrHistogram's percentile text up to 100 %% of %d runs" %
              (os.path.basename(name), n))


def check_refused(tw_perf, tmp):
    data, _ = make_recording.build()
    cases = {
        "cut": (data[:64 + 56 * 3 + 20], "cut short"),
        "foreign": (b"\x89PNG\r\n\x1a\n" + data[8:], "not a tickwheel recording"),
        "empty": (b"", "not a tickwheel recording"),
        "version": (data[:8] + b"\x07\0\0\0" + data[12:], "version 7"),
    }
    for name, (content, says) in cases.items():
        path = os.path.join(tmp, name + ".twrec")
        with open(path, "wb") as f:
            f.write(content)
        p = replay(tw_perf, path)
        check(p.returncode == 2 and says in p.stderr and path in p.stderr,
              "%s file: exit 2 and '%s' (got %d: %s)" % (name, says, p.returncode,
                                                         p.stderr.strip()))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        check_refused(sys.argv[1], tmp)
        check_replay(sys.argv[1], tmp)


if __name__ == "__main__":
    main()
