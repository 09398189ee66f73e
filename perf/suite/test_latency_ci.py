#!/usr/bin/env python3
"""examples/latency_ci.sh --recordings, as the README's guide runs it, on two synthetic
recordings (make_recording.py) of one program before and after its callbacks got 500 us
slower: the job must say "regressed" on CPU per run, exit 1, and leave its verdict and its
chart; its refusals exit 2. (Whether a change is caught in 9 of 10 sessions on this machine is
perf/COMPARE.md's demonstration, not a test.)

  test_latency_ci.py TW_PERF SCRIPT
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_recording  # noqa: E402


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok:", what)


def main():
    tw_perf, script = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, extra_us in (("old", 0), ("new", 500)):
            data, _ = make_recording.build(extra_us * 1000)
            paths[name] = os.path.join(tmp, name + ".twrec")
            with open(paths[name], "wb") as f:
                f.write(data)
        out = os.path.join(tmp, "ci")
        p = subprocess.run(["bash", script, "--recordings", paths["old"], paths["new"],
                            "--tw-perf", tw_perf, "-n", "4", "-o", out],
                           capture_output=True, text=True, timeout=300)
        print(p.stdout[-3000:])
        print(p.stderr[-2000:], file=sys.stderr)
        check(p.returncode == 1, "exit status 1 for a regression (got %d)" % p.returncode)
        with open(os.path.join(out, "verdict.json")) as f:
            verdict = json.load(f)
        check(verdict["status"] == 1, "verdict.json says status 1")
        check(any(r.endswith(": cpu_per_run") for r in verdict["regressed"]),
              "cpu_per_run regressed: %s" % verdict["regressed"])
        rows = {r["label"]: r for r in verdict["rows"]}
        check(rows["cpu_per_run"]["verdict"] == "regressed", "cpu_per_run's row: regressed")
        check(len(os.listdir(os.path.join(out, "a"))) == 8, "4 runs of A kept (json + text)")
        pngs = os.listdir(os.path.join(out, "plots"))
        check(len(pngs) == 1 and pngs[0].endswith(".png"), "one chart: %s" % pngs)
        check(not os.path.exists(os.path.join(out, "workload.twrec")), "no copy left behind")
        # refusals
        for args, what in (([], "no mode"),
                           (["--recordings", paths["old"]], "one recording"),
                           (["--recordings", paths["old"], os.path.join(tmp, "none")],
                            "a recording that is not there"),
                           (["--recordings", paths["old"], paths["new"], "-n", "x"],
                            "-n not a number"),
                           (["--recordings", paths["old"], paths["new"], "-o", out],
                            "an output directory with runs in it")):
            p = subprocess.run(["bash", script, "--tw-perf", tw_perf] + args,
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 2 and p.stderr.strip(), "exit 2 with a reason: " + what)


if __name__ == "__main__":
    main()
