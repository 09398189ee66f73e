/*
 * tw-cluster - what etcd holds of a tickwheel cluster: its members, who owns each group (with
 * the owner's fencing token), and each job's schedule and last claimed fire time, read in one
 * etcd transaction through tw_cluster_view_read (api/tickwheel_cluster.h, public API only):
 *
 *   tw-cluster --endpoints http://127.0.0.1:2379 --prefix /gw/
 *   tw-cluster jobs --endpoints http://10.0.0.5:2379,http://10.0.0.6:2379
 *
 * Exit status 0; 1 when etcd cannot be read; 2 on a bad command line.
 */
#include "cli.h"
#include "tickwheel_cluster.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "tw-cluster"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: tw-cluster [members|groups|jobs|all] [--endpoints URLS] [--prefix PREFIX]\n"
		"                  [--timeout DURATION]\n"
		"       tw-cluster -h | --help | --version\n"
		"\n"
		"Prints what etcd holds of a tickwheel cluster (api/tickwheel_cluster.h): the live\n"
		"members, each group's owner and fencing token, each job's schedule and the last fire\n"
		"time claimed. Default: all.\n"
		"\n"
		"  --endpoints URLS   etcd client URLs, comma-separated (default\n"
		"                     http://127.0.0.1:2379, or $TW_CLUSTER_ENDPOINTS)\n"
		"  --prefix PREFIX    the cluster's key prefix (default /tickwheel/)\n"
		"  --timeout DURATION the request's limit (default 2s)\n"
		"  -h, --help         this text\n"
		"  --version          the version\n"
		"\n"
		"Exit status: 0; 1 when etcd cannot be read; 2 on a bad command line.\n");
}

enum { OPT_ENDPOINTS = 1, OPT_PREFIX, OPT_TIMEOUT };

static void print_time(int64_t ms)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char buf[32];
	gmtime_r(&s, &tm);
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
	printf("%s.%03dZ", buf, (int)(ms % 1000));
}

int main(int argc, char **argv)
{
	static const struct cli_option options[] = {
		{ "--endpoints", OPT_ENDPOINTS, true },
		{ "--prefix", OPT_PREFIX, true },
		{ "--timeout", OPT_TIMEOUT, true },
		{ NULL, 0, false },
	};
	const char *endpoints_text = getenv("TW_CLUSTER_ENDPOINTS");
	const char *prefix = "/tickwheel/", *what = "all";
	uint64_t timeout_ms = 2000;
	struct cli c;
	cli_init(&c, PROG, usage, options, argc, argv, 1);
	for (int id; (id = cli_next(&c)) != CLI_END;) {
		switch (id) {
		case OPT_ENDPOINTS:
			endpoints_text = c.value;
			break;
		case OPT_PREFIX:
			if (strlen(c.value) == 0 || strlen(c.value) > 128)
				cli_bad_value(PROG, "--prefix", c.value, "1 to 128 bytes");
			prefix = c.value;
			break;
		case OPT_TIMEOUT:
			timeout_ms = cli_ms(PROG, "--timeout", c.value, 1, 600000);
			break;
		case CLI_ARGUMENT:
			if (strcmp(c.value, "members") && strcmp(c.value, "groups") &&
			    strcmp(c.value, "jobs") && strcmp(c.value, "all"))
				cli_fail(PROG, "unknown command '%s'", c.value);
			what = c.value;
			break;
		}
	}
	char *list = strdup(endpoints_text && *endpoints_text ? endpoints_text :
								"http://127.0.0.1:2379");
	const char *endpoints[TW_CLUSTER_ENDPOINTS_MAX + 1] = { 0 };
	size_t n = 0;
	char *save = NULL;
	for (char *url = strtok_r(list, ",", &save); url; url = strtok_r(NULL, ",", &save)) {
		if (n == TW_CLUSTER_ENDPOINTS_MAX)
			cli_bad_value(PROG, "--endpoints", endpoints_text, "more than %d URLs",
				      TW_CLUSTER_ENDPOINTS_MAX);
		endpoints[n++] = url;
	}
	if (n == 0)
		cli_bad_value(PROG, "--endpoints", endpoints_text ? endpoints_text : "", "no URL");
	tw_cluster_view *v;
	int rc = tw_cluster_view_read(endpoints, prefix, (unsigned)timeout_ms, &v);
	if (rc != TW_OK) {
		fprintf(stderr, "%s: %s: %s\n", PROG,
			endpoints_text ? endpoints_text : endpoints[0], tw_cluster_strerror(rc));
		free(list);
		return 1;
	}
	bool all = strcmp(what, "all") == 0;
	if (all)
		printf("prefix %s, etcd revision %" PRId64 ", %u groups\n", prefix, v->revision,
		       v->groups);
	if (all || strcmp(what, "members") == 0) {
		printf("%smembers (%zu)\n", all ? "\n" : "", v->nmembers);
		for (size_t i = 0; i < v->nmembers; i++)
			printf("  %s\n", v->members[i]);
	}
	if (all || strcmp(what, "groups") == 0) {
		printf("%sgroup  owner                            token\n", all ? "\n" : "");
		for (unsigned g = 0; g < v->groups; g++) {
			if (v->group[g].owner)
				printf("  %4u  %-32s %" PRIu64 "\n", g, v->group[g].owner,
				       v->group[g].token);
			else
				printf("  %4u  %-32s -\n", g, "(free)");
		}
	}
	if (all || strcmp(what, "jobs") == 0) {
		printf("%sjob                              group  last claimed fire time   schedule\n",
		       all ? "\n" : "");
		for (size_t i = 0; i < v->njobs; i++) {
			const tw_cluster_job_view *j = &v->jobs[i];
			printf("  %-32s %5u  ", j->name, j->group);
			if (j->last_fire_ms == INT64_MIN)
				printf("%-24s", "-");
			else
				print_time(j->last_fire_ms);
			printf(" %s\n", j->schedule);
		}
	}
	tw_cluster_view_free(v);
	free(list);
	return 0;
}
