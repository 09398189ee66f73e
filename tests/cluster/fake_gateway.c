/*
 * tests/cluster/fake_gateway.c - see fake_gateway.h. One thread, one connection at a time:
 * the client under test makes one request at a time.
 */
#include "fake_gateway.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct fake_gateway {
	fake_mode mode;
	char *reply;
	size_t chunk;
	int listen_fd;
	atomic_bool stop;
	pthread_t thread;
	pthread_mutex_t lock;
	int requests;
	char path[128];
	char endpoint[64];
};

/* Waits up to 50 ms for fd to be readable, so that the thread sees stop. */
static int wait_readable(fake_gateway *f, int fd)
{
	while (!atomic_load(&f->stop)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int rc = poll(&p, 1, 50);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
	return -1;
}

/* Reads one request (headers, then Content-Length bytes of body); -1 if it does not come. */
static int read_request(fake_gateway *f, int fd)
{
	char buf[8192];
	size_t len = 0;
	char *end = NULL;
	while (!end) {
		if (len == sizeof(buf) - 1 || wait_readable(f, fd))
			return -1;
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			return -1;
		len += (size_t)n;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	size_t body = 0;
	const char *cl = strstr(buf, "Content-Length: ");
	if (cl)
		body = strtoul(cl + 16, NULL, 10);
	size_t have = len - (size_t)(end + 4 - buf);
	while (have < body) {
		char skip[4096];
		if (wait_readable(f, fd))
			return -1;
		ssize_t n = read(fd, skip, sizeof(skip));
		if (n <= 0)
			return -1;
		have += (size_t)n;
	}
	if (pthread_mutex_lock(&f->lock))
		abort();
	f->requests++;
	sscanf(buf, "POST %127s", f->path);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static void serve(fake_gateway *f, int fd)
{
	if (read_request(f, fd) || f->mode == FAKE_DROP)
		return;
	if (f->mode == FAKE_SILENT) {
		char c;
		while (!wait_readable(f, fd) && read(fd, &c, 1) > 0)
			;
		return;
	}
	size_t len = strlen(f->reply), chunk = f->chunk ? f->chunk : len;
	for (size_t off = 0; off < len && !atomic_load(&f->stop);) {
		size_t n = len - off < chunk ? len - off : chunk;
		ssize_t w = send(fd, f->reply + off, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		off += (size_t)w;
		if (f->chunk) {
			struct timespec ts = { 0, 2000000 };
			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
		}
	}
}

static void *run(void *arg)
{
	fake_gateway *f = arg;
	while (!wait_readable(f, f->listen_fd)) {
		int fd = accept(f->listen_fd, NULL, NULL);
		if (fd < 0)
			continue;
		serve(f, fd);
		if (close(fd))
			perror("fake_gateway: close");
	}
	return NULL;
}

fake_gateway *fake_gateway_start(fake_mode mode, const char *reply, size_t chunk)
{
	fake_gateway *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->mode = mode;
	f->chunk = chunk;
	f->reply = strdup(reply ? reply : "");
	f->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	if (!f->reply || f->listen_fd < 0 || bind(f->listen_fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(f->listen_fd, 8) || getsockname(f->listen_fd, (struct sockaddr *)&a, &alen) ||
	    pthread_mutex_init(&f->lock, NULL)) {
		if (f->listen_fd >= 0)
			close(f->listen_fd);
		free(f->reply);
		free(f);
		return NULL;
	}
	snprintf(f->endpoint, sizeof(f->endpoint), "http://127.0.0.1:%d", ntohs(a.sin_port));
	if (pthread_create(&f->thread, NULL, run, f)) {
		close(f->listen_fd);
		pthread_mutex_destroy(&f->lock);
		free(f->reply);
		free(f);
		return NULL;
	}
	return f;
}

const char *fake_gateway_endpoint(const fake_gateway *f)
{
	return f->endpoint;
}

int fake_gateway_requests(fake_gateway *f, char *path, size_t path_size)
{
	if (pthread_mutex_lock(&f->lock))
		abort();
	int n = f->requests;
	if (path)
		snprintf(path, path_size, "%s", f->path);
	pthread_mutex_unlock(&f->lock);
	return n;
}

void fake_gateway_stop(fake_gateway *f)
{
	if (!f)
		return;
	atomic_store(&f->stop, true);
	if (pthread_join(f->thread, NULL) || close(f->listen_fd))
		perror("fake_gateway: stop");
	pthread_mutex_destroy(&f->lock);
	free(f->reply);
	free(f);
}
