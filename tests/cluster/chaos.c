/*
 * tests/cluster/chaos.c - the cluster under faults, end to end: a 3-member etcd on 127.0.0.1
 * (etcd_harness), CHAOS_REPLICAS replica processes (chaos_replica) running the jobs of
 * chaos_jobs.h, and a seeded schedule of faults for TW_CHAOS_SECONDS (default 40): an owner
 * killed (SIGKILL) and restarted, an owner paused past its TTL (SIGSTOP, SIGCONT), the etcd
 * leader killed and restarted, an etcd member paused (a slow member), a replica stopped
 * gracefully and restarted.
 *
 * Then a checker reads every run the replicas logged and every write the fenced resource took
 * or refused, and fails the test when a fire time ran twice, a run started before its fire
 * time, the resource took a write with a token below one it had taken, or a fire time was
 * missed outside a fault's window. It prints the takeover times (fault to the first run by
 * another replica), p50 and p99.
 *
 * The replicas also defer tasks, cancel and move some, and run them (chaos_defer.h); after
 * the faults, the driver waits for every task to end, all replicas alive, and
 * chaos_defer_check.c proves that none was lost, ran early, ran after its cancel or ran twice
 * but after a lost owner. TW_CHAOS_DEFERS sets how many tasks a 30 s run defers (default
 * CHAOS_DEFERS_PER_30S; 0: none).
 *
 *   chaos PATH_TO_chaos_replica    (TW_CHAOS_SECONDS, TW_CHAOS_SEED, TW_CHAOS_KINDS: see inject)
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chaos_defer.h"
#include "chaos_jobs.h"
#include "etcd_harness.h"
#include "tickwheel_cluster.h"

#define CHAOS_REPLICAS  5
#define MAX_RUNS        400000
#define MAX_FAULTS      64
#define CHAOS_ENDPOINTS 9

struct run {
	int job;
	int64_t fire_ms, start_ms;
	uint64_t token, missed;
	int replica;
};

static char dir[256], sock_path[300], endpoints[1024];
static const char *replica_bin;
static pid_t replica_pid[CHAOS_REPLICAS];
static struct chaos_fault faults[MAX_FAULTS];
static int nfaults;
static unsigned errors;
static int64_t started_ms;

static struct {
	pthread_t thread;
	atomic_bool stop;
	int fd;
	uint64_t highest[CHAOS_JOBS];
	unsigned accepted, refused, stale_accepted;
} resource;

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (errors < 30) {
		fputs("chaos: FAIL: ", stdout);
		vprintf(fmt, ap);
		putchar('\n');
	}
	va_end(ap);
	errors++;
}

static int job_index(const char *name)
{
	int i;
	return sscanf(name, "job%d", &i) == 1 && i >= 0 && i < CHAOS_JOBS ? i : -1;
}

/* The fenced resource: takes a write only with a token at least the highest it took for the
 * job, as a database's conditional write would. */
static void *resource_main(void *arg)
{
	(void)arg;
	char buf[256];
	while (!atomic_load(&resource.stop)) {
		ssize_t n = recv(resource.fd, buf, sizeof buf - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		char job[32];
		int64_t fire;
		uint64_t token;
		if (sscanf(buf, "%31s %" SCNd64 " %" SCNu64, job, &fire, &token) != 3)
			continue;
		int j = job_index(job);
		if (j < 0)
			continue;
		if (token >= resource.highest[j]) {
			resource.highest[j] = token;
			resource.accepted++;
		} else {
			resource.refused++;
			printf("chaos: the resource refused a stale write: %s", buf);
		}
	}
	return NULL;
}

static int start_resource(void)
{
	resource.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (strlen(sock_path) >= sizeof a.sun_path)
		return -1;
	memcpy(a.sun_path, sock_path, strlen(sock_path) + 1);
	struct timeval tv = { 0, 100000 };
	if (resource.fd < 0 || bind(resource.fd, (struct sockaddr *)&a, sizeof a) != 0 ||
	    setsockopt(resource.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
		return -1;
	return pthread_create(&resource.thread, NULL, resource_main, NULL) == 0 ? 0 : -1;
}

static void spawn_replica(int r)
{
	char member[16], log[300];
	snprintf(member, sizeof member, "r%d", r);
	snprintf(log, sizeof log, "%s/r%d.log", dir, r);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(replica_bin, replica_bin, endpoints, member, "/chaos/", sock_path, log,
		      (char *)NULL);
		_exit(127);
	}
	replica_pid[r] = pid;
}

static void end_replica(int r, int sig)
{
	if (replica_pid[r] <= 0)
		return;
	kill(replica_pid[r], sig);
	if (sig == SIGSTOP)
		return;
	int status;
	for (int i = 0; i < 1000; i++) {
		if (waitpid(replica_pid[r], &status, WNOHANG) == replica_pid[r]) {
			if (sig == SIGTERM && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
				fail("replica r%d ended with status %d on SIGTERM", r, status);
			replica_pid[r] = 0;
			return;
		}
		sleep_ms(10);
	}
	fail("replica r%d did not end within 10 s of signal %d", r, sig);
	kill(replica_pid[r], SIGKILL);
	waitpid(replica_pid[r], &status, 0);
	replica_pid[r] = 0;
}

static void add_fault(const char *what, int replica, int64_t at, int64_t window_ms, bool lost)
{
	if (nfaults < MAX_FAULTS)
		faults[nfaults++] = (struct chaos_fault){ what, replica, at, at + window_ms, lost };
	printf("chaos: %+6.1f s %s%s%d\n", (double)(at - started_ms) / 1000, what,
	       replica >= 0 ? " r" : " etcd m", replica >= 0 ? replica : -replica - 1);
}

/* What the replicas' logs add to the faults' windows: a graceful restart lasts until the
 * replica defined its jobs again (the groups it took before missed theirs) and the groups it
 * takes back from the others were handed over (2.5 s, as the restart's own), and a replica's
 * self-fence (its lease not confirmed in time: etcd too slow) is a window of its own, as the
 * library promises to run nothing then. */
static void windows_from_logs(void)
{
	int nbefore = nfaults;
	for (int r = 0; r < CHAOS_REPLICAS; r++) {
		char path[320], line[512];
		snprintf(path, sizeof path, "%s/r%d.log.defer", dir, r);
		FILE *f = fopen(path, "r");
		int64_t fenced_at = 0;
		while (f && fgets(line, sizeof line, f)) {
			long long ns;
			int level, off = 0;
			if (sscanf(line, "L %lld %d %n", &ns, &level, &off) != 2 || !off)
				continue;
			int64_t t = ns / 1000000;
			const char *msg = line + off;
			if (strstr(msg, "chaos: jobs added")) {
				for (int i = 0; i < nbefore; i++)
					if (faults[i].replica == r &&
					    strcmp(faults[i].what, "graceful restart") == 0 &&
					    faults[i].at_ms <= t &&
					    faults[i].window_end_ms < t + 2500 &&
					    t - faults[i].at_ms < 30000)
						faults[i].window_end_ms = t + 2500;
			} else if (strstr(msg, ": fenced, no cluster run")) {
				fenced_at = t;
			} else if (strstr(msg, "running again") && fenced_at) {
				add_fault("self-fence (etcd slow)", r, fenced_at,
					  t - fenced_at + 1000, false);
				fenced_at = 0;
			}
		}
		if (fenced_at)
			add_fault("self-fence (etcd slow)", r, fenced_at, 60000, false);
		if (f)
			fclose(f);
	}
}

/* The kinds of fault, in the order of TW_CHAOS_KINDS's letters: k (kill -9 a replica), p
 * (SIGSTOP a replica past its TTL), l (kill -9 the etcd leader), s (SIGSTOP an etcd member for
 * a while), g (a graceful restart). */
static const char *kinds = "kplsg";

static void inject(etcd_harness *h, unsigned *seed)
{
	char kind = kinds[rand_r(seed) % strlen(kinds)];
	int r = (int)(rand_r(seed) % CHAOS_REPLICAS);
	int64_t ttl_ms = CHAOS_TTL_S * 1000, now = wall_ms();
	switch (kind) {
	case 'k':
		add_fault("kill -9", r, now, ttl_ms + 2500, true);
		end_replica(r, SIGKILL);
		sleep_ms(1000);
		spawn_replica(r);
		break;
	case 'p': {
		unsigned paused = (unsigned)ttl_ms + 1500;
		add_fault("SIGSTOP past the TTL", r, now, paused + ttl_ms + 2500, true);
		kill(replica_pid[r], SIGSTOP);
		sleep_ms(paused);
		kill(replica_pid[r], SIGCONT);
		break;
	}
	case 's': {
		/* A slow member: requests to it time out, and clients go to the next. */
		int m = (int)(rand_r(seed) % (unsigned)etcd_harness_count(h));
		add_fault("SIGSTOP for 3 s", -m - 1, now, ttl_ms + 5000, false);
		etcd_harness_signal(h, m, SIGSTOP);
		sleep_ms(3000);
		etcd_harness_signal(h, m, SIGCONT);
		if (etcd_harness_wait_healthy(h, m, 15000) != 0)
			fail("etcd member %d did not come back from SIGSTOP", m);
		break;
	}
	case 'l': {
		int leader = etcd_harness_leader(h);
		if (leader < 0)
			leader = 0;
		add_fault("kill -9 the etcd leader", -leader - 1, now, ttl_ms + 4000, false);
		etcd_harness_signal(h, leader, SIGKILL);
		sleep_ms(1500);
		if (etcd_harness_restart(h, leader) != 0 ||
		    etcd_harness_wait_healthy(h, leader, 15000) != 0)
			fail("etcd member %d did not come back", leader);
		break;
	}
	default:
		add_fault("graceful restart", r, now, 2500, false);
		end_replica(r, SIGTERM);
		sleep_ms(300);
		spawn_replica(r);
		break;
	}
}

static int cmp_run(const void *a, const void *b)
{
	const struct run *x = a, *y = b;
	if (x->job != y->job)
		return x->job - y->job;
	return x->fire_ms < y->fire_ms ? -1 : x->fire_ms > y->fire_ms;
}

static size_t read_runs(struct run *runs)
{
	size_t n = 0;
	for (int r = 0; r < CHAOS_REPLICAS; r++) {
		char path[300], job[32], member[16];
		snprintf(path, sizeof path, "%s/r%d.log", dir, r);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		struct run x;
		while (n < MAX_RUNS &&
		       fscanf(f, "%31s %" SCNd64 " %" SCNu64 " %15s %" SCNd64 " %" SCNu64, job,
			      &x.fire_ms, &x.token, member, &x.start_ms, &x.missed) == 6) {
			x.job = job_index(job);
			x.replica = r;
			if (x.job >= 0)
				runs[n++] = x;
		}
		fclose(f);
	}
	return n;
}

static bool in_fault_window(int64_t t)
{
	for (int i = 0; i < nfaults; i++)
		if (t >= faults[i].at_ms - CHAOS_CLAIM_AHEAD_MS && t <= faults[i].window_end_ms)
			return true;
	return false;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static void check(struct run *runs, size_t n, int64_t from_ms, int64_t to_ms)
{
	qsort(runs, n, sizeof *runs, cmp_run);
	unsigned dups = 0, early = 0, missing = 0, missing_in_faults = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && runs[i].job == runs[i - 1].job &&
		    runs[i].fire_ms == runs[i - 1].fire_ms) {
			dups++;
			fail("job%02d at %" PRId64 " ran twice: r%d (token %" PRIu64
			     "), r%d (token %" PRIu64 ")",
			     runs[i].job, runs[i].fire_ms, runs[i - 1].replica, runs[i - 1].token,
			     runs[i].replica, runs[i].token);
		}
		if (runs[i].start_ms < runs[i].fire_ms) {
			early++;
			fail("job%02d at %" PRId64 " started early, at %" PRId64, runs[i].job,
			     runs[i].fire_ms, runs[i].start_ms);
		}
	}
	/* Every fire time of every job from the end of the warm-up to the end of the faults. */
	size_t at = 0;
	for (int j = 0; j < CHAOS_JOBS; j++) {
		char name[32];
		uint64_t period;
		const char *cron;
		chaos_job(j, name, sizeof name, &period, &cron);
		int64_t step = period ? (int64_t)period : 1000;
		while (at < n && runs[at].job < j)
			at++;
		size_t k = at;
		for (int64_t t = (from_ms / step + 1) * step; t <= to_ms; t += step) {
			while (k < n && runs[k].job == j && runs[k].fire_ms < t)
				k++;
			if (k < n && runs[k].job == j && runs[k].fire_ms == t)
				continue;
			missing++;
			if (in_fault_window(t))
				missing_in_faults++;
			else
				fail("job%02d's fire time %" PRId64
				     " (%+.3f s) was missed outside any fault",
				     j, t, (double)(t - from_ms) / 1000);
		}
	}
	/* Accounting: each gap in a job's runs against the missed count its next run reports. */
	unsigned gaps_seen = 0, gaps_accounted = 0;
	for (size_t i = 1; i < n; i++) {
		if (runs[i].job != runs[i - 1].job)
			continue;
		char name[32];
		uint64_t period;
		const char *cron;
		chaos_job(runs[i].job, name, sizeof name, &period, &cron);
		int64_t step = period ? (int64_t)period : 1000;
		uint64_t gap = (uint64_t)((runs[i].fire_ms - runs[i - 1].fire_ms) / step) - 1;
		if (gap == 0)
			continue;
		gaps_seen++;
		if (runs[i].missed >= gap)
			gaps_accounted++;
		else if (getenv("TW_CHAOS_VERBOSE"))
			printf("chaos: job%02d: %" PRIu64 " fire times before %" PRId64
			       " unrun, its run reports %" PRIu64 " missed\n",
			       runs[i].job, gap, runs[i].fire_ms, runs[i].missed);
	}
	printf("chaos: %u gaps in jobs' runs, %u of them reported in full by the next run's "
	       "missed count\n",
	       gaps_seen, gaps_accounted);
	/* Takeovers: after an owner was lost, the first run of each job the lost one ran last
	 * (in runs sorted by fire time), for the jobs with TW_MISFIRE_RUN_ONCE: their taker runs
	 * them at once, so that run's start is when their group was taken (a _SKIP job waits
	 * for its next fire time on top). */
	int64_t takeover[MAX_FAULTS];
	int ntake = 0;
	for (int f = 0; f < nfaults; f++) {
		if (!faults[f].owner_lost)
			continue;
		int64_t worst = -1;
		for (int j = 0; j < CHAOS_JOBS; j += 2) {
			const struct run *last = NULL, *next = NULL;
			for (size_t i = 0; i < n; i++) {
				if (runs[i].job != j)
					continue;
				/* After the fault, the faulted replica runs nothing until it was
				 * restarted or its pause ended and it fenced itself: a run of the
				 * same name then is the new owner's, as any other replica's. */
				if (runs[i].start_ms <= faults[f].at_ms)
					last = &runs[i];
				else if (!next)
					next = &runs[i];
			}
			if (last && last->replica == faults[f].replica && next &&
			    next->start_ms - faults[f].at_ms > worst)
				worst = next->start_ms - faults[f].at_ms;
		}
		if (worst >= 0)
			takeover[ntake++] = worst;
	}
	qsort(takeover, (size_t)ntake, sizeof takeover[0], cmp_i64);
	printf("chaos: %zu runs; %u ran twice, %u early; %u fire times missed, all %s fault "
	       "windows (%u)\n",
	       n, dups, early, missing, missing == missing_in_faults ? "inside" : "NOT inside",
	       missing_in_faults);
	printf("chaos: resource took %u writes, refused %u stale ones\n", resource.accepted,
	       resource.refused);
	if (ntake)
		printf("chaos: takeover after a lost owner (fault to the catch-up run of its jobs), %d "
		       "faults: p50 %" PRId64 " ms, p99 %" PRId64 " ms, max %" PRId64 " ms\n",
		       ntake, takeover[ntake / 2], takeover[(ntake * 99) / 100],
		       takeover[ntake - 1]);
	for (int i = 0; i < ntake; i++)
		if (takeover[i] > CHAOS_TTL_S * 1000 + 1000 + 1500)
			fail("a takeover took %" PRId64 " ms, beyond TTL + 1 s + the pause",
			     takeover[i]);
}

static void remove_dir(void)
{
	if (getenv("TW_CHAOS_KEEP") && strcmp(getenv("TW_CHAOS_KEEP"), "1") == 0) {
		printf("chaos: the logs are kept in %s (TW_CHAOS_KEEP=1)\n", dir);
		return;
	}
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "chaos: could not remove %s\n", dir);
}

/* Until every replica is a member and owns its share of the groups: the checker counts fire
 * times from then on, as a start-up's hand-overs are no fault. 0, or -1 after limit_ms. */
static int wait_settled(const char *const *eps, int64_t limit_ms)
{
	int64_t until = wall_ms() + limit_ms;
	while (wall_ms() < until) {
		tw_cluster_view *v = NULL;
		bool settled = false;
		if (tw_cluster_view_read(eps, "/chaos/", 0, &v) == TW_OK &&
		    v->nmembers == CHAOS_REPLICAS && v->groups == CHAOS_GROUPS) {
			settled = true;
			for (size_t m = 0; m < v->nmembers; m++) {
				unsigned owned = 0, share = CHAOS_GROUPS / CHAOS_REPLICAS +
							    (m < CHAOS_GROUPS % CHAOS_REPLICAS);
				for (unsigned g = 0; g < v->groups; g++)
					owned += v->group[g].owner &&
						 strcmp(v->group[g].owner, v->members[m]) == 0;
				settled &= owned == share;
			}
		}
		tw_cluster_view_free(v);
		if (settled)
			return 0;
		sleep_ms(100);
	}
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: chaos PATH_TO_chaos_replica\n");
		return 2;
	}
	replica_bin = argv[1];
	unsigned seconds =
		getenv("TW_CHAOS_SECONDS") ? (unsigned)atoi(getenv("TW_CHAOS_SECONDS")) : 40;
	unsigned seed = getenv("TW_CHAOS_SEED") ? (unsigned)atoi(getenv("TW_CHAOS_SEED")) :
						  (unsigned)time(NULL);
	if (getenv("TW_CHAOS_KINDS") && *getenv("TW_CHAOS_KINDS") &&
	    strspn(getenv("TW_CHAOS_KINDS"), "kplsg") == strlen(getenv("TW_CHAOS_KINDS")))
		kinds = getenv("TW_CHAOS_KINDS");
	printf("chaos: seed %u (TW_CHAOS_SEED), %u s of faults of kinds %s (TW_CHAOS_KINDS)\n",
	       seed, seconds, kinds);
	snprintf(dir, sizeof dir, "%s/tw-chaos-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	snprintf(sock_path, sizeof sock_path, "%s/resource.sock", dir);
	etcd_harness *h = etcd_harness_start(3);
	if (!h || start_resource() != 0) {
		fprintf(stderr, "chaos: etcd or the resource did not start\n");
		remove_dir();
		return 1;
	}
	const char *const *eps = etcd_harness_endpoints(h);
	for (int i = 0; i < etcd_harness_count(h); i++)
		snprintf(endpoints + strlen(endpoints), sizeof endpoints - strlen(endpoints),
			 "%s%s", i ? "," : "", eps[i]);
	/* The producers defer from the end of the warm-up to the end of the faults. */
	unsigned per_30s = getenv("TW_CHAOS_DEFERS") ? (unsigned)atoi(getenv("TW_CHAOS_DEFERS")) :
						       CHAOS_DEFERS_PER_30S;
	bool defers = per_30s > 0;
	if (defers) {
		char plan[128];
		int64_t at = wall_ms() + 4000;
		snprintf(plan, sizeof plan, "%" PRId64 " %" PRId64 " %u %u", at,
			 at + (int64_t)seconds * 1000, per_30s * seconds / 30 / CHAOS_REPLICAS,
			 seed);
		setenv("TW_CHAOS_DEFER_PLAN", plan, 1);
	}
	for (int r = 0; r < CHAOS_REPLICAS; r++)
		spawn_replica(r);
	if (wait_settled(eps, 60000) != 0)
		fail("the replicas did not settle their groups within 60 s of their start");
	/* A group taken last has its claims ahead made within a round. */
	sleep_ms(1000);
	int64_t from = wall_ms();
	started_ms = from;
	while (wall_ms() - from < (int64_t)seconds * 1000) {
		sleep_ms(2500 + rand_r(&seed) % 2500);
		inject(h, &seed);
	}
	sleep_ms(CHAOS_TTL_S * 1000 + 3000);
	int64_t to = wall_ms() - 1500;
	const char *epv[CHAOS_ENDPOINTS + 1] = { 0 };
	for (int i = 0; i < etcd_harness_count(h) && i < CHAOS_ENDPOINTS; i++)
		epv[i] = eps[i];
	const char *const *eps_z = epv;
	long left = defers ? chaos_defer_drain(eps_z, "/chaos/", CHAOS_DEFER_DRAIN_MS) : 0;
	if (left != 0)
		fail("%ld deferred tasks were left in etcd after the drain", left);
	for (int r = 0; r < CHAOS_REPLICAS; r++)
		end_replica(r, SIGTERM);
	if (defers)
		errors += chaos_defer_check(dir, CHAOS_REPLICAS, faults, nfaults, started_ms, eps_z,
					    "/chaos/");
	atomic_store(&resource.stop, true);
	pthread_join(resource.thread, NULL);
	etcd_harness_stop(h);
	windows_from_logs();
	struct run *runs = malloc(MAX_RUNS * sizeof *runs);
	size_t n = runs ? read_runs(runs) : 0;
	check(runs, n, from, to);
	for (int r = 0; r < CHAOS_REPLICAS; r++) {
		char path[320], line[300];
		snprintf(path, sizeof path, "%s/r%d.log.stats", dir, r);
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof line, f))
			printf("chaos: r%d %s", r, line);
		if (f)
			fclose(f);
	}
	free(runs);
	remove_dir();
	printf("%u passed, %u failed\n", errors ? 0 : 1, errors ? 1 : 0);
	return errors ? 1 : 0;
}
