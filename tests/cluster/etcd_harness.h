/*
 * tests/cluster/etcd_harness.h - real etcd members on 127.0.0.1 for the cluster tests.
 *
 * Each member is an etcd child process with its own free ports and a data directory under a
 * fresh temporary directory (in /dev/shm when there is one: fsync there costs nothing), its
 * output in <dir>/mI.log. The children die with the thread that started them (PDEATHSIG), and
 * etcd_harness_stop (also run at exit for every harness still alive) ends them and removes
 * the directory; a directory that a crashed test left behind goes at the next start. Every
 * wait is bounded; a failure says why on stderr, with the log's tail.
 *
 * The etcd binary is $TW_ETCD if set, else "etcd" on the PATH.
 */
#ifndef TW_TESTS_ETCD_HARNESS_H
#define TW_TESTS_ETCD_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct etcd_harness etcd_harness;

/* n members (1 to 9), started and each answering with a leader known, within about 20 s;
 * NULL on failure (the reason on stderr). */
etcd_harness *etcd_harness_start(int n);
/* Stops the members (SIGTERM, then SIGKILL after 3 s), removes the directory, frees h. */
void etcd_harness_stop(etcd_harness *h);

/* The members' client URLs, "http://127.0.0.1:PORT", in member order. */
const char *const *etcd_harness_endpoints(const etcd_harness *h);
int etcd_harness_count(const etcd_harness *h);
/* Member i's pid; 0 when it is not running (killed and not restarted). */
pid_t etcd_harness_pid(const etcd_harness *h, int i);
/* SIGKILL (the member is reaped), SIGSTOP, SIGCONT, or any other signal. 0 or -1. */
int etcd_harness_signal(etcd_harness *h, int i, int sig);
/* Starts member i again, killed first if running, with its name, data directory and ports and
 * --initial-cluster-state existing; does not wait for it (etcd_harness_wait_healthy). */
int etcd_harness_restart(etcd_harness *h, int i);
/* Until member i answers its status with a leader known; 0, or -1 after timeout_ms. */
int etcd_harness_wait_healthy(etcd_harness *h, int i, unsigned timeout_ms);
/* The index of the member the running members name as leader; -1 if none does. */
int etcd_harness_leader(etcd_harness *h);
/* Until a running member names a leader; its index, or -1 after timeout_ms. */
int etcd_harness_wait_leader(etcd_harness *h, unsigned timeout_ms);
/* The temporary directory (logs: <dir>/mI.log). */
const char *etcd_harness_dir(const etcd_harness *h);

#endif
