/*
 * test_cron_conformance.c - every row of conformance.tsv (made by
 * gen_conformance.py with Debian's python3-croniter, an implementation
 * written apart from this one): the expression, its zone and a start time,
 * and the next five fire times croniter gave. The path comes from
 * TW_CONFORMANCE (tests/calendar/meson.build sets it).
 *
 * Columns, tab-separated: expression (as tw_cron_parse takes it, with its
 * CRON_TZ= prefix), start (unix seconds), the fire times (unix seconds), then
 * a column starting with '#' that says the same for people.
 */
#include "cron_test.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_TIMES = 16 };

Test(cron_conformance, every_row_of_the_table)
{
	const char *path = getenv("TW_CONFORMANCE");
	cr_assert_not_null(path, "TW_CONFORMANCE names the table");
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	char line[1024];
	int rows = 0, lineno = 0, zoned = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		line[strcspn(line, "\n")] = '\0';
		char *save, *expr = strtok_r(line, "\t", &save),
			    *start = strtok_r(NULL, "\t", &save);
		cr_assert(expr && start, "%s:%d: expression and start expected", path, lineno);
		int64_t want[MAX_TIMES];
		size_t n = 0;
		for (char *tok; (tok = strtok_r(NULL, "\t", &save)) != NULL && tok[0] != '#';) {
			cr_assert_lt(n, MAX_TIMES, "%s:%d: too many times", path, lineno);
			want[n++] = strtoll(tok, NULL, 10) * NS;
		}
		cr_assert_gt(n, 0, "%s:%d: no times", path, lineno);
		tw_cron *c = parse_ok(expr);
		int64_t got[MAX_TIMES];
		int rc = tw_cron_next(c, strtoll(start, NULL, 10) * NS, got, n);
		cr_assert_eq(rc, TW_OK, "%s:%d: '%s': %s", path, lineno, expr, tw_strerror(rc));
		for (size_t i = 0; i < n; i++) {
			char a[40], b[40];
			cr_assert_eq(got[i], want[i], "%s:%d: '%s' time %zu: %s, croniter %s", path,
				     lineno, expr, i, utc_text(got[i], a, sizeof a),
				     utc_text(want[i], b, sizeof b));
		}
		tw_cron_free(c);
		zoned += strncmp(expr, "CRON_TZ=UTC ", 12) != 0;
		rows++;
	}
	cr_assert_eq(fclose(f), 0);
	cr_assert_geq(rows, 150, "%s: %d rows, 150 or more expected", path, rows);
	cr_assert_geq(zoned, rows / 2, "%d of %d rows in zones other than UTC", zoned, rows);
}
