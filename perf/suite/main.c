/*
 * main.c - `tw-perf SCENARIO [options]`: parses the options every scenario
 * shares, runs the scenario, prints its table, writes --json.
 *
 * Exit status: 0 when every target was met (or the scenario has none), 1 when
 * some target was missed, 2 on a usage or set-up error.
 */
#include "loops.h"
#include "suite.h"
#include "tickwheel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct scenario {
	const char *name;
	scenario_fn run;
	const char *what;
};

static const struct scenario scenarios[] = {
	{ "heartbeats", scenario_heartbeats,
	  "N periodic tasks, periods 100-500 ms: lateness, intervals, drift, CPU (with peers)" },
	{ "sessions", scenario_sessions,
	  "N session timeouts reset at R/s by application threads; some expire" },
	{ "churn", scenario_churn,
	  "20 000 tasks, 100 ms to hours, a third rescheduled while running: wake-ups" },
	{ "burst", scenario_burst,
	  "N one-shots due within one second: how late the last one starts (with peers)" },
	{ "idle", scenario_idle, "one 200 ms task: wake-ups per second, CPU (with peers)" },
	{ "stall", scenario_stall,
	  "the process stopped 2 s under periodic tasks: skips, no catch-up burst, phase kept" },
	{ "ops", scenario_ops,
	  "ns per operation of the wheel (with peers) and of the engine API, N = 1k .. 10M" },
	{ "icount", scenario_icount,
	  "instructions per operation, for perf/gate.py under valgrind --tool=callgrind" },
};
enum { SCENARIOS = sizeof scenarios / sizeof scenarios[0] };

static void usage(const char *problem, const char *value)
{
	if (problem)
		fprintf(stderr, "tw-perf: %s%s%s\n", problem, value ? ": " : "",
			value ? value : "");
	fprintf(stderr, "usage: tw-perf SCENARIO [options]\n\nscenarios:\n");
	for (size_t i = 0; i < SCENARIOS; i++)
		fprintf(stderr, "  %-11s %s\n", scenarios[i].name, scenarios[i].what);
	fprintf(stderr,
		"\noptions (each scenario uses those that apply; defaults in perf/README.md):\n"
		"  --tasks N  --seconds S  --period 100-500ms  --sessions N  --rate R\n"
		"  --timeout 30s  --quiet F  --threads N  --executors N  --sizes 1000,100000\n"
		"  --peers libev,libuv|none  --json FILE  --plot DIR  --seed S  --quick\n"
		"  --coarse-clock (sessions: the engine's coarse_clock option)\n"
		"  --reset-many (sessions: each batch of 64 resets is one tw_set_delay_many)\n");
	exit(2);
}

static unsigned long long whole_number(const char *text, const char *option)
{
	char *end;
	unsigned long long n = strtoull(text, &end, 10);
	if (!*text || *end || *text == '-')
		usage(option, "needs a whole number");
	return n;
}

static double real_number(const char *text, const char *option)
{
	char *end;
	double x = strtod(text, &end);
	if (!*text || *end || x < 0)
		usage(option, "needs a number >= 0");
	return x;
}

static uint64_t duration_ms(const char *text, const char *option)
{
	uint64_t ns;
	int rc = tw_parse_duration(text, &ns);
	if (rc) {
		fprintf(stderr, "tw-perf: %s '%s': %s\n", option, text, tw_strerror(rc));
		usage(NULL, NULL);
	}
	return ns / 1000000u;
}

static struct suite_options parse(int argc, char **argv)
{
	struct suite_options o = { .seed = 20240601 };
	for (int i = 0; i < argc; i++) {
		const char *opt = argv[i];
		if (!strcmp(opt, "--quick")) {
			o.quick = true;
			continue;
		}
		if (!strcmp(opt, "--coarse-clock")) {
			o.coarse_clock = true;
			continue;
		}
		if (!strcmp(opt, "--reset-many")) {
			o.reset_many = true;
			continue;
		}
		if (i + 1 >= argc)
			usage("missing value after", opt);
		const char *v = argv[++i];
		if (!strcmp(opt, "--tasks")) {
			o.tasks = whole_number(v, opt);
		} else if (!strcmp(opt, "--seconds")) {
			o.seconds = real_number(v, opt);
		} else if (!strcmp(opt, "--period")) {
			uint64_t lo, hi;
			int rc = tw_parse_duration_range(v, &lo, &hi);
			if (rc || lo < 1000000u) {
				fprintf(stderr, "tw-perf: --period '%s': %s\n", v,
					rc ? tw_strerror(rc) : "at least 1ms");
				usage(NULL, NULL);
			}
			o.period_lo_ms = lo / 1000000u;
			o.period_hi_ms = hi / 1000000u;
		} else if (!strcmp(opt, "--sessions")) {
			o.sessions = whole_number(v, opt);
		} else if (!strcmp(opt, "--rate")) {
			o.rate = real_number(v, opt);
		} else if (!strcmp(opt, "--timeout")) {
			o.timeout_s = (double)duration_ms(v, opt) / 1e3;
		} else if (!strcmp(opt, "--quiet")) {
			o.quiet = real_number(v, opt);
			if (o.quiet > 1)
				usage(opt, "is a fraction, 0 .. 1");
		} else if (!strcmp(opt, "--threads")) {
			o.threads = (unsigned)whole_number(v, opt);
		} else if (!strcmp(opt, "--executors")) {
			o.executors = (unsigned)whole_number(v, opt);
		} else if (!strcmp(opt, "--sizes")) {
			o.sizes = v;
		} else if (!strcmp(opt, "--peers")) {
			o.peers = v;
		} else if (!strcmp(opt, "--json")) {
			o.json = v;
		} else if (!strcmp(opt, "--plot")) {
			o.plot_dir = v;
		} else if (!strcmp(opt, "--seed")) {
			o.seed = whole_number(v, opt);
		} else {
			usage("unknown option", opt);
		}
	}
	return o;
}

bool suite_peer_wanted(const struct suite_options *opt, const char *name)
{
	bool built = false;
	for (size_t i = 1; suite_loops[i] != NULL; i++)
		built |= !strcmp(suite_loops[i]->name, name);
	if (!built || (opt->peers && !strcmp(opt->peers, "none")))
		return false;
	if (!opt->peers)
		return true;
	size_t len = strlen(name);
	for (const char *p = opt->peers; (p = strstr(p, name)) != NULL; p += len)
		if ((p == opt->peers || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
			return true;
	return false;
}

const char *suite_plot_path(const struct suite_options *opt, const char *name)
{
	static char path[4096];
	snprintf(path, sizeof path, "%s/%s", opt->plot_dir ? opt->plot_dir : ".", name);
	return path;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		usage(NULL, NULL);
	const struct scenario *s = NULL;
	for (size_t i = 0; i < SCENARIOS; i++)
		if (!strcmp(argv[1], scenarios[i].name))
			s = &scenarios[i];
	if (!s)
		usage("unknown scenario", argv[1]);
	struct suite_options opt = parse(argc - 2, argv + 2);
	if (opt.plot_dir && mkdir(opt.plot_dir, 0777) && errno != EEXIST) {
		fprintf(stderr, "tw-perf: --plot %s: %s\n", opt.plot_dir, strerror(errno));
		return 2;
	}
	struct report *r = report_open("tw-perf", s->name, argc, argv);
	if (!r) {
		fprintf(stderr, "tw-perf: out of memory\n");
		return 2;
	}
	int rc = s->run(&opt, r);
	if (rc == 0) {
		report_print(r, stdout);
		if (opt.json && report_write_json(r, opt.json))
			rc = 2;
		else if (report_missed(r))
			rc = 1;
	}
	report_free(r);
	return rc;
}
