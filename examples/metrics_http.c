/*
 * metrics_http.c - an engine's metrics for Prometheus: /metrics served over HTTP with
 * libmicrohttpd, while heartbeat tasks run.
 *
 *   ./metrics_http [--port N] [--seconds N]
 *
 * Listens on 127.0.0.1 only, port 9477 by default (0: any free port), and prints the URL it
 * serves; exits after --seconds (default 3; 0: until SIGINT or SIGTERM). Point Prometheus at
 * it with a scrape config such as
 *
 *   scrape_configs:
 *     - job_name: tickwheel
 *       static_configs: [{ targets: ["127.0.0.1:9477"] }]
 *
 * and ask for rate(tickwheel_runs_total[1m]), or for the 99th percentile of lateness:
 * histogram_quantile(0.99, rate(tickwheel_lateness_seconds_bucket[5m])).
 *
 * Each request formats the metrics into a buffer (tw_metrics_format) that grows when it is
 * too small; the engine is not held up meanwhile. Exits 1 if something fails.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep, sigaction with -std=c11 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <tickwheel.h>

enum { BEATS = 8, PERIOD_MS = 100 };

static volatile sig_atomic_t quit;

static void on_signal(int sig)
{
	(void)sig;
	quit = 1;
}

static int beat(const tw_fire *fire, void *arg)
{
	(void)arg;
	return fire->run % 50 == 0; /* now and then a failure, for failures_total */
}

static enum MHD_Result serve(void *cls, struct MHD_Connection *conn, const char *url,
			     const char *method, const char *version, const char *upload,
			     size_t *upload_size, void **state)
{
	(void)version, (void)upload, (void)upload_size, (void)state;
	tw_engine *e = cls;
	static const char *const labels[] = { "engine", "metrics_http", NULL };
	const tw_metrics_options opt = { .labels = labels };
	struct MHD_Response *resp;
	unsigned status = MHD_HTTP_OK;
	char *text = NULL;
	size_t cap = 8192, len = 0;
	int rc = -TW_ENOSPACE;
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
	else if (strcmp(url, "/metrics"))
		status = MHD_HTTP_NOT_FOUND;
	while (status == MHD_HTTP_OK && rc == -TW_ENOSPACE) {
		free(text);
		/* Room to spare: the counts may have grown a digit by the next call. */
		cap = cap > len ? cap : len + 1024;
		if (!(text = malloc(cap)))
			return MHD_NO;
		rc = tw_metrics_format(e, &opt, text, cap, &len);
		cap *= 2;
	}
	if (status != MHD_HTTP_OK || rc) {
		free(text);
		static char nothing[] = "";
		status = status == MHD_HTTP_OK ? MHD_HTTP_INTERNAL_SERVER_ERROR : status;
		resp = MHD_create_response_from_buffer(0, nothing, MHD_RESPMEM_PERSISTENT);
	} else {
		resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	}
	if (!resp)
		return MHD_NO;
	if (status == MHD_HTTP_OK)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/plain; version=0.0.4; charset=utf-8");
	enum MHD_Result ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

int main(int argc, char **argv)
{
	long port = 9477, seconds = 3;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--port"))
			port = strtol(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = strtol(argv[i + 1], NULL, 10);
	}
	if (port < 0 || port > 65535 || seconds < 0 || argc % 2 == 0) {
		fprintf(stderr, "usage: %s [--port N] [--seconds N]\n", argv[0]);
		return 2;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	tw_engine *e;
	int rc = tw_engine_create(NULL, &e);
	if (rc) {
		fprintf(stderr, "tw_engine_create: %s\n", tw_strerror(rc));
		return 1;
	}
	for (int i = 0; i < BEATS && !rc; i++) {
		tw_task_spec spec = { .delay_ms = PERIOD_MS + i * PERIOD_MS / BEATS,
				      .period_ms = PERIOD_MS,
				      .callback = beat };
		rc = tw_add(e, &spec, &(tw_id){ 0 });
	}
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* 127.0.0.1 alone */
	struct MHD_Daemon *d = NULL;
	if (!rc)
		d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
				     NULL, serve, e, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_END);
	const union MHD_DaemonInfo *info =
		d ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
	if (!rc && !info) {
		fprintf(stderr, "cannot serve HTTP on 127.0.0.1:%ld\n", port);
		rc = -TW_EINVAL;
	}
	if (!rc) {
		printf("serving http://127.0.0.1:%u/metrics\n", (unsigned)info->port);
		fflush(stdout);
	}
	/* seconds == 0: until a signal. */
	for (long ticks = 0; !rc && !quit && (!seconds || ticks < seconds * 10); ticks++)
		nanosleep(&(struct timespec){ 0, 100000000 }, NULL);
	if (d)
		MHD_stop_daemon(d); /* no request is served past here */
	int stop = tw_engine_stop(e, 1000);
	tw_engine_destroy(e);
	if (rc || stop)
		fprintf(stderr, "metrics_http: %s\n", tw_strerror(rc ? rc : stop));
	return rc || stop ? 1 : 0;
}
