/*
 * ownership.c - debug builds check who touches a task: a function that needs
 * the task's lock aborts when the calling thread does not hold it, and so
 * does unlocking a lock the thread does not hold. Each misuse runs in a child
 * process, which must die of SIGABRT naming the broken rule.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "task.h"

static struct tw_task task __attribute__((aligned(64)));
static int failures;

static void expect(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "FAIL: %s\n", what);
		failures++;
	}
}

/* Runs misuse() in a child with stderr in a pipe; true if it died of SIGABRT saying want. */
static bool aborts_saying(void (*misuse)(void), const char *want)
{
	int fds[2];
	if (pipe(fds))
		return false;
	pid_t pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		misuse();
		_exit(0);
	}
	close(fds[1]);
	char text[512] = "";
	size_t used = 0;
	ssize_t got;
	while (used < sizeof text - 1 &&
	       (got = read(fds[0], text + used, sizeof text - 1 - used)) > 0)
		used += (size_t)got;
	close(fds[0]);
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return false;
	bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
	if (!aborted || !strstr(text, want))
		fprintf(stderr, "child: status %#x, said: %s\n", status, text);
	return aborted && strstr(text, want);
}

static void check_without_the_lock(void)
{
	TASK_LOCKED(&task);
}

static void unlock_without_the_lock(void)
{
	tw__task_unlock(&task);
}

static void wheel_work_elsewhere(void)
{
	WHEEL_THREAD_ONLY();
}

int main(void)
{
	atomic_flag_clear(&task.lock);
	tw__task_lock(&task);
	TASK_LOCKED(&task); /* held: passes */
	tw__task_unlock(&task);
	expect(aborts_saying(check_without_the_lock, "not held by this thread"),
	       "TASK_LOCKED without the lock aborts");
	expect(aborts_saying(unlock_without_the_lock, "does not hold"),
	       "unlocking a lock not held aborts");
	expect(aborts_saying(wheel_work_elsewhere, "outside the wheel thread"),
	       "WHEEL_THREAD_ONLY elsewhere aborts");
	if (failures)
		return 1;
	puts("ownership: 3 misuses caught");
	return 0;
}
