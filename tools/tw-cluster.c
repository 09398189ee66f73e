/*
 * tw-cluster - what etcd holds of a tickwheel cluster: its members, who owns each group (with
 * the owner's fencing token), each job's schedule and last claimed fire time, and its deferred
 * tasks: counted, one key's state, the dead letters, and a dead letter put back. Through
 * api/tickwheel_cluster.h only (tw_cluster_view_read, tw_cluster_task_read, ...):
 *
 *   tw-cluster --endpoints http://127.0.0.1:2379 --prefix /gw/
 *   tw-cluster jobs --endpoints http://10.0.0.5:2379,http://10.0.0.6:2379
 *   tw-cluster task order:1234
 *   tw-cluster dead --limit 50
 *   tw-cluster requeue order:1234
 *
 * Exit status 0; 1 when etcd cannot be read or refuses the request; 2 on a bad command line.
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
		"usage: tw-cluster [members|groups|jobs|all] [OPTIONS]\n"
		"       tw-cluster task KEY [OPTIONS]\n"
		"       tw-cluster dead [--after KEY] [--limit N] [OPTIONS]\n"
		"       tw-cluster requeue KEY [--due-ms MS] [OPTIONS]\n"
		"       tw-cluster -h | --help | --version\n"
		"\n"
		"Prints what etcd holds of a tickwheel cluster (api/tickwheel_cluster.h): the live\n"
		"members, each group's owner and fencing token, each job's schedule and the last fire\n"
		"time claimed, and how many deferred tasks there are. Default: all.\n"
		"\n"
		"  task KEY           the deferred task KEY: pending, claimed (by whom, which attempt)\n"
		"                     and its dead letter, if any\n"
		"  dead               the dead letters (tasks whose attempts were used up), in key\n"
		"                     order\n"
		"  requeue KEY        puts the dead letter KEY back as a pending task with no attempts\n"
		"                     made; refused while a live task has the key\n"
		"\n"
		"  --endpoints URLS   etcd client URLs, comma-separated (default\n"
		"                     http://127.0.0.1:2379, or $TW_CLUSTER_ENDPOINTS)\n"
		"  --prefix PREFIX    the cluster's key prefix (default /tickwheel/)\n"
		"  --timeout DURATION each request's limit (default 2s)\n"
		"  --after KEY        dead: start after this key (the last of the previous page)\n"
		"  --limit N          dead: at most N (default 1000)\n"
		"  --due-ms MS        requeue: the due, UTC ms since the epoch (default 0: now)\n"
		"  -h, --help         this text\n"
		"  --version          the version\n"
		"\n"
		"Exit status: 0; 1 when etcd cannot be read or refuses the request (requeue: no such\n"
		"dead letter, or a live task has the key); 2 on a bad command line.\n");
}

enum { OPT_ENDPOINTS = 1, OPT_PREFIX, OPT_TIMEOUT, OPT_AFTER, OPT_LIMIT, OPT_DUE };

struct args {
	const char *endpoints[TW_CLUSTER_ENDPOINTS_MAX + 1];
	const char *endpoints_text, *prefix, *what, *key, *after;
	unsigned timeout_ms;
	uint64_t limit, due_ms;
	bool has_after, has_limit, has_due;
};

static void print_time(int64_t ms)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char buf[32];
	gmtime_r(&s, &tm);
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
	printf("%s.%03dZ", buf, (int)(ms % 1000));
}

static int failed(const struct args *a, const char *what, int rc)
{
	fprintf(stderr, "%s: %s%s%s: %s\n", PROG, what ? what : "", what ? " " : "",
		a->endpoints_text ? a->endpoints_text : a->endpoints[0], tw_cluster_strerror(rc));
	return 1;
}

/* A task key as the library takes it: printable ASCII without space. */
static const char *key_arg(const char *option, const char *text)
{
	size_t n = strlen(text);
	if (n == 0 || n > TW_CLUSTER_KEY_MAX)
		cli_bad_value(PROG, option, text, "1 to %d bytes", TW_CLUSTER_KEY_MAX);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)text[i] < 0x21 || (unsigned char)text[i] > 0x7e)
			cli_bad_value(PROG, option, text, "printable ASCII without spaces");
	return text;
}

static int show_view(const struct args *a)
{
	tw_cluster_view *v;
	int rc = tw_cluster_view_read(a->endpoints, a->prefix, a->timeout_ms, &v);
	if (rc != TW_OK)
		return failed(a, NULL, rc);
	bool all = strcmp(a->what, "all") == 0;
	if (all) {
		printf("prefix %s, etcd revision %" PRId64 ", %u groups\n", a->prefix, v->revision,
		       v->groups);
		printf("deferred tasks: %" PRIu64 " live (%" PRIu64 " claimed), %" PRIu64
		       " dead letters\n",
		       v->tasks, v->tasks_claimed, v->dead);
	}
	if (all || strcmp(a->what, "members") == 0) {
		printf("%smembers (%zu)\n", all ? "\n" : "", v->nmembers);
		for (size_t i = 0; i < v->nmembers; i++)
			printf("  %s\n", v->members[i]);
	}
	if (all || strcmp(a->what, "groups") == 0) {
		printf("%sgroup  owner                            token\n", all ? "\n" : "");
		for (unsigned g = 0; g < v->groups; g++) {
			if (v->group[g].owner)
				printf("  %4u  %-32s %" PRIu64 "\n", g, v->group[g].owner,
				       v->group[g].token);
			else
				printf("  %4u  %-32s -\n", g, "(free)");
		}
	}
	if (all || strcmp(a->what, "jobs") == 0) {
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
	return 0;
}

/* The payload as C escapes would write it, cut after 200 bytes. */
static void print_payload(const tw_cluster_task_view *t)
{
	const unsigned char *p = t->payload;
	size_t shown = t->payload_len < 200 ? t->payload_len : 200;
	printf("  payload     %zu bytes: \"", t->payload_len);
	for (size_t i = 0; i < shown; i++) {
		if (p[i] == '"' || p[i] == '\\')
			printf("\\%c", p[i]);
		else if (p[i] == '\n')
			printf("\\n");
		else if (p[i] >= 0x20 && p[i] < 0x7f)
			putchar(p[i]);
		else
			printf("\\x%02x", p[i]);
	}
	printf("\"%s\n", shown < t->payload_len ? "..." : "");
}

static void print_task(const tw_cluster_task_view *t)
{
	static const char *const states[] = { "?", "pending", "claimed", "dead letter" };
	printf("%s: %s, kind %s, group %u\n", t->key, states[t->state <= 3 ? t->state : 0], t->kind,
	       t->group);
	printf("  due         ");
	print_time(t->due_ms);
	printf(" (%" PRId64 ")%s\n", t->due_ms,
	       t->state == TW_CLUSTER_TASK_DEAD ? ", its last attempt's" : "");
	if (t->state == TW_CLUSTER_TASK_CLAIMED)
		printf("  claimed     attempt %u of %u, by %s with token %" PRIu64 "\n", t->attempt,
		       t->max_attempts, t->claimed_by, t->token);
	else
		printf("  attempts    %u of %u made\n", t->attempt, t->max_attempts);
	printf("  backoff     %u ms, doubled after each failed attempt\n", t->backoff_ms);
	if (t->state == TW_CLUSTER_TASK_DEAD)
		printf("  last code   %d (the last attempt's handler returned it)\n", t->last_code);
	print_payload(t);
}

static int show_task(const struct args *a)
{
	tw_cluster_task_list *l;
	int rc = tw_cluster_task_read(a->endpoints, a->prefix, a->timeout_ms, a->key, &l);
	if (rc == -TW_ENOTFOUND) {
		fprintf(stderr, "%s: no cluster under %s (no replica ever joined)\n", PROG,
			a->prefix);
		return 1;
	}
	if (rc != TW_OK)
		return failed(a, "task", rc);
	if (l->count == 0)
		printf("%s: no task and no dead letter (never deferred, done, or cancelled)\n",
		       a->key);
	for (size_t i = 0; i < l->count; i++)
		print_task(&l->tasks[i]);
	tw_cluster_task_list_free(l);
	return 0;
}

static int show_dead(const struct args *a)
{
	tw_cluster_task_list *l;
	int rc = tw_cluster_dead_read(a->endpoints, a->prefix, a->timeout_ms, a->after,
				      (size_t)a->limit, &l);
	if (rc == -TW_ENOTFOUND) {
		fprintf(stderr, "%s: no cluster under %s (no replica ever joined)\n", PROG,
			a->prefix);
		return 1;
	}
	if (rc != TW_OK)
		return failed(a, "dead", rc);
	printf("dead letters (%zu%s)\n", l->count, l->more ? ", more follow" : "");
	if (l->count)
		printf("  %-32s %-20s %8s %9s  %s\n", "key", "kind", "attempts", "last code",
		       "last due");
	for (size_t i = 0; i < l->count; i++) {
		const tw_cluster_task_view *t = &l->tasks[i];
		printf("  %-32s %-20s %8u %9d  ", t->key, t->kind, t->attempt, t->last_code);
		print_time(t->due_ms);
		printf("\n");
	}
	if (l->more && l->count)
		printf("next page: tw-cluster dead --after %s\n", l->tasks[l->count - 1].key);
	tw_cluster_task_list_free(l);
	return 0;
}

static int requeue(const struct args *a)
{
	int rc = tw_cluster_requeue(a->endpoints, a->prefix, a->timeout_ms, a->key,
				    (int64_t)a->due_ms);
	if (rc == -TW_ENOTFOUND || rc == -TW_EEXIST) {
		fprintf(stderr, "%s: requeue %s: %s\n", PROG, a->key,
			rc == -TW_EEXIST ? "a live task has the key; the dead letter stays" :
					   "no dead letter has the key");
		return 1;
	}
	if (rc != TW_OK)
		return failed(a, "requeue", rc);
	printf("%s: re-queued, due ", a->key);
	if (a->due_ms)
		print_time((int64_t)a->due_ms);
	else
		printf("now");
	printf("\n");
	return 0;
}

static bool is(const char *a, const char *b)
{
	return a && strcmp(a, b) == 0;
}

static void parse(struct args *a, int argc, char **argv)
{
	static const struct cli_option options[] = {
		{ "--endpoints", OPT_ENDPOINTS, true },
		{ "--prefix", OPT_PREFIX, true },
		{ "--timeout", OPT_TIMEOUT, true },
		{ "--after", OPT_AFTER, true },
		{ "--limit", OPT_LIMIT, true },
		{ "--due-ms", OPT_DUE, true },
		{ NULL, 0, false },
	};
	struct cli c;
	cli_init(&c, PROG, usage, options, argc, argv, 1);
	for (int id; (id = cli_next(&c)) != CLI_END;) {
		switch (id) {
		case OPT_ENDPOINTS:
			a->endpoints_text = c.value;
			break;
		case OPT_PREFIX:
			if (strlen(c.value) == 0 || strlen(c.value) > 128)
				cli_bad_value(PROG, "--prefix", c.value, "1 to 128 bytes");
			a->prefix = c.value;
			break;
		case OPT_TIMEOUT:
			a->timeout_ms = (unsigned)cli_ms(PROG, "--timeout", c.value, 1, 600000);
			break;
		case OPT_AFTER:
			a->after = key_arg("--after", c.value);
			a->has_after = true;
			break;
		case OPT_LIMIT:
			a->limit = cli_count(PROG, "--limit", c.value, 1, 1000000);
			a->has_limit = true;
			break;
		case OPT_DUE:
			a->due_ms = cli_count(PROG, "--due-ms", c.value, 0, (uint64_t)1 << 50);
			a->has_due = true;
			break;
		case CLI_ARGUMENT:
			if (a->what && (is(a->what, "task") || is(a->what, "requeue")) && !a->key) {
				a->key = key_arg("KEY", c.value);
				break;
			}
			if (a->what)
				cli_fail(PROG, "one command only: '%s' after '%s'", c.value,
					 a->what);
			if (!is(c.value, "members") && !is(c.value, "groups") &&
			    !is(c.value, "jobs") && !is(c.value, "all") && !is(c.value, "task") &&
			    !is(c.value, "dead") && !is(c.value, "requeue"))
				cli_fail(PROG, "unknown command '%s'", c.value);
			a->what = c.value;
			break;
		}
	}
	if (!a->what)
		a->what = "all";
	if ((is(a->what, "task") || is(a->what, "requeue")) && !a->key)
		cli_fail(PROG, "%s: which KEY?", a->what);
	if ((a->has_after || a->has_limit) && !is(a->what, "dead"))
		cli_fail(PROG, "--after and --limit go with 'dead' only");
	if (a->has_due && !is(a->what, "requeue"))
		cli_fail(PROG, "--due-ms goes with 'requeue' only");
}

int main(int argc, char **argv)
{
	struct args a = { .endpoints_text = getenv("TW_CLUSTER_ENDPOINTS"),
			  .prefix = "/tickwheel/",
			  .timeout_ms = 2000 };
	parse(&a, argc, argv);
	char *list = strdup(a.endpoints_text && *a.endpoints_text ? a.endpoints_text :
								    "http://127.0.0.1:2379");
	if (!list) {
		fprintf(stderr, "%s: out of memory\n", PROG);
		return 1;
	}
	size_t n = 0;
	char *save = NULL;
	for (char *url = strtok_r(list, ",", &save); url; url = strtok_r(NULL, ",", &save)) {
		if (n == TW_CLUSTER_ENDPOINTS_MAX)
			cli_bad_value(PROG, "--endpoints", a.endpoints_text, "more than %d URLs",
				      TW_CLUSTER_ENDPOINTS_MAX);
		a.endpoints[n++] = url;
	}
	if (n == 0)
		cli_bad_value(PROG, "--endpoints", a.endpoints_text ? a.endpoints_text : "",
			      "no URL");
	int rc = is(a.what, "task")    ? show_task(&a) :
		 is(a.what, "dead")    ? show_dead(&a) :
		 is(a.what, "requeue") ? requeue(&a) :
					 show_view(&a);
	free(list);
	return rc;
}
