/*
 * tests/cluster/etcd_harness.c - see etcd_harness.h.
 */
#include "etcd_harness.h"

#include "etcd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_MEMBERS 9
#define START_TRIES 3

typedef struct {
	pid_t pid;
	bool stopped;
	int exit_status; /* waitpid's, once it exited */
	int client_port, peer_port;
	uint64_t id; /* etcd's member id, from its status */
	char endpoint[64];
} member;

struct etcd_harness {
	int n;
	char dir[256];
	char cluster[MAX_MEMBERS * 64];
	member m[MAX_MEMBERS];
	const char *endpoints[MAX_MEMBERS];
	etcd_harness *next; /* the live harnesses, stopped at exit */
};

static etcd_harness *live;
static bool atexit_done;

static int64_t now_ms(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts))
		abort(); /* no bounded wait without it */
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* A port nobody listens on now; another process may take it before etcd does, which the start
 * sees as a member that exits, and retries with new ports. */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int port = -1;
	if (!bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &len))
		port = ntohs(a.sin_port);
	if (close(fd))
		port = -1;
	return port;
}

static void log_tail(const etcd_harness *h, int i)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/m%d.log", h->dir, i);
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "etcd_harness: no log at %s\n", path);
		return;
	}
	char buf[4096];
	size_t n = 0;
	if (!fseek(f, -(long)(sizeof(buf) - 1), SEEK_END) || !fseek(f, 0, SEEK_SET))
		n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	if (fclose(f))
		fprintf(stderr, "etcd_harness: fclose: %s\n", strerror(errno));
	fprintf(stderr, "etcd_harness: the end of %s:\n%s\n", path, buf);
}

static int spawn(etcd_harness *h, int i, bool existing)
{
	member *m = &h->m[i];
	char name[16], data[300], logp[300], client[64], peer[64];
	snprintf(name, sizeof(name), "m%d", i);
	snprintf(data, sizeof(data), "%s/m%d.data", h->dir, i);
	snprintf(logp, sizeof(logp), "%s/m%d.log", h->dir, i);
	snprintf(client, sizeof(client), "http://127.0.0.1:%d", m->client_port);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", m->peer_port);
	const char *bin = getenv("TW_ETCD") ? getenv("TW_ETCD") : "etcd";
	/* Elections in 0.5 s keep a leader's loss short; etcd's lease TTL floor follows
	 * (ceil(1.5 x 500 ms) = 1 s), so 2 s leases still work. */
	const char *argv[] = { bin,
			       "--name",
			       name,
			       "--data-dir",
			       data,
			       "--listen-client-urls",
			       client,
			       "--advertise-client-urls",
			       client,
			       "--listen-peer-urls",
			       peer,
			       "--initial-advertise-peer-urls",
			       peer,
			       "--initial-cluster",
			       h->cluster,
			       "--initial-cluster-state",
			       existing ? "existing" : "new",
			       "--initial-cluster-token",
			       h->dir,
			       "--heartbeat-interval",
			       "50",
			       "--election-timeout",
			       "500",
			       "--snapshot-count",
			       "100000",
			       NULL };
	int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0) {
		fprintf(stderr, "etcd_harness: open %s: %s\n", logp, strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "etcd_harness: fork: %s\n", strerror(errno));
		if (close(logfd))
			fprintf(stderr, "etcd_harness: close: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		/* If the parent died before prctl, no signal will come: leave now. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
			_exit(127);
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
			_exit(127);
		execvp(bin, (char *const *)argv);
		dprintf(2, "etcd_harness: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	if (close(logfd))
		fprintf(stderr, "etcd_harness: close: %s\n", strerror(errno));
	m->pid = pid;
	m->stopped = false;
	return 0;
}

/* Whether member i's process has exited (reaped then). */
static bool exited(etcd_harness *h, int i)
{
	member *m = &h->m[i];
	if (!m->pid)
		return true;
	int status;
	pid_t r = waitpid(m->pid, &status, WNOHANG);
	if (r == m->pid || (r < 0 && errno == ECHILD)) {
		m->exit_status = r == m->pid ? status : 0;
		m->pid = 0;
		return true;
	}
	return false;
}

static int status_of(etcd_harness *h, int i, uint64_t *id, uint64_t *leader)
{
	const char *ep = h->m[i].endpoint;
	etcd_client *c;
	etcd_status st;
	if (tw__etcd_client_create(&ep, 1, 300, &c, &st))
		return -1;
	int rc = tw__etcd_status(c, id, leader, NULL, &st);
	tw__etcd_client_destroy(c);
	return rc;
}

int etcd_harness_wait_healthy(etcd_harness *h, int i, unsigned timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	do {
		uint64_t id, leader;
		if (exited(h, i))
			return -1;
		if (!status_of(h, i, &id, &leader) && leader) {
			h->m[i].id = id;
			return 0;
		}
		sleep_ms(20);
	} while (now_ms() < deadline);
	return -1;
}

static void kill_and_reap(member *m, unsigned grace_ms)
{
	if (!m->pid)
		return;
	if (grace_ms) {
		if (kill(m->pid, SIGTERM) || (m->stopped && kill(m->pid, SIGCONT)))
			fprintf(stderr, "etcd_harness: kill %d: %s\n", m->pid, strerror(errno));
		int64_t deadline = now_ms() + grace_ms;
		while (now_ms() < deadline) {
			pid_t r = waitpid(m->pid, NULL, WNOHANG);
			if (r == m->pid || (r < 0 && errno == ECHILD)) {
				m->pid = 0;
				return;
			}
			sleep_ms(10);
		}
	}
	if (kill(m->pid, SIGKILL) && errno != ESRCH)
		fprintf(stderr, "etcd_harness: kill %d: %s\n", m->pid, strerror(errno));
	while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR)
		;
	m->pid = 0;
	m->stopped = false;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	if (remove(path))
		fprintf(stderr, "etcd_harness: remove %s: %s\n", path, strerror(errno));
	return 0;
}

static void stop_members(etcd_harness *h, unsigned grace_ms)
{
	for (int i = 0; i < h->n; i++)
		kill_and_reap(&h->m[i], grace_ms);
}

void etcd_harness_stop(etcd_harness *h)
{
	if (!h)
		return;
	for (etcd_harness **p = &live; *p; p = &(*p)->next)
		if (*p == h) {
			*p = h->next;
			break;
		}
	stop_members(h, 3000);
	if (nftw(h->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS))
		fprintf(stderr, "etcd_harness: removing %s: %s\n", h->dir, strerror(errno));
	free(h);
}

static void stop_all(void)
{
	while (live)
		etcd_harness_stop(live);
}

/* One attempt with fresh ports: 0, 1 (a member exited: maybe a port was taken; try again),
 * -1 (it does not start: give up). */
static int start_once(etcd_harness *h, int64_t deadline)
{
	size_t off = 0;
	for (int i = 0; i < h->n; i++) {
		member *m = &h->m[i];
		m->client_port = free_port();
		m->peer_port = free_port();
		if (m->client_port < 0 || m->peer_port < 0) {
			fprintf(stderr, "etcd_harness: no free port: %s\n", strerror(errno));
			return -1;
		}
		snprintf(m->endpoint, sizeof(m->endpoint), "http://127.0.0.1:%d", m->client_port);
		h->endpoints[i] = m->endpoint;
		off += (size_t)snprintf(h->cluster + off, sizeof(h->cluster) - off,
					"%sm%d=http://127.0.0.1:%d", i ? "," : "", i, m->peer_port);
	}
	for (int i = 0; i < h->n; i++)
		if (spawn(h, i, false))
			return -1;
	for (int i = 0; i < h->n; i++) {
		int64_t left = deadline - now_ms();
		if (etcd_harness_wait_healthy(h, i, left > 0 ? (unsigned)left : 1) == 0)
			continue;
		bool gone = exited(h, i);
		fprintf(stderr, "etcd_harness: member %d %s\n", i,
			gone ? "exited" : "is not healthy in time");
		log_tail(h, i);
		/* 127: no etcd to run; anything else may be a port taken since free_port. */
		bool no_exec =
			WIFEXITED(h->m[i].exit_status) && WEXITSTATUS(h->m[i].exit_status) == 127;
		return gone && !no_exec ? 1 : -1;
	}
	return 0;
}

/* A test process that crashed left its directory (its members died with it): remove those
 * whose process is gone. The name carries the pid; a pid alive again keeps its directory. */
static void remove_stale(const char *base)
{
	DIR *d = opendir(base);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		int pid, end = 0;
		if (sscanf(e->d_name, "tw-etcdh-%d-%*6[A-Za-z0-9]%n", &pid, &end) != 1 ||
		    e->d_name[end] != '\0' || end == 0 || pid <= 0 || !kill(pid, 0) ||
		    errno != ESRCH)
			continue;
		char path[300];
		snprintf(path, sizeof(path), "%s/%s", base, e->d_name);
		if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS))
			fprintf(stderr, "etcd_harness: removing %s: %s\n", path, strerror(errno));
	}
	if (closedir(d))
		fprintf(stderr, "etcd_harness: closedir %s: %s\n", base, strerror(errno));
}

etcd_harness *etcd_harness_start(int n)
{
	if (n < 1 || n > MAX_MEMBERS) {
		fprintf(stderr, "etcd_harness: %d members asked, 1 to %d possible\n", n,
			MAX_MEMBERS);
		return NULL;
	}
	if (!atexit_done && !atexit(stop_all))
		atexit_done = true;
	etcd_harness *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->n = n;
	struct stat sb;
	const char *base = !stat("/dev/shm", &sb) && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
	remove_stale(base);
	snprintf(h->dir, sizeof(h->dir), "%s/tw-etcdh-%d-XXXXXX", base, (int)getpid());
	if (!mkdtemp(h->dir)) {
		fprintf(stderr, "etcd_harness: mkdtemp %s: %s\n", h->dir, strerror(errno));
		free(h);
		return NULL;
	}
	h->next = live;
	live = h;
	int64_t deadline = now_ms() + 20000;
	for (int attempt = 0; attempt < START_TRIES; attempt++) {
		int rc = start_once(h, deadline);
		if (rc == 0)
			return h;
		stop_members(h, 0);
		if (rc < 0 || now_ms() >= deadline)
			break;
		/* A fresh cluster: the failed attempt's data directories hold its member ids. */
		for (int i = 0; i < n; i++) {
			char data[300];
			snprintf(data, sizeof(data), "%s/m%d.data", h->dir, i);
			if (nftw(data, remove_entry, 16, FTW_DEPTH | FTW_PHYS) && errno != ENOENT)
				fprintf(stderr, "etcd_harness: removing %s\n", data);
		}
	}
	fprintf(stderr, "etcd_harness: could not start %d etcd member(s) (is etcd installed?)\n",
		n);
	etcd_harness_stop(h);
	return NULL;
}

const char *const *etcd_harness_endpoints(const etcd_harness *h)
{
	return h->endpoints;
}

int etcd_harness_count(const etcd_harness *h)
{
	return h->n;
}

pid_t etcd_harness_pid(const etcd_harness *h, int i)
{
	return i >= 0 && i < h->n ? h->m[i].pid : 0;
}

const char *etcd_harness_dir(const etcd_harness *h)
{
	return h->dir;
}

int etcd_harness_signal(etcd_harness *h, int i, int sig)
{
	if (i < 0 || i >= h->n || !h->m[i].pid)
		return -1;
	member *m = &h->m[i];
	if (sig == SIGKILL) {
		kill_and_reap(m, 0);
		return 0;
	}
	if (kill(m->pid, sig))
		return -1;
	if (sig == SIGSTOP)
		m->stopped = true;
	else if (sig == SIGCONT)
		m->stopped = false;
	return 0;
}

int etcd_harness_restart(etcd_harness *h, int i)
{
	if (i < 0 || i >= h->n)
		return -1;
	kill_and_reap(&h->m[i], 0);
	return spawn(h, i, true);
}

int etcd_harness_leader(etcd_harness *h)
{
	for (int i = 0; i < h->n; i++) {
		uint64_t id, leader;
		if (!h->m[i].pid || h->m[i].stopped || status_of(h, i, &id, &leader) || !leader)
			continue;
		/* Followers name a killed or stopped leader until their election timeout. */
		for (int j = 0; j < h->n; j++)
			if (h->m[j].id == leader && h->m[j].pid && !h->m[j].stopped)
				return j;
	}
	return -1;
}

int etcd_harness_wait_leader(etcd_harness *h, unsigned timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	do {
		int l = etcd_harness_leader(h);
		if (l >= 0)
			return l;
		sleep_ms(20);
	} while (now_ms() < deadline);
	return -1;
}
