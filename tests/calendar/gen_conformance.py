#!/usr/bin/python3
"""gen_conformance.py - writes conformance.tsv, the table test_cron_conformance.c checks
tw_cron_next against, from an implementation written apart from ours: Debian's
python3-croniter (apt-get install python3-croniter; Debian's python3, not a pyenv one),
for the fields, and Python's zoneinfo (its own TZif reader) for the zones.

usage: /usr/bin/python3 tests/calendar/gen_conformance.py > tests/calendar/conformance.tsv

Only for writing the table: the test suite and CI read the committed table and need
neither croniter nor this script.

How the times are made. croniter walks the expression in civil (naive) local time from
the start's local time; each civil time croniter gives is then turned into an instant
with zoneinfo. croniter is not asked to handle the zone itself: with an aware start it
gets daylight-saving days wrong on its own terms (in Berlin, '0 12 * * *' from
2026-03-27 gives 11:00+02:00 on 29 March, an hour early), which is its bug, not a
difference of semantics.

Rows left out, each for a difference of documented semantics (the hand-written tests
in test_cron_zones.c and test_cron_parse.c cover them instead):
 - a civil time croniter gives that does not exist that day in the zone (a
   spring-forward gap): croniter runs it in the gap, we fire at the jump (fixed
   schedules) or not at all (wild ones); see "Calendar schedules" in tickwheel.h;
 - a civil time that occurs twice (fall back), or a start inside a repeated hour:
   a wild schedule fires in both passes, which a civil walk cannot say;
 - a schedule whose times croniter gives, turned into instants, are not strictly
   increasing (the same cases, seen from the other side);
 - '?' in a day field: croniter refuses it (we read it as '*');
 - @every: not cron syntax for croniter (test_cron_parse.c covers it).
And rows of croniter 1.3.5's own bugs, found when the table was first checked
(CRONITER_BUGS below; test_cron_next.c checks the right answers by hand).
Nothing else is filtered: whatever croniter and we disagree on otherwise fails the test.
"""
import sys
from datetime import datetime, timezone, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

TIMES = 5

# Our syntax: six fields start with seconds, five do not.
EXPRESSIONS = [
    '* * * * *', '*/5 * * * *', '0 * * * *', '30 2 * * *', '0 0 * * *', '15 14 1 * *',
    '0 22 * * 1-5', '23 0-20/2 * * *', '5 4 * * sun', '0 0,12 1 */2 *', '0 4 8-14 * *',
    '0 0 1,15 * 3', '0 0 29 2 *', '0 0 31 * *', '0 0 30 * *', '59 23 31 12 *', '0 0 1 1 *',
    '0 9 * jan-mar mon', '0 12 * * 7', '0 12 * * 0,7', '1-5 * * * *', '0 */3 * * *',
    '0 0 28-31 * *', '45 23 * * 6', '0 0 */2 * fri', '0 0 13 * fri', '0 8-17 * * mon-fri',
    '10-40/10 * * * *', '5/15 * * * *', '0 0 * jun,dec *', '0 0 29 2 mon', '0 12 29-31 1-3 *',
    '*/15 * * * * *', '0 */5 * * * *', '30 30 2 * * *', '0 0 0 29 2 *', '0 0 12 31 dec *',
    '59 59 23 * * *', '10-40/10 * * * * *', '5/15 * * * * *', '0 0 0 1 jan,jul *',
    '0 0 9 * * Mon-FRI', '0 30 1 * * sat,sun', '7 13 6 1,15 * mon', '0 0 0 */10 * *',
    '0 45 23 28-31 * *', '0 0 0 * * 5-7', '1,2,3 0 0 * * *', '0 0,30 0-5 * * *',
    '0 0 0 1 * 1', '30 * 3 * * *', '0 15 3 * * 0', '0 0 3 25-31 3,10 sun', '0 30 2 * mar,oct *',
    '@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly',
]

# Expressions croniter 1.3.5 gets wrong, in civil time, on some starts.
CRONITER_BUGS = {
    # After 21 February 2024 it gives 11 March: 1 March is one of 1, 11, 21, 31.
    '0 0 0 */10 * *': 'croniter skips the 1st after February with a day-of-month step',
    # From 31 January 2026 (a Saturday) it gives Friday 6 February, not Sunday the 1st.
    '0 0 0 * * 5-7': 'croniter misses Sunday (7) across a month end in a range to 7',
}

ZONES = ['UTC', 'Europe/Berlin', 'America/New_York', 'Australia/Sydney', 'Asia/Kolkata',
         'Asia/Tokyo', 'America/Sao_Paulo', 'Europe/London', 'Australia/Lord_Howe']

# Leap days and the century that has none, month and year ends, the DST days of 2026 in
# both hemispheres, times before 1970 and past the zoneinfo tables' end (2037).
STARTS = ['2023-12-31T23:59:30', '2024-02-27T12:00:00', '2024-02-28T23:00:00',
          '2026-01-30T12:00:00', '2026-03-28T12:00:00', '2026-10-24T12:00:00',
          '2026-04-04T12:00:00', '2100-02-27T12:00:00', '1999-12-31T23:59:59',
          '2027-06-30T23:59:59', '2037-11-01T00:00:00', '2045-03-25T00:00:00',
          '2026-03-07T12:00:00', '2026-10-31T12:00:00', '1969-12-31T23:00:00']


def croniter_form(expr):
    """croniter puts the seconds last."""
    fields = expr.split()
    return ' '.join(fields[1:] + fields[:1]) if len(fields) == 6 else expr


def instant(civil, zone):
    """The instant of a civil time in the zone, or None if it does not occur once."""
    first, second = civil.replace(tzinfo=zone, fold=0), civil.replace(tzinfo=zone, fold=1)
    if first.utcoffset() != second.utcoffset():
        return None  # a gap or a repeat: zoneinfo tells them apart by fold only
    back = first.astimezone(timezone.utc).astimezone(zone).replace(tzinfo=None)
    return first if back == civil else None


def row(expr, start_utc, zone_name):
    zone = ZoneInfo(zone_name)
    start = datetime.fromisoformat(start_utc).replace(tzinfo=timezone.utc)
    civil_start = start.astimezone(zone).replace(tzinfo=None)
    if instant(civil_start, zone) is None:
        return None, 'the start is in a repeated hour'
    it = croniter(croniter_form(expr), civil_start)
    times, last = [], int(start.timestamp())
    for _ in range(TIMES):
        civil = it.get_next(datetime)
        at = instant(civil, zone)
        if at is None:
            return None, '%s does not occur once in %s' % (civil, zone_name)
        t = int(at.timestamp())
        if t <= last:
            return None, 'not increasing at %s' % civil
        times.append(t)
        last = t
    return times, None


def main():
    out = sys.stdout
    out.write('# conformance.tsv - written by tests/calendar/gen_conformance.py (python3-croniter '
              'and zoneinfo): do not edit.\n'
              '# expression<TAB>start (unix s)<TAB>the next %d fire times (unix s)<TAB># '
              'the same in the zone\'s local time\n' % TIMES)
    rows = skipped = 0
    for i, expr in enumerate(EXPRESSIONS):
        for k in range(4):
            start = STARTS[(i * 3 + k * 5) % len(STARTS)]
            zone = ZONES[(i + k * 2) % len(ZONES)]
            times, why = (None, CRONITER_BUGS[expr]) if expr in CRONITER_BUGS else \
                row(expr, start, zone)
            if times is None:
                out.write('# left out: CRON_TZ=%s %s from %sZ: %s\n' % (zone, expr, start, why))
                skipped += 1
                continue
            z = ZoneInfo(zone)
            local = ' '.join(datetime.fromtimestamp(t, z).isoformat() for t in times)
            out.write('CRON_TZ=%s %s\t%d\t%s\t# %sZ -> %s\n' % (
                zone, expr, int(datetime.fromisoformat(start).replace(
                    tzinfo=timezone.utc).timestamp()), '\t'.join(map(str, times)), start, local))
            rows += 1
    print('gen_conformance: %d rows, %d left out' % (rows, skipped), file=sys.stderr)


if __name__ == '__main__':
    main()
