#!/usr/bin/env python3
"""check_cli.py VERSION TW-JITTER TW-SHOWCASE TW-PERF TW-CRON WORKDIR

The command lines of the four tools, as Unix tools behave (issue 10):
-h and --help print the usage on stdout and exit 0, --version prints
"NAME (tickwheel) VERSION" and exits 0; a bad value, an unknown option, a
missing value is one line on stderr naming the option and the value (and at
most a hint line), exit status 2, before anything runs; an output that cannot
be written fails the same way at once, not after the run, and leaves no file
behind. WORKDIR is emptied and used for the files. Fails on the first
difference, printing what was run and what came back. tw-cron's output is
checked too: its fire times, the caret under a bad expression, and running out
of fire times.
"""
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone

# A run that was not stopped by its checks would last this long (--seconds 5
# where the program has it): the answer must come well before.
QUICK_S = 2.0


def fail(why, argv=None, res=None):
    print('check_cli: FAIL: ' + why)
    if argv is not None:
        print('  command: %s' % ' '.join(argv))
    if res is not None:
        print('  exit status %d\n  stdout: %r\n  stderr: %r' % (res.returncode, res.stdout,
                                                                  res.stderr))
    sys.exit(1)


def run(argv, env=None, stdout=subprocess.PIPE):
    start = time.monotonic()
    try:
        res = subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True,
                             env=env, timeout=60, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        fail('still running after 60 s: its checks did not stop it', argv)
    res.seconds = time.monotonic() - start
    if res.stdout is None:
        res.stdout = ''
    return res


def check_help(name, tool, pre):
    outputs = []
    for flag in ('--help', '-h'):
        argv = [tool] + pre + [flag]
        res = run(argv)
        if res.returncode != 0 or res.stderr:
            fail('%s: exit 0 and nothing on stderr expected' % flag, argv, res)
        if not res.stdout.startswith('usage: ' + name + ' '):
            fail('%s: the usage on stdout expected' % flag, argv, res)
        for option in ('--help', '--version'):
            if option not in res.stdout:
                fail('%s: the usage does not name %s' % (flag, option), argv, res)
        outputs.append(res.stdout)
    if outputs[0] != outputs[1]:
        fail('%s: -h and --help print different texts' % name)
    # The usage that could not be written is an error, not a success.
    if os.path.exists('/dev/full'):
        argv = [tool, '--help']
        with open('/dev/full', 'w') as full:
            res = run(argv, stdout=full)
        if res.returncode == 0 or not res.stderr:
            fail('--help into a full disk: a non-zero status and a message expected', argv, res)


def check_version(name, tool, version):
    argv = [tool, '--version']
    res = run(argv)
    want = '%s (tickwheel) %s\n' % (name, version)
    if res.returncode != 0 or res.stderr or res.stdout != want:
        fail('--version: exit 0 and %r on stdout expected' % want, argv, res)


def check_error(name, tool, args, *mentions, lines=(1, 2), env=None):
    """args must fail with status 2, fast, nothing on stdout, one line (plus
    at most a hint) on stderr that starts with "NAME: " (tw-perf's scenarios:
    "tw-perf SCENARIO: ") and holds each mention."""
    argv = [tool] + args
    res = run(argv, env=env)
    got = res.stderr.splitlines()
    if res.returncode != 2:
        fail('exit status 2 expected', argv, res)
    if res.stdout:
        fail('nothing on stdout expected', argv, res)
    if not lines[0] <= len(got) <= lines[1]:
        fail('%d to %d lines on stderr expected' % lines, argv, res)
    if not re.match(re.escape(name) + r'( [a-z]+)?: ', got[0]):
        fail('the message must start with "%s: "' % name, argv, res)
    for m in mentions:
        if m not in got[0]:
            fail('the message must name %r' % m, argv, res)
    if len(got) == 2 and '--help' not in got[1]:
        fail('a second line may only be the hint to try --help', argv, res)
    if res.seconds >= QUICK_S:
        fail('took %.1f s: the command line is checked before the run' % res.seconds, argv, res)
    return got[0]


def bad_value(name, tool, pre, option, value, *rest):
    """OPTION VALUE (and rest) is bad: the message names both."""
    return check_error(name, tool, pre + [option, value] + list(rest), option, "'%s'" % value)


def check_common(name, tool, pre, work):
    check_error(name, tool, pre + ['--no-such-option'], "'--no-such-option'")
    check_error(name, tool, pre + ['--no-such=3'], "'--no-such'")
    check_error(name, tool, pre + ['-x'], "'-x'")
    check_error(name, tool, pre + ['stray'], "'stray'")
    check_error(name, tool, pre + ['--seconds'], "'--seconds'", 'needs a value')
    bad_value(name, tool, pre, '--seconds', '0')
    bad_value(name, tool, pre, '--seconds', '-1')
    bad_value(name, tool, pre, '--seconds', 'ten')
    # --name=value is the same as --name value
    check_error(name, tool, pre + ['--seconds=0'], '--seconds', "'0'")


def check_outputs(name, tool, pre, work, json_too=True, plot_is_dir=False):
    missing = '/no/such/dir/x'
    # the brief's example line, exactly, at once although the run would last 5 s
    if json_too:
        line = check_error(name, tool, pre + ['--seconds', '5', '--json', missing + '.json'],
                           lines=(1, 1))
        want = '%s: cannot write --json %s.json: No such file or directory' % (name, missing)
        if line != want:
            fail('%r expected, got %r' % (want, line))
        check_error(name, tool, pre + ['--seconds', '5', '--json', work], '--json', work,
                    'Is a directory', lines=(1, 1))
    plot = missing + ('' if plot_is_dir else '.png')
    check_error(name, tool, pre + ['--seconds', '5', '--plot', plot], '--plot', plot,
                'No such file or directory', lines=(1, 1))
    # a good --json and a bad --plot: the good file is not left behind, and a
    # file that was there is not emptied
    fresh, kept = os.path.join(work, name + '-fresh.json'), os.path.join(work, name + '-kept.json')
    with open(kept, 'w') as f:
        f.write('kept\n')
    for path in (fresh, kept):
        check_error(name, tool, pre + ['--seconds', '5', '--json', path, '--plot', plot],
                    '--plot', lines=(1, 1))
    if os.path.exists(fresh):
        fail('%s: left behind by a run that failed its checks' % fresh)
    with open(kept) as f:
        if f.read() != 'kept\n':
            fail('%s: changed by a run that failed its checks' % kept)


def check_jitter(tool, version, work):
    name, pre = 'tw-jitter', []
    check_help(name, tool, pre)
    check_version(name, tool, version)
    check_common(name, tool, pre, work)
    for option, value in (('--tasks', '0'), ('--tasks', '-3'), ('--tasks', 'abc'),
                          ('--tasks', '1.5'), ('--tasks', ' 2'), ('--tasks', '99999999999999999999'),
                          ('--period', '0'), ('--period', '1.5ms'), ('--period', '500-100ms'),
                          ('--period', 'soon'), ('--period', '-200ms'),
                          ('--duration', '0'), ('--duration', 'soon'), ('--duration', '-1s'),
                          ('--executors', '-1'), ('--executors', '99999'),
                          ('--floor', '0'), ('--floor', '100ms'), ('--floor', 'x'),
                          ('--seconds', '2.5')):
        bad_value(name, tool, pre, option, value)
    # --floor against a --period that comes after it
    bad_value(name, tool, pre, '--floor', '1s', '--period', '1s')
    check_outputs(name, tool, pre, work)
    check_error(name, tool, ['--plot', work], '--plot', 'Is a directory', lines=(1, 1))
    # --plot without gnuplot on the PATH: said before the run, no picture left
    empty = os.path.join(work, 'empty-path')
    os.makedirs(empty, exist_ok=True)
    png = os.path.join(work, 'no-gnuplot.png')
    check_error(name, tool, ['--seconds', '5', '--plot', png], '--plot', 'gnuplot',
                lines=(1, 1), env=dict(os.environ, PATH=empty))
    if os.path.exists(png):
        fail('%s: left behind without gnuplot' % png)


def check_showcase(tool, version, work):
    name, pre = 'tw-showcase', []
    check_help(name, tool, pre)
    check_version(name, tool, version)
    check_common(name, tool, pre, work)
    for option, value in (('--heartbeats', '-1'), ('--heartbeats', 'many'),
                          ('--heartbeats', '99999999999'), ('--sessions', '1e3'),
                          ('--sessions', '-5'), ('--resets-per-second', '-5'),
                          ('--resets-per-second', '1.5'), ('--seconds', '2.5')):
        bad_value(name, tool, pre, option, value)
    check_error(name, tool, ['--heartbeats', '0', '--sessions', '0'], '--heartbeats',
                '--sessions')


def check_perf(tool, version, work):
    name, pre = 'tw-perf', ['idle']
    check_help(name, tool, [])
    check_help(name, tool, pre)
    check_version(name, tool, version)
    check_common(name, tool, pre, work)
    for option, value in (('--tasks', '0'), ('--tasks', '-1'), ('--seconds', 'nan'),
                          ('--seconds', 'inf'), ('--seconds', '1e9'), ('--period', '0'),
                          ('--period', '0.5ms'), ('--sessions', '0'), ('--rate', '0'),
                          ('--rate', 'fast'), ('--timeout', '0'), ('--timeout', 'never'),
                          ('--quiet', '0'), ('--quiet', '1'), ('--quiet', '1.5'),
                          ('--threads', '0'), ('--threads', '-2'), ('--executors', '-1'),
                          ('--peers', 'nosuchloop'), ('--peers', 'libuv,'), ('--peers', ''),
                          ('--seed', '-1'), ('--seed', 'x'), ('--block', '0'),
                          ('--block', 'soon'), ('--block', '0.5ms')):
        bad_value(name, tool, pre, option, value)
    # a blocker that would outlast the run: said at once, before the wake-up floor
    check_error(name, tool, ['blocker', '--quick', '--block', '5s'], '--block', '--seconds')
    check_error(name, tool, pre + ['--quick=yes'], "'--quick'")
    check_error(name, tool, ['nosuch'], "'nosuch'")
    check_error(name, tool, ['--seconds', '1'], 'scenario')
    check_error(name, tool, ['--seconds', '1', 'idle'], 'scenario', 'idle')
    check_error(name, tool, ['ops', '--sizes', '1000,'], '--sizes', "'1000,'")
    # no argument at all: the usage, on stderr, status 2
    res = run([tool])
    if res.returncode != 2 or res.stdout or not res.stderr.startswith('usage: tw-perf '):
        fail('no argument: the usage on stderr and status 2 expected', [tool], res)
    check_outputs(name, tool, pre, work, plot_is_dir=True)
    plain = os.path.join(work, 'plain-file')
    with open(plain, 'w') as f:
        f.write('x\n')
    check_error(name, tool, pre + ['--plot', plain], '--plot', 'Not a directory', lines=(1, 1))
    # a --plot directory it made is taken away again when the run fails
    # (icount fails outside valgrind, after the checks)
    made = os.path.join(work, 'pics-made')
    res = run([tool, 'icount', '--plot', made])
    if res.returncode != 2 or os.path.exists(made):
        fail('icount outside valgrind: status 2 and no %s left expected' % made,
             [tool, 'icount', '--plot', made], res)


def check_cron(tool, version, work):
    name = 'tw-cron'
    check_help(name, tool, [])
    check_version(name, tool, version)
    check_error(name, tool, ['--no-such-option', '@daily'], "'--no-such-option'")
    check_error(name, tool, ['--count'], "'--count'", 'needs a value')
    check_error(name, tool, [], 'no expression')
    check_error(name, tool, ['@daily', '@hourly'], "'@hourly'")
    for option, value in (('--count', '0'), ('--count', 'x'), ('--count', '100001'),
                          ('--count', '-1'), ('--after', 'yesterday'),
                          ('--after', '2026-03-29T01:30:00'), ('--after', '2026-13-01T00:00:00Z'),
                          ('--after', '1e9'), ('--after', '99999999999999999999'),
                          ('--tz', 'Mars/Olympus_Mons'), ('--tz', ''), ('--tz', 'Europe/Berlin x'),
                          ('--tz', '../etc/passwd')):
        bad_value(name, tool, [], option, value, '@daily')
    check_error(name, tool, ['--count=0', '@daily'], '--count', "'0'")
    # a bad expression: the reason, the expression, a caret under the byte at fault
    for args, expr, offset, reason in (
            (['0 61 * * * *'], '0 61 * * * *', 2, 'minutes are 0-59'),
            (['0 0 0 * JANUARY *'], '0 0 0 * JANUARY *', 8, 'not a month name'),
            (['--tz', 'Asia/Tokyo', '0 61 * * *'], '0 61 * * *', 2, 'hours are 0-23'),
            (['CRON_TZ=Mars/X @daily'], 'CRON_TZ=Mars/X @daily', 8, 'unknown time zone'),
            (['0\t0\t*\t*\t*\t8'], '0\t0\t*\t*\t*\t8', 10, 'days of the week'),
            (['* * * *'], '* * * *', 7, 'too few fields')):
        argv = [tool] + args
        res = run(argv)
        got = res.stderr.split('\n')
        caret = '  ' + ''.join('\t' if ch == '\t' else ' ' for ch in expr[:offset]) + '^'
        if (res.returncode != 2 or res.stdout or len(got) != 4 or got[3] != '' or
                not got[0].startswith('tw-cron: ') or reason not in got[0] or
                got[1] != '  ' + expr or got[2] != caret):
            fail('status 2, the reason, the expression and a caret at byte %d expected'
                 % offset, argv, res)
    # the fire times
    for args, want in (
            (['0 */5 * * * *', '--count', '3', '--tz', 'Asia/Tokyo', '--after',
              '2026-03-29T00:58:00Z'],
             ['2026-03-29T10:00:00+09:00', '2026-03-29T10:05:00+09:00',
              '2026-03-29T10:10:00+09:00']),
            # the clock set forward: 02:30 does not occur, the job runs at the jump
            (['CRON_TZ=Europe/Berlin 0 30 2 * * *', '--count', '3', '--after', '1774656000'],
             ['2026-03-28T02:30:00+01:00', '2026-03-29T03:00:00+02:00',
              '2026-03-30T02:30:00+02:00']),
            # a Berlin schedule shown in New York time
            (['CRON_TZ=Europe/Berlin 0 0 12 * * *', '--count', '2', '--tz', 'America/New_York',
              '--after', '2026-03-29 01:30+01:00'],
             ['2026-03-29T06:00:00-04:00', '2026-03-30T06:00:00-04:00']),
            (['@every 150ms', '--tz', 'UTC', '--count', '2', '--after', '-0.5'],
             ['1969-12-31T23:59:59.650+00:00', '1969-12-31T23:59:59.800+00:00'])):
        argv = [tool] + args
        res = run(argv)
        if res.returncode != 0 or res.stderr or res.stdout.splitlines() != want:
            fail('%r expected on stdout' % want, argv, res)
    # no fire time at all, or past 2262: what there is, then one line, status 1
    for args, lines in ((['0 0 30 2 *', '--tz', 'UTC'], 0),
                        (['@yearly', '--tz', 'UTC', '--after', '2260-06-01T00:00:00Z'], 2)):
        argv = [tool] + args
        res = run(argv)
        if (res.returncode != 1 or len(res.stdout.splitlines()) != lines or
                len(res.stderr.splitlines()) != 1 or 'no more fire times' not in res.stderr):
            fail('status 1, %d times and one line on stderr expected' % lines, argv, res)
    # after now by default
    argv = [tool, '@every 1s', '--tz', 'UTC', '--count', '1']
    res = run(argv)
    try:
        when = datetime.fromisoformat(res.stdout.strip())
    except ValueError:
        fail('one ISO 8601 time expected', argv, res)
    if res.returncode != 0 or abs((when - datetime.now(timezone.utc)).total_seconds()) > 30:
        fail('a time about a second from now expected', argv, res)
    if os.path.exists('/dev/full'):
        with open('/dev/full', 'w') as full:
            res = run(argv, stdout=full)
        if res.returncode == 0 or not res.stderr:
            fail('output into a full disk: a non-zero status and a message expected', argv, res)


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    version, jitter, showcase, perf, cron, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    check_jitter(jitter, version, work)
    check_showcase(showcase, version, work)
    check_perf(perf, version, work)
    check_cron(cron, version, work)
    print('check_cli: ok: tw-jitter, tw-showcase, tw-perf, tw-cron')


if __name__ == '__main__':
    main()
