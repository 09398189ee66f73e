/*
 * tickwheel.h - a timer engine for millisecond jobs: very many timers that
 * change all the time, fired on a 1 ms grid, run on executor threads.
 *
 * Every function returns TW_OK (0) or a negated TW_E* code; tw_strerror()
 * names it. Times handed to the user are CLOCK_MONOTONIC nanoseconds. Any
 * thread may call any function without registering; what a callback may call
 * is said under "Callbacks" below.
 *
 * Task states and what may be done in each (anything else: -TW_ESTATE; an id
 * the engine does not know, or no longer keeps: -TW_ENOTFOUND):
 *
 *   state        pause resume cancel set_delay set_period get
 *   TW_WAITING     x           x        x         x       x
 *   TW_RUNNING     x           x        x         x       x   (the run going on finishes)
 *   TW_PAUSED            x     x        x         x       x   (delay, period apply on resume)
 *   TW_COMPLETED                                          x
 *   TW_STOPPED                                            x
 *
 * TW_RUNNING: a firing of the task has been handed to an executor and has
 * not finished (it may still wait for the executor to start it). A
 * completed one-shot cannot be re-armed (its release has been called): add
 * it again.
 *
 * The sections below follow the order a program meets the library: basics
 * (codes, ids, growing structs); the engine; tasks; changing tasks; reading
 * state; names and calendars; snapshots; metrics and listing; testing with
 * the manual clock; utilities. Each concept's rules sit right above its calls.
 */
#ifndef TICKWHEEL_H
#define TICKWHEEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==================================================================================== *
 * Basics: codes, ids, states, growing structs                                          *
 * ==================================================================================== */

/* Marks the library's exported functions; everything else in it is hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define TW_API __attribute__((visibility("default")))
#else
#define TW_API
#endif

typedef struct tw_engine tw_engine;
typedef uint64_t tw_id; /* engine-assigned, never reused; 0 is never an id */

/*
 * When several codes apply, the first of: -TW_EINVAL or -TW_ERANGE for an
 * argument; -TW_ESHUTDOWN or -TW_EFORKED; -TW_ENOTFOUND (id 0 too);
 * -TW_ESTATE; for tw_add, -TW_EEXIST before -TW_ELIMIT: a name a live task
 * has is refused whatever the count of live tasks, an answer that does not
 * change as other tasks come and go.
 */
enum {
	TW_OK = 0,
	TW_EINVAL,    /* a NULL pointer, a missing callback, unknown flags */
	TW_ENOTFOUND, /* no such task (or it ended longer ago than retain_ms) */
	TW_ESTATE,    /* the operation is not allowed in the task's state */
	TW_ERANGE,    /* a delay or period that would overflow */
	TW_ENOMEM,    /* out of memory */
	TW_ESHUTDOWN, /* the engine is stopping or stopped */
	TW_ELIMIT,    /* max_tasks live tasks already */
	TW_ETIMEDOUT, /* tw_engine_stop: runs were still going at the drain limit */
	TW_ECALLBACK, /* not allowed inside a callback (tw_quiesce: it would wait for itself) */
	TW_EFORKED,   /* the engine was created by the parent of this forked process */
	TW_ERESOURCE, /* the system refused a thread or a file descriptor */
	TW_ENOSPACE,  /* tw_metrics_format: the text does not fit the buffer (see there) */
	TW_EWRITE,    /* tw_metrics_write: the caller's writer returned nonzero */
	TW_ESYNTAX,   /* tw_cron_parse: the expression is not valid (tw_cron_error says where) */
	TW_ENOZONE,   /* tw_cron_parse: the time zone is unknown, or its file unreadable */
	TW_ENOMATCH,  /* tw_cron_next: no fire time within the search bound (see there) */
	TW_EEXIST,    /* tw_add: a live task of the engine has that name already */
	/* tw_snapshot, tw_restore, a recording (tw_engine_create, tw_record_status): a system
	 * call on the file failed (see errno) */
	TW_EIO,
	TW_ECORRUPT, /* tw_restore: the snapshot is truncated, or its checksum or a record is bad */
	TW_EVERSION, /* tw_restore: a snapshot of a format version this library does not read */
	TW_ENOTSNAPSHOT, /* tw_restore: the file is no snapshot (its magic is wrong; empty) */
};

/* A task's state: see the table at the top of this file. */
typedef enum { TW_WAITING, TW_RUNNING, TW_PAUSED, TW_COMPLETED, TW_STOPPED } tw_state;

/*
 * Each function below says what it does, every code it returns, where it may
 * be called, whether and how long it blocks, and what it costs. "Any thread"
 * includes callbacks unless said otherwise. An engine pointer must be one
 * that tw_engine_create returned and tw_engine_destroy has not freed; every
 * function that takes one answers -TW_EINVAL for NULL, and -TW_EFORKED in a
 * forked child. No function keeps a pointer it was given past its return,
 * except tw_task_spec's arg (handed to the callback and to release).
 */

/*
 * Growing structs without breaking callers. tw_config, tw_task_spec,
 * tw_task_info and tw_engine_stats gain fields at their end in minor
 * releases. The calls that take or fill them are static inline functions
 * below that pass the library the size of the struct the program was
 * compiled with (the Linux kernel's rule for openat2 and clone3):
 *  - a struct the library reads (tw_config, tw_task_spec,
 *    tw_metrics_options) that is shorter
 *    than the library's own gets the defaults for the fields it lacks (zero,
 *    or tw_config_init's values); a longer one is accepted only if every
 *    byte the library does not know is zero, else -TW_EINVAL;
 *  - a struct the library fills (tw_task_info, tw_engine_stats,
 *    tw_restore_result, and the tw_task_info that tw_list hands its
 *    visitor) is filled up to the
 *    caller's size; bytes past the library's own size are zeroed.
 * So a program built against an older header keeps working with a newer
 * library of the same major version. Initialize structs you hand in with
 * tw_config_init or "= {0}" (or designated initializers), never leave
 * fields unset. tw_fire, which the library hands to callbacks, only ever
 * grows at its end. The *_sized functions are the exported symbols; call
 * them directly only from bindings that cannot use the inline functions.
 */

/* ==================================================================================== *
 * Engine: create, options, threads, stop, destroy, fork                                *
 * ==================================================================================== */

/*
 * No task holds up another. Firings are queued to executor threads; a
 * firing queued behind a run that has lasted more than a millisecond is
 * taken by another executor that is free, and new firings go around that
 * run. With cfg.run_limit_ms, a run that lasts longer is stuck: it is
 * counted and logged (once per run), shown by tw_get, and when every
 * executor is held by such runs a spare executor is started (up to
 * cfg.spare_executors). A run's length is monotonic time from its start,
 * with or without a CPU: on a loaded machine a short run descheduled past
 * the limit is stuck too, so keep the limit well above the longest pause
 * the system may impose on a thread.
 */

/*
 * The engine's threads are named, for top -H, ps -L, perf and
 * /proc/<pid>/task/<tid>/comm: "tw-wheel" for the wheel thread and
 * "tw-exec-N" for executor N (0 up; spares go on from the last executor).
 * They are named by the time tw_engine_create returns (a spare, by the
 * time it starts; without /proc mounted, as each thread starts). A
 * callback that renames its thread renames the executor. liburcu runs a
 * thread of its own (call_rcu).
 */

enum { TW_LOG_ERROR, TW_LOG_WARNING, TW_LOG_INFO };

/* The most firings an executor's queue may hold; more: -TW_EINVAL. */
#define TW_MAX_QUEUE_CAPACITY (1u << 24)

/* The most executors (and the most spare executors) an engine may have; more: -TW_EINVAL. */
#define TW_MAX_EXECUTORS 1024u

typedef struct {
	unsigned executors;      /* executor threads; 0 = one per online CPU; <= TW_MAX_EXECUTORS */
	bool pin_executors;      /* pin executor i to CPU i % online CPUs */
	unsigned queue_capacity; /* firings each executor may hold; default 4096 (also for 0);
				  * at most TW_MAX_QUEUE_CAPACITY */
	unsigned max_failures;   /* consecutive failures that pause a task; default 10, 0 = never */
	uint64_t slow_run_ms;    /* a run longer than this counts as slow; default 100 */
	uint64_t max_tasks;      /* cap on live tasks; 0 = none */
	/* Ended tasks answer tw_get this many ms whole from their end, then stop answering
	 * within 6 ms more; default 5000. The engine forgets at most 1024 tasks a ms: of more
	 * that end in one ms, the rest go 1024 a ms in the ms after (the last of a million
	 * cancelled in a loop about a second later). Those ms are the wheel thread's: one
	 * held up (a stalled process, a long TW_ON_WHEEL_THREAD run) forgets as late as it is.
	 * On the manual clock a task that ended in millisecond T is forgotten, with every
	 * other, by the tw_advance that reaches T + retain_ms + 1. A task cancelled while a
	 * firing of it still waits in an executor's queue is kept until that executor takes
	 * the firing out (see tw_cancel). A task's end wakes a
	 * sleeping wheel thread (a system call in the thread that ends it) only if that would
	 * not wake in time to forget the task then: about once per retain_ms, not once per
	 * task. */
	uint64_t retain_ms;
	void (*log)(int level, const char *message, void *log_arg); /* the library never prints */
	void *log_arg;
	bool manual_clock; /* time moves only by tw_advance(); for tests */
	bool coarse_clock; /* "now" of add, set_delay, resume from CLOCK_MONOTONIC_COARSE; below */
	uint64_t run_limit_ms;    /* a run longer than this is stuck (see above); 0 = no limit */
	unsigned spare_executors; /* started while every executor is stuck; default 2, <= 1024 */
	/* A TW_ON_WHEEL_THREAD run longer than this is over budget (see "Tasks on the wheel
	 * thread"); default 50 (also for 0). */
	uint64_t wheel_run_budget_us;
	/* Room for this many tasks, made at create; 0 = none (the default). The task table is
	 * mapped and its memory written then: about 152 bytes a task, in chunks of 1724 tasks
	 * (256 KiB), held until tw_engine_destroy and counted in memory_bytes. tw_engine_create
	 * pays what the first adds would (mapping, and a page fault per page, or per 2 MiB page
	 * with transparent huge pages: perf/results/HISTORY.md, "Reserved tasks"), so that adds into a
	 * fresh engine cost what adds into the slots of ended tasks cost. Slots, not a cap: it
	 * counts live tasks and ended ones kept for retain_ms alike, and max_tasks still caps
	 * the live ones. Beyond it the table grows as it would without it. -TW_EINVAL past what
	 * ids can index (about 3.6e9 tasks); -TW_ENOMEM when the memory is refused. */
	uint64_t reserve_tasks;
	/* Records every operation and run to this file (see "Recording"); NULL: none, unless
	 * the environment variable TW_RECORD names one; "": none, whatever TW_RECORD says. */
	const char *record_path;
	/* The recording's buffer in KiB, rounded up to a power of two of at least 4 (1 to 3
	 * give 4); default 1024 (also for 0); above 1048576 (1 GiB) tw_engine_create fails
	 * -TW_EINVAL, with a recording or without. Otherwise unused without a recording. */
	unsigned record_buffer_kib;
} tw_config;

/*
 * coarse_clock, for programs that reset very many timeouts (session
 * timeouts pushed back on every message): tw_add, tw_set_delay and tw_resume
 * count their delay from CLOCK_MONOTONIC_COARSE plus two of its ticks
 * (clock_getres; 4 ms each at HZ=250) instead of CLOCK_MONOTONIC. A precise
 * clock read waits for the caller's earlier memory accesses to complete, so
 * back-to-back resets of random tasks each pay a whole cache miss; a coarse
 * read does not, and their misses overlap. The price: a due may be up to
 * three coarse ticks later than asked; it would be earlier only if the
 * kernel's coarse clock lagged by more than two ticks (perf/README.md has
 * the lag measured). Firing, lateness and periods stay on the precise clock.
 * Ignored with manual_clock.
 */

/*
 * Recording, to replay a program's timers elsewhere (tw-perf replay, perf/README.md):
 * with cfg.record_path, or the environment variable TW_RECORD for a program that cannot be
 * changed, the engine writes every tw_add, tw_set_delay, tw_set_delay_many, tw_set_due,
 * tw_set_period, tw_pause, tw_resume and tw_cancel made on it - the spec without callback
 * and arg, the call's time, its thread, its result - every run's due, start and end, and
 * every firing counted as skipped (its task, reason and count, as tw_engine_stats counts
 * it) to a binary file (api/record-format.md; a tw_add that fails, and a call refused
 * before it reaches a task, may be left out: the page says which). The file is truncated at
 * tw_engine_create and ends with an END event once tw_engine_destroy has drained the
 * recording (not if a stuck run never returns). TW_RECORD=PATH records the process's
 * first engine created without a record_path to PATH, its second to PATH.2, its third to
 * PATH.3 ... (secure_getenv: not in a set-user-ID program). A path that cannot be opened
 * fails tw_engine_create with -TW_EIO, errno kept, whether it came from record_path or
 * from TW_RECORD.
 *
 * A recording never blocks the engine or a caller: each event is copied into a bounded
 * buffer (record_buffer_kib; 64 bytes an event, more for an add with a name or a cron
 * text) that a thread of the recorder's own ("tw-record") writes out with write(2). When
 * the buffer is full the event is dropped and counted: the file marks each gap with a
 * DROPPED event, tw_engine_stats.record_dropped counts them. When a write fails (a full
 * disk) the recorder writes nothing more, counts every later event as dropped, logs it
 * through cfg.log once, and tw_record_status answers -TW_EIO with that errno. Recording
 * off, an operation pays a compare and a branch; on, a few hundred instructions an event,
 * its clock read included (perf/README.md, "Recording").
 */

/**
 * tw_config_init_sized() - tw_config_init() for a tw_config of @size bytes (see "Growing
 * structs"); the exported symbol behind it.
 *
 * The rest (context, cost) as tw_config_init().
 */
TW_API void tw_config_init_sized(tw_config *cfg, size_t size);

/**
 * tw_config_init() - sets every field of @cfg to its default.
 *
 * The defaults are the values documented beside each field of tw_config.
 * NULL: nothing. Any thread; O(1).
 */
static inline void tw_config_init(tw_config *cfg)
{
	tw_config_init_sized(cfg, sizeof *cfg);
}

/**
 * tw_engine_create_sized() - tw_engine_create() for a tw_config of @size bytes (see
 * "Growing structs"); the exported symbol behind it.
 *
 * Return, context, blocking and cost: as tw_engine_create().
 */
TW_API int tw_engine_create_sized(const tw_config *cfg, size_t size, tw_engine **out);

/**
 * tw_engine_create() - creates an engine and starts its threads.
 * @cfg: the configuration (NULL: the defaults); copied, not kept.
 * @out: receives the engine; NULL on failure.
 *
 * Return: TW_OK; -TW_EINVAL for NULL @out or a configuration outside its
 * limits (executors or spare_executors above TW_MAX_EXECUTORS,
 * queue_capacity above TW_MAX_QUEUE_CAPACITY, reserve_tasks past what ids
 * can index, record_buffer_kib above its limit; a longer struct whose unknown
 * bytes are not zero); -TW_ENOMEM when memory runs out; -TW_ERESOURCE when
 * the system refuses a thread or a file descriptor; -TW_EIO when the
 * recording's file (record_path or TW_RECORD, see "Recording") cannot be
 * opened, errno kept. Any thread. Blocks while it starts 1 + executors
 * threads (and the recorder's); cost O(executors), plus O(reserve_tasks) to
 * write the memory it reserves.
 */
static inline int tw_engine_create(const tw_config *cfg, tw_engine **out)
{
	return tw_engine_create_sized(cfg, sizeof *cfg, out);
}

/*
 * After a stop, tw_get, tw_stats, tw_quiesce and tw_list still answer;
 * every other call then answers -TW_ESHUTDOWN, except tw_engine_destroy.
 */

/**
 * tw_engine_stop() - stops firing and ends every task.
 * @drain_timeout_ms: how long to wait for the runs in progress.
 *
 * Refuses new operations (-TW_ESHUTDOWN), releases at once every task with no
 * run going (a firing queued but not started counts as none: it is dropped,
 * counted as missed), then waits up to @drain_timeout_ms for the runs in
 * progress; each of those tasks is released when its run returns. Releases
 * are called in the calling thread or on an executor.
 *
 * Return: TW_OK when no run was left; -TW_ETIMEDOUT if runs were still going
 * at the limit (they finish and are released later); -TW_ESHUTDOWN if the
 * engine was stopped before. Any thread; from a callback it waits for the
 * other runs only. Blocks: joins the wheel thread (from a TW_ON_WHEEL_THREAD
 * callback: the wheel thread stops once the callback returns), then at most
 * @drain_timeout_ms. Cost O(tasks).
 */
TW_API int tw_engine_stop(tw_engine *e, uint64_t drain_timeout_ms);

/**
 * tw_engine_destroy() - stops the engine if needed, waits for every run still
 * going, and frees all it holds.
 *
 * A run past run_limit_ms is not waited for: its executor thread is left to
 * finish it, and what that run still needs (the engine's memory, the task's
 * release) is freed and called when it returns - never, if it never returns.
 * Without run_limit_ms, destroy waits as long as a run goes on. From a
 * callback it stops the engine at once and is completed by that callback's
 * executor (or the wheel thread) once the callback returns. In a forked child it returns without
 * touching the engine. NULL: nothing. The engine must not be used after the
 * call. Blocks: joins every thread; cost O(tasks).
 */
TW_API void tw_engine_destroy(tw_engine *e);

/*
 * fork(): an engine belongs to the process that created it. In a child
 * process every call on it answers -TW_EFORKED, and tw_engine_destroy
 * returns without touching it (its threads do not exist there; its memory is
 * the parent's copy, and goes with exec or exit). A child that needs timers
 * should exec a new program: an engine created in a forked child of a
 * process with engines is not supported yet.
 */

/* ==================================================================================== *
 * Tasks: callbacks, due times, the task spec, adding                                   *
 * ==================================================================================== */

/*
 * Callbacks run on executor threads (TW_ON_WHEEL_THREAD tasks: on the wheel
 * thread, see "Tasks on the wheel thread") and may call any function, with
 * these exceptions: tw_quiesce answers -TW_ECALLBACK (it would wait for the
 * caller's own run); tw_engine_stop stops the engine and waits for the other
 * runs only (the caller's task is released after its run returns);
 * tw_engine_destroy stops the engine at once and is completed by the
 * executor (the wheel thread) when the callback returns (the engine must not
 * be used after the call, as anywhere else).
 */
typedef struct {
	tw_id id;
	uint64_t due_ns;  /* the ideal due time this run stands for (a tick of the 1 ms grid) */
	uint64_t run;     /* runs of this task started so far, this one included: 1, 2, 3 ... */
	uint64_t skipped; /* due firings skipped since the previous run; stops at 2^32 - 1 */
} tw_fire;

/* Runs on an executor thread (a TW_ON_WHEEL_THREAD task: on the wheel thread). Nonzero =
 * failure: max_failures failures in a row pause the task, one-shots included (tw_resume runs
 * it again). */
typedef int (*tw_callback)(const tw_fire *fire, void *arg);

/*
 * Due times. "now" is read on the engine's 1 ms grid, rounded up: a delay is
 * never shortened, may be lengthened by less than 1 ms, and a due time falls
 * on a tick, so a run's lateness (start minus due_ns) is the engine's own. A
 * periodic task's next due is its previous due plus its period, never
 * "now + period": it does not drift. A delay of TW_NEVER gives a task no due
 * at all: it waits (TW_WAITING, next_due_ns 0) until tw_set_delay or
 * tw_resume gives it one. Tasks due in the same millisecond are handed to
 * the executors in the order they were filed into it. A task added, moved
 * earlier or resumed is filed when the wheel thread takes in that change,
 * and it takes changes in the order they were made - except that a task
 * changed again before its earlier change was taken in keeps that earlier
 * change's place. A task moved later is filed into its new millisecond
 * when its previous due comes round, behind what is there then; a task set
 * to a due in the millisecond it is already filed in keeps its place. Runs
 * on different executors may start in any order.
 *
 * Absolute dues. A task's first due may be a time rather than a delay
 * (tw_task_spec.first_due_ns), and tw_set_due moves a task to a time, so
 * that a program can put many tasks on one grid of its own (heartbeats all
 * due at T, T + 100 ms, ...) or start a periodic task at a phase it chose,
 * without the race between reading the clock and the call. The time is
 * CLOCK_MONOTONIC's (with manual_clock, the manual clock's: it starts at
 * CLOCK_MONOTONIC's time of the engine's creation, and tw_fire.due_ns and
 * next_due_ns are on it), and
 * is rounded up to the 1 ms grid as a delay is, so every task given the same
 * time gets the same due_ns and fires in the same millisecond. A time
 * already past (or within the current millisecond) is due at once: the next
 * tick, as a delay of 0, not at its own past time. A periodic task's later
 * dues are that due plus periods, as for any task. A time further ahead than
 * TW_MAX_DELAY_MS is refused (-TW_ERANGE). A one-shot given a time resumes
 * (tw_resume) with the delay that time stood for when it was given.
 */

/*
 * Firings that cannot run at once. A one-shot's firing is never lost:
 *  - when no executor can take it (every queue full), it waits - a task has
 *    at most one firing waiting, so this is no backlog - and runs late, as
 *    its lateness shows;
 *  - when it comes due while the task's own previous run is going (a
 *    one-shot re-armed from its own callback), it runs once right after
 *    that run returns (if it is re-armed and comes due again meanwhile, the
 *    later due takes its place, and the one replaced counts as overlap).
 * A periodic task's firing is skipped and counted, by reason, since its next
 * period comes anyway:
 *  - skipped_overlap: the task's own previous run is still going (serial
 *    tasks). With TW_RUN_LATE the firing runs once right after that run
 *    returns instead: one firing waits at most, a later due takes its place
 *    and the one it replaces is counted here. A firing that waits runs on
 *    the executor of the run it waited for, before what is queued there,
 *    but after a firing of the same task queued before it;
 *  - skipped_overload: no executor could take it, or the task's previous
 *    firing is still waiting for an executor to start it;
 *  - skipped_missed: the engine fell behind by whole periods (the process
 *    stalled): the task runs once for its latest due and stays on its phase;
 *    also a firing handed to an executor but dropped before it started
 *    because the task was paused, cancelled or stopped.
 * Due firings always equal runs plus skips; nothing is queued as backlog.
 *
 * Fine points of the rules above:
 *  - A TW_CONCURRENT task's firing is handed out while its earlier runs go
 *    (they may overlap), but never while an earlier firing of it waits for
 *    an executor to start it: a periodic one is then skipped as overload, a
 *    one-shot's waits for that run. TW_RUN_LATE is accepted on any task; it
 *    matters only while the task is periodic and serial.
 *  - A periodic task behind by whole periods counts the missed ones first,
 *    then its latest due is judged like any firing (run, wait, or skip).
 *    tw_fire.skipped counts the skips of the dues since the firing of the
 *    task's previous run; a skip that comes while a firing waits to start
 *    is reported by the run after it.
 */

/*
 * Tasks on the wheel thread (TW_ON_WHEEL_THREAD), for short callbacks such
 * as a heartbeat that writes one message: the callback runs on the wheel
 * thread itself, as soon as it wakes for the task's due, with no hand-over
 * to an executor - one wake-up instead of two, and no executor's CPU. The
 * price is everyone else's: while such a callback runs, no other task is
 * handed out, and nothing watches the executors. So it must not block
 * (no lock others hold long, no sleep, no blocking I/O), and a guard keeps
 * the promise to the other tasks: a run that lasts longer than
 * cfg.wheel_run_budget_us counts in tw_engine_stats.over_budget_runs, and
 * TW_WHEEL_RUN_STRIKES such runs of a task in a row move it to the executors
 * for good (tw_task_info.on_wheel_thread turns false,
 * tasks_moved_off_wheel_thread counts it, a warning is logged); its later
 * runs are like any task's. A run's time is wall time: a run preempted by
 * the system now and then is over budget without moving its task. The
 * guard acts after a run returns: one that never returns stops the engine's
 * firing. run_limit_ms and the spare executors do not apply to these runs.
 * Such a callback may call what an executor's may, with one more
 * exception: tw_advance answers -TW_ECALLBACK (it would wait for the wheel
 * thread). Its runs never overlap (TW_CONCURRENT with it: -TW_EINVAL), count
 * in runs, lateness and failures like any, and in the wheel thread's
 * wheel_busy_ns rather than executor_busy_ns.
 */
enum {
	TW_CONCURRENT = 1u << 0, /* runs of the task may overlap */
	/* Periodic, serial: a firing due while the task's previous run is going runs once
	 * right after that run returns, rather than being skipped (see above). */
	TW_RUN_LATE = 1u << 1,
	/* The callback runs on the wheel thread, not handed to an executor: for callbacks of a
	 * few microseconds (see "Tasks on the wheel thread"). Not with TW_CONCURRENT. */
	TW_ON_WHEEL_THREAD = 1u << 2,
};

/* Runs in a row over wheel_run_budget_us that move a TW_ON_WHEEL_THREAD task to the
 * executors. */
#define TW_WHEEL_RUN_STRIKES 3

/* The longest task name, in bytes, without its NUL. */
#define TW_NAME_MAX 63

/* The longest delay or period accepted: about 278 years (due times in ns fit 64 bits). A
 * longer one is refused with -TW_ERANGE, except TW_NEVER. */
#define TW_MAX_DELAY_MS (UINT64_C(1) << 43)
/* As a delay: no due at all; the task waits until it is given one. Not a period. */
#define TW_NEVER UINT64_MAX

typedef struct {
	uint64_t delay_ms;    /* first due = now (rounded up to the ms grid) + delay; 0: at once */
	uint64_t period_ms;   /* 0 = one-shot */
	tw_callback callback; /* required */
	void *arg;
	void (*release)(void *arg); /* optional, called exactly once when the task is gone */
	unsigned flags; /* TW_CONCURRENT, TW_RUN_LATE, TW_ON_WHEEL_THREAD (default: serial, skip
			 * overlaps, on an executor) */
	/* A calendar task: repeats at the fire times of this cron expression (see "Calendar
	 * tasks"), with period_ms 0; read by tw_add, not kept. NULL: none. */
	const char *cron;
	/* The first due as a CLOCK_MONOTONIC time in ns (the manual clock's time with
	 * manual_clock) instead of a delay; 0: use delay_ms, which must then be 0. See
	 * "Absolute dues". */
	uint64_t first_due_ns;
	/* NULL or "": no name. Else 1 to TW_NAME_MAX bytes of printable ASCII (0x20 to 0x7e),
	 * copied; unique among the engine's live tasks. See "Named tasks". */
	const char *name;
	/* What tw_restore does with a due that passed while the process was down: a
	 * TW_MISFIRE_* value (see "Snapshot and restore"). Kept with the name: read only when
	 * the task has one (ignored, and not checked, without). */
	unsigned misfire;
} tw_task_spec;

/* tw_task_spec.misfire: a due that passed while the process was down (tw_restore). */
enum {
	TW_MISFIRE_RUN_ONCE = 0, /* run once at restore, the other missed firings skipped */
	TW_MISFIRE_SKIP = 1,     /* skip every missed firing: wait for the next due after now */
};

/*
 * release(arg) is called exactly once, after the last run returned: on
 * cancel, on a one-shot's completion, at stop. It runs in the thread that
 * ended the task (the canceller, the stopper) or on an executor; on the
 * wheel thread only for a TW_ON_WHEEL_THREAD task whose last run there
 * ended it.
 */

/**
 * tw_add_sized() - tw_add() for a tw_task_spec of @size bytes (see "Growing structs");
 * the exported symbol behind it.
 *
 * Return, context, blocking and cost: as tw_add().
 */
TW_API int tw_add_sized(tw_engine *e, const tw_task_spec *spec, size_t size, tw_id *out);

/**
 * tw_add() - adds a task.
 * @spec: the task (see tw_task_spec); copied, not kept.
 * @out: receives the new task's id; untouched on failure.
 *
 * max_tasks counts the tasks added and not yet completed or stopped.
 *
 * Return: TW_OK; -TW_EINVAL for NULL @e, @spec or @out, no callback,
 * unknown flags, TW_ON_WHEEL_THREAD with TW_CONCURRENT, a cron expression
 * with a period, a first_due_ns with a delay_ms that is not 0, a name
 * longer than TW_NAME_MAX or with a byte outside 0x20-0x7e, or a named task's
 * misfire that is no TW_MISFIRE_* value; -TW_ERANGE for
 * a delay above TW_MAX_DELAY_MS (TW_NEVER excepted), a period above it, or
 * a first_due_ns more than TW_MAX_DELAY_MS ahead; -TW_ESYNTAX or
 * -TW_ENOZONE for a cron expression tw_cron_parse refuses, -TW_ENOMATCH for
 * one with no fire time within the search bound; -TW_ELIMIT when max_tasks
 * tasks are live (or the table is out of ids); -TW_EEXIST when a live task
 * has the name (see "Named tasks"); -TW_ENOMEM when memory runs out;
 * -TW_ESHUTDOWN after a stop. A tw_add that fails never calls release.
 * Any thread. Does not wait for runs; takes the slot table's lock briefly.
 * Cost O(1); every 1724th add maps a chunk of the table. With a cron
 * expression: parsing it, its zone's file read (see tw_cron_parse), its
 * first fire time computed, a record allocated. A named task's add
 * allocates its name, and when the named tasks reach 1024, 2048, ... the
 * name tables grow, which waits for an RCU grace period.
 */
static inline int tw_add(tw_engine *e, const tw_task_spec *spec, tw_id *out)
{
	return tw_add_sized(e, spec, sizeof *spec, out);
}

/* ==================================================================================== *
 * Changing tasks: delays, dues, periods, pause, resume, cancel                         *
 * ==================================================================================== */

/*
 * Moving a task: where a moved task is filed is said under "Due times".
 * "Moved later" is judged against the millisecond the task is filed in
 * (its earlier due, if it was moved later before); a delay of TW_NEVER
 * counts as moved later: the task leaves the wheel when that millisecond
 * comes round, and a due set back into it meanwhile keeps its place.
 */

/**
 * tw_set_delay() - moves a task's next due to now + @delay_ms.
 *
 * TW_NEVER: no due until one is given. On a paused task the delay applies on
 * resume (see tw_resume). On a one-shot whose firing was handed out it re-arms
 * the task: it runs again after that run (from its own callback too); re-armed
 * to TW_NEVER, it then waits with no due instead of completing. The new due
 * (TW_NEVER too) replaces a firing that came due and waits for the task's
 * own run to return: that firing counts as overlap, in skipped_overlap and
 * the next run's tw_fire.skipped. A completed one-shot cannot be re-armed
 * (see the state table at the top).
 *
 * Return: TW_OK; -TW_ENOTFOUND for an id the engine does not keep;
 * -TW_ESTATE for a completed or stopped task; -TW_ERANGE for a delay above
 * TW_MAX_DELAY_MS but TW_NEVER; -TW_ESHUTDOWN after a stop. Any thread. Takes
 * the task's own lock (a few dozen instructions long). Cost O(1): a postpone
 * only records the later due.
 */
TW_API int tw_set_delay(tw_engine *e, tw_id id, uint64_t delay_ms);

/**
 * tw_set_delay_many() - tw_set_delay on @n tasks at once.
 * @results: if not NULL, gets each id's code, what tw_set_delay would return.
 *
 * As a gateway that reads its messages in batches resets their sessions:
 * each task's next due = now + @delay_ms, now read once per 256 ids. The
 * tasks are fetched ahead of their turn, so the cache misses of random tasks
 * overlap instead of adding up. tw_set_delay_many sets the ids in array
 * order, as that many tw_set_delay calls.
 *
 * Return: TW_OK if every one succeeded, else the first failure's code (the
 * codes of tw_set_delay); -TW_EINVAL for NULL @ids with @n > 0, -TW_ERANGE for
 * a delay above TW_MAX_DELAY_MS but TW_NEVER, -TW_ESHUTDOWN after a stop: then
 * no task is touched and @results is left as it was. Any thread; O(n).
 */
TW_API int tw_set_delay_many(tw_engine *e, const tw_id *ids, size_t n, uint64_t delay_ms,
			     int *results);

/**
 * tw_set_due() - moves a task's next due to the time @due_ns.
 * @due_ns: a CLOCK_MONOTONIC time in ns (the manual clock's with manual_clock).
 *
 * tw_set_delay with a time instead of a delay (see "Absolute dues"): the
 * due is @due_ns rounded up to the 1 ms grid, or the next tick if that has
 * passed. The same states and rules as tw_set_delay's: on a paused task it
 * applies on resume (due then at @due_ns, or at once if it has passed);
 * it re-arms a one-shot whose firing was handed out; a periodic task's
 * later dues follow it by whole periods.
 *
 * Return: TW_OK; -TW_EINVAL for NULL @e or a @due_ns of 0 (no due at all is
 * tw_set_delay's TW_NEVER); -TW_ERANGE for a @due_ns more than
 * TW_MAX_DELAY_MS ahead; -TW_ESHUTDOWN after a stop; -TW_ENOTFOUND;
 * -TW_ESTATE for a completed or stopped task. Any thread. Reads the clock
 * and takes the task's own lock, as tw_set_delay; O(1).
 */
TW_API int tw_set_due(tw_engine *e, tw_id id, uint64_t due_ns);

/**
 * tw_set_period() - sets the period from the next firing on (not for a calendar task).
 *
 * The due after the next firing is that firing's due + @period_ms. 0 makes
 * the task a one-shot that completes after that run; a one-shot given a
 * period before its firing is handed out becomes periodic. A firing that
 * already came due keeps what it was: a one-shot's firing that waits for the
 * task's run still completes the task after its run (unless tw_set_delay
 * re-arms it); a periodic firing that waits for the run (TW_RUN_LATE) is
 * skipped and counted as overlap when the period changes. A one-shot given a
 * period after its firing was handed out still completes after that run,
 * unless re-armed.
 *
 * Return: TW_OK; -TW_ENOTFOUND; -TW_ESTATE for a completed or stopped task,
 * or a calendar task; -TW_ERANGE above TW_MAX_DELAY_MS (TW_NEVER is not a
 * period); -TW_ESHUTDOWN.
 * Any thread; takes the task's lock; O(1).
 */
TW_API int tw_set_period(tw_engine *e, tw_id id, uint64_t period_ms);

/*
 * Pause and cancel. Once tw_pause or tw_cancel returns, no new run of the
 * task starts: a run already going finishes; a firing handed to an executor
 * but not started, and one waiting for the task's run, are dropped and
 * counted as missed at once (a stop counts them too). A state is the
 * task's, not its run's: a task paused (cancelled) while its run goes is
 * TW_PAUSED (TW_STOPPED) at once, and TW_RUNNING again if resumed while
 * that run goes. A paused or ended task has no due (next_due_ns 0).
 */

/**
 * tw_pause() - no new run of the task starts until tw_resume.
 *
 * What stops and what is dropped: "Pause and cancel" above. A dropped firing
 * keeps the task's place in the executor's queue until the executor takes it
 * out (even if the task is resumed meanwhile): a periodic firing due before
 * then is skipped as overload.
 *
 * Return: TW_OK; -TW_ENOTFOUND; -TW_ESTATE unless waiting or running;
 * -TW_ESHUTDOWN. Any thread; takes the task's lock; O(1).
 */
TW_API int tw_pause(tw_engine *e, tw_id id);

/**
 * tw_resume() - a paused task waits again.
 *
 * tw_resume gives a periodic task now + period; a one-shot (also one made
 * by tw_set_period(0)) now + the last delay it was given by tw_add or
 * tw_set_delay (TW_NEVER: it waits with no due); a delay given while the
 * task was paused wins over both, one given before the pause does not (a
 * time given by tw_set_due too). A calendar task: its first fire time after
 * now. A task stays filed at its due while paused, until that millisecond
 * comes round: its due on resume is placed by the rules for a moved task.
 * Clears consecutive_failures and paused_by_failures.
 *
 * Return: TW_OK; -TW_ENOTFOUND; -TW_ESTATE unless paused; -TW_ESHUTDOWN.
 * Any thread; takes the task's lock; O(1).
 */
TW_API int tw_resume(tw_engine *e, tw_id id);

/**
 * tw_cancel() - ends the task (TW_STOPPED).
 *
 * What stops and what is dropped: "Pause and cancel" above. release(arg)
 * is called exactly once: by tw_cancel itself, in the calling thread, when
 * no run of the task is going (a firing queued but not started counts as
 * none: it is dropped, counted as missed); else on an executor after the
 * last run. A task whose dropped firing is still queued (behind a long run)
 * is kept, and answers tw_get, until its executor takes that firing out,
 * retain_ms or not. A task cancelled while a run of it goes (from its own
 * callback too) is TW_STOPPED at once, but ends when that run returns: it is
 * released then, and kept retain_ms from then, not from the cancel.
 *
 * Return: TW_OK; -TW_ENOTFOUND; -TW_ESTATE for a task that ended already;
 * -TW_ESHUTDOWN. Any thread (a callback may cancel its own task: it is
 * released after that run). Takes the task's lock; O(1) plus the release.
 */
TW_API int tw_cancel(tw_engine *e, tw_id id);

/* ==================================================================================== *
 * Reading state: a task, the engine, an executor                                       *
 * ==================================================================================== */

typedef struct {
	tw_state state;
	/* next_due_ns: 0 when nothing is due; a one-shot whose firing came due and waits (for
	 * room, or for its own run to return) shows that firing's due. */
	uint64_t period_ms, next_due_ns;
	uint64_t runs, failures, consecutive_failures, slow_runs;
	/* Skips by reason; a task's own counts stop at 2^32 - 1 (the engine's
	 * totals in tw_engine_stats do not). */
	uint64_t skipped_overlap, skipped_overload, skipped_missed;
	/* Durations of its runs (the last finished run's and the longest), and
	 * how late they started (start - due, as the engine's lateness histogram
	 * counts it; the last started run's and the largest). Kept to the
	 * microsecond - durations rounded up (a run of a few ns shows 1000),
	 * lateness rounded down - and stop at 2^32 - 1 us (71 minutes). */
	uint64_t last_run_ns, longest_run_ns;
	bool paused_by_failures;
	bool concurrent;
	/* firings handed to executors and not finished (not one waiting for the task's run) */
	uint32_t running;
	bool stuck; /* a run of it has lasted longer than run_limit_ms and goes on */
	uint64_t last_lateness_ns, max_lateness_ns; /* how late runs started: see last_run_ns */
	/* Its runs go on the wheel thread: added with TW_ON_WHEEL_THREAD and not moved to the
	 * executors by the budget guard. */
	bool on_wheel_thread;
	/* Added with a cron expression (not "@every", which makes a fixed period); period_ms
	 * is 0. Its next due in wall-clock time, ns since the epoch: the fire time it stands
	 * for (next_due_ns is that time on CLOCK_MONOTONIC, planned when it was computed), or
	 * for a due set by tw_set_delay, that due on today's wall clock; 0 when nothing is due,
	 * and always for a task that is not a calendar task. */
	bool calendar;
	int64_t next_due_wall_ns;
	/* Its name, NUL-terminated; "" for none. Shown while the task is kept (retain_ms),
	 * also after it ended and another task took the name. */
	char name[TW_NAME_MAX + 1];
	/* A named task's tw_task_spec.misfire (TW_MISFIRE_*); 0 for an unnamed one. */
	unsigned misfire;
} tw_task_info;

/**
 * tw_get_sized() - tw_get() for a tw_task_info of @size bytes (see "Growing structs");
 * the exported symbol behind it.
 *
 * Return, context and cost: as tw_get().
 */
TW_API int tw_get_sized(tw_engine *e, tw_id id, tw_task_info *out, size_t size);

/**
 * tw_get() - a task's state and counts, read without a lock.
 * @out: filled on success, untouched otherwise.
 *
 * Each field is as it was at some instant of the call. After a stop, until
 * tw_engine_destroy, it answers with each task's final state and counts.
 * tw_get's running counts runs going and firings handed out, also a dropped
 * one until its executor takes it out; not a firing that waits for the
 * task's own run (it is handed to that run's executor when the run
 * returns). tw_get from a callback counts the run going in runs, as
 * tw_fire.run.
 *
 * Return: TW_OK; -TW_EINVAL for NULL @out; -TW_ENOTFOUND for an id the engine
 * does not keep (ended longer than retain_ms ago, or never given). Any
 * thread; never blocks (a period of 2^31 ms or more, and a calendar task, are
 * read under the
 * task's lock); O(1).
 */
static inline int tw_get(tw_engine *e, tw_id id, tw_task_info *out)
{
	return tw_get_sized(e, id, out, sizeof *out);
}

enum { TW_LATENESS_BUCKETS = 24 }; /* bucket i: lateness < 2^i us (the last: the rest) */

typedef struct {
	uint64_t tasks_live, tasks_waiting, tasks_running, tasks_paused; /* now */
	uint64_t tasks_completed, tasks_stopped;                         /* ever */
	uint64_t runs, failures, slow_runs;
	uint64_t skipped_overlap, skipped_overload, skipped_missed;
	uint64_t wheel_wakeups;
	uint64_t lateness_us[TW_LATENESS_BUCKETS]; /* run start minus due */
	uint64_t lateness_max_ns;
	uint64_t stuck_runs;       /* runs that went past run_limit_ms, ever */
	uint64_t spare_executors;  /* spare executors started, now running */
	uint64_t lateness_sum_ns;  /* run start minus due, added up over every run */
	uint64_t executors;        /* executor threads running now, spares included */
	uint64_t queued;           /* firings in the executors' queues now, not yet taken */
	uint64_t executor_busy_ns; /* time the executors spent in callbacks, added up */
	uint64_t wheel_busy_ns;    /* time the wheel thread spent in its rounds */
	uint64_t lateness_count;   /* runs in lateness_us, added up (beside lateness_sum_ns) */
	/* Bytes the engine holds now: its task table (it grows by chunks of
	 * 1724 tasks, 256 KiB, and never shrinks before destroy), its queues and
	 * records, a recording's buffer. Not the threads' stacks, nor what liburcu or the allocator
	 * keep, nor the rest of the 2 MiB regions the chunks are carved from
	 * (held whole where transparent huge pages back them). */
	uint64_t memory_bytes;
	/* TW_ON_WHEEL_THREAD tasks: their runs on the wheel thread (in runs too), those of
	 * them over wheel_run_budget_us, and the tasks moved to the executors for it. */
	uint64_t wheel_thread_runs, over_budget_runs, tasks_moved_off_wheel_thread;
	/* A recording (see "Recording"; all 0 without one): events written to its file,
	 * events dropped (its buffer full, or after a failed write), bytes written, and the
	 * errno of its first failed write (0: none). */
	uint64_t record_events, record_dropped, record_bytes;
	int record_error;
} tw_engine_stats;

/**
 * tw_stats_sized() - tw_stats() for a tw_engine_stats of @size bytes (see "Growing
 * structs"); the exported symbol behind it.
 *
 * Return, context and cost: as tw_stats().
 */
TW_API int tw_stats_sized(tw_engine *e, tw_engine_stats *out, size_t size);

/**
 * tw_stats() - the engine's counters.
 * @out: filled on success.
 *
 * Return: TW_OK, also after a stop; -TW_EINVAL for NULL @out. Any thread;
 * never blocks. Cost O(executors): the counters, the counts by state
 * included, are kept as work happens and summed here; each is read at its
 * own instant, so the counts by state may lag a move in flight by one.
 */
static inline int tw_stats(tw_engine *e, tw_engine_stats *out)
{
	return tw_stats_sized(e, out, sizeof *out);
}

/**
 * tw_record_status() - whether the engine's recording still writes (see "Recording").
 *
 * Return: TW_OK while it does, and for an engine that does not record; -TW_EIO once a
 * write (or the file's close) failed: errno is set to that failure's (ENOSPC for a full
 * disk), which tw_engine_stats.record_error also shows; the recording has stopped.
 * -TW_EINVAL for NULL @e; -TW_EFORKED in a forked child. Also after a stop. Any thread;
 * never blocks; O(1).
 */
TW_API int tw_record_status(tw_engine *e);

/* One executor's counters (tw_executor_stats). */
typedef struct {
	uint64_t queued;     /* firings in its queue now, not yet taken */
	uint64_t queued_max; /* the most its queue held when it took a firing, ever */
	uint64_t busy_ns;    /* time it spent in callbacks, ever */
	uint64_t runs;       /* runs it started, ever */
	uint64_t run_ns;     /* how long its run going on has lasted; 0: none going */
	bool spare;          /* a spare, started while every executor was stuck */
} tw_executor_info;

/**
 * tw_executor_stats_sized() - tw_executor_stats() for a tw_executor_info of @size bytes
 * (see "Growing structs"); the exported symbol behind it.
 *
 * Return, context and cost: as tw_executor_stats().
 */
TW_API int tw_executor_stats_sized(tw_engine *e, unsigned index, tw_executor_info *out,
				   size_t size);

/**
 * tw_executor_stats() - one executor's counters.
 * @index: 0 to tw_engine_stats.executors - 1 (the configured executors, then the spares).
 * @out: filled on success.
 *
 * Return: TW_OK, also after a stop; -TW_EINVAL for NULL @out; -TW_ENOTFOUND for an index of
 * no running executor. Any thread; never blocks; O(1).
 */
static inline int tw_executor_stats(tw_engine *e, unsigned index, tw_executor_info *out)
{
	return tw_executor_stats_sized(e, index, out, sizeof *out);
}

/* ==================================================================================== *
 * Names and calendars: named tasks, calendar tasks, cron schedules                     *
 * ==================================================================================== */

/*
 * Named tasks. A task may have a name (tw_task_spec.name), unique among the
 * engine's live tasks: tw_add of a name a live task has (waiting, running,
 * paused, or being added by another thread) answers -TW_EEXIST and adds
 * nothing (release is not called); of many threads adding one name at
 * once, exactly one succeeds. A task's name is free again as soon as the
 * task has ended (completed or stopped), not only once it is forgotten
 * after retain_ms. tw_find gives the live task of a name; tw_get and tw_list
 * show a task's name in tw_task_info.name for as long as they show the
 * task. Names cost an unnamed task nothing: they live beside the task table
 * (about 230 bytes per named task, in liburcu's lock-free hash tables), and
 * are freed when their task is forgotten, or by tw_engine_destroy. The
 * metrics show named tasks only when asked (tw_metrics_options.per_task):
 * a series per name multiplies what a monitoring system stores.
 */

/**
 * tw_find() - the id of the live task named @name (see "Named tasks").
 * @out: receives the id; untouched on failure.
 *
 * Return: TW_OK; -TW_EINVAL for NULL @e, @name or @out, or a name no task
 * can have ("", too long, a byte outside 0x20-0x7e); -TW_ENOTFOUND when no
 * live task has it (an ended task's name is not found); -TW_EFORKED. Works
 * after a stop (every task has ended then: -TW_ENOTFOUND). Any thread,
 * callbacks included; never blocks, takes no lock (a liburcu read-side
 * section); O(length of @name) on average.
 */
TW_API int tw_find(tw_engine *e, const char *name, tw_id *out);

/*
 * Calendar tasks: a task whose tw_task_spec has a cron expression (see
 * "Calendar schedules" below for the syntax and the zones) repeats at the
 * expression's fire times, which are wall-clock times (CLOCK_REALTIME), rather
 * than every period_ms (which must be 0).
 *  - Each due is the next fire time after the previous one, turned into a
 *    CLOCK_MONOTONIC due (rounded up to the 1 ms grid) when it is planned: at
 *    tw_add, at the previous firing, at tw_resume, and when the system clock
 *    is set. The first is the first fire time after tw_add, or, with a
 *    delay_ms, now + delay_ms (TW_NEVER: none until tw_set_delay gives one),
 *    or with a first_due_ns that time, the calendar going on from that
 *    firing. A calendar task may have a name like any task.
 *  - A calendar task is a periodic task in every other way: a firing due
 *    while its run goes is skipped as overlap (TW_RUN_LATE: it runs after),
 *    a firing that finds every queue full is skipped as overload, and after
 *    a stall that passed several fire times it runs once, for the latest
 *    (tw_fire.due_ns), the others skipped as missed (counted one by one up to
 *    100 000 per firing); it pauses, resumes (the first fire time after now),
 *    is paused by failures, and is released exactly once, like any task.
 *  - tw_set_delay moves its next firing only: the calendar resumes after that
 *    firing. tw_set_period answers -TW_ESTATE for it.
 *  - "@every D" makes an ordinary periodic task: period D rounded up to whole
 *    ms, first due D after tw_add (or delay_ms); tw_task_info.calendar is
 *    false for it.
 *  - When the system clock is set (settimeofday, clock_settime, an NTP step),
 *    the wheel thread learns it at once (a CLOCK_REALTIME timerfd with
 *    TFD_TIMER_CANCEL_ON_SET) and plans every calendar task's due again from
 *    the fire time it stands for: set forward past it, the task fires at once
 *    as after a stall; set back, it waits for that fire time on the new clock
 *    (it does not run the set-back hours' fire times again). Dues that
 *    tw_set_delay set, and every task without a cron expression, stay on the
 *    monotonic clock and do not move. The clock's slow corrections (NTP's
 *    slewing) are taken in at each firing.
 *  - With the manual clock, the wall-clock time is the one at tw_engine_create
 *    plus the manual time advanced since, and the system clock is not
 *    watched.
 *  - A schedule with no further fire time within the search bound leaves the
 *    task waiting, its next due TW_MAX_DELAY_MS away (next_due_wall_ns 0).
 * Each firing of a calendar task computes its next fire time (tw_cron_next)
 * and reads the wall clock; perf/README.md has its cost beside a periodic
 * task's. The schedule is parsed by tw_add (as tw_cron_parse, whose errors it
 * answers: call tw_cron_parse first for an error's position).
 */

/*
 * Calendar schedules: cron expressions, parsed and evaluated by the library
 * alone (no engine, no thread, no clock read: the time is passed in), so a
 * program can check an expression and show its next fire times before it
 * uses it. Times are nanoseconds since the Unix epoch (CLOCK_REALTIME's
 * count, without leap seconds), in an int64_t: 1677 to 2262.
 *
 * Syntax, as Vixie cron and robfig/cron read it:
 *
 *   [CRON_TZ=ZONE |TZ=ZONE ] SEC MIN HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK
 *   [CRON_TZ=ZONE |TZ=ZONE ] MIN HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK   (seconds 0)
 *   [CRON_TZ=ZONE |TZ=ZONE ] @yearly | @annually | @monthly | @weekly | @daily |
 *                            @midnight | @hourly | @every DURATION
 *
 *  - fields are separated by blanks (spaces, tabs); seconds and minutes are
 *    0-59, hours 0-23, days of the month 1-31, months 1-12 or JAN-DEC, days
 *    of the week 0-7 (0 and 7 are Sunday) or SUN-SAT; names are three
 *    letters, in any case, as are the macros;
 *  - each field is a list of items separated by commas; an item is "*" (every
 *    value), a value, a range "10-40" (its start not after its end: no
 *    wrapping), each with an optional step "/N", N >= 1 written in any number
 *    of digits: "*\/5" (a comment cannot hold "*" and "/" together: read it
 *    without the backslash), "10-40/10", and "5/15", which is "5-59/15"; a
 *    step past the end gives the first value alone ("*\/1000" in minutes is
 *    minute 0); in day-of-week, "*" and "N/step" stop at 6 (Saturday), so
 *    "*\/2" is 0, 2, 4, 6 and "5/1" is 5-6: 7 is Sunday only when written;
 *    "?" is "*" in day-of-month and day-of-week, and refused elsewhere;
 *  - the day: when day-of-month and day-of-week are both restricted, a day
 *    matching either matches ("0 0 1,15 * MON": the 1st, the 15th and every
 *    Monday); when either is written "*" or "?" (a step of 1 at most), the
 *    other alone decides. "*\/2" is restricted (robfig/cron's rule);
 *  - the macros are "0 0 0 1 1 *", the same, "0 0 0 1 * *", "0 0 0 * * 0",
 *    "0 0 0 * * *", the same, "0 0 * * * *";
 *  - "@every DURATION" (a duration as tw_parse_duration reads it, in any
 *    number of characters, above 0:
 *    "@every 150ms", "@every 1.5s"; a bare number is milliseconds) is a fixed
 *    period counted from the time the schedule is planned, not aligned to
 *    the clock or the zone: its fire times after T are T + k x DURATION,
 *    to the nanosecond. Every other schedule fires on whole seconds.
 *
 * Zones. A schedule's local time is that of its zone: the ZONE of a
 * "CRON_TZ=" or "TZ=" prefix (robfig/cron's), an IANA name such as
 * Europe/Berlin read from the system's zoneinfo ($TZDIR, else
 * /usr/share/zoneinfo: Debian's tzdata package), "UTC" (needs no file), or
 * "Local"; without a prefix, Local: the process's zone as glibc's
 * localtime() finds it (the TZ variable, else /etc/localtime, else UTC).
 * A TZ that is a POSIX string ("XST-3XDT,M3.5.0,M10.5.0/3", when no zone
 * file has that name) gives the offsets glibc gives, except in two cases:
 *  - a string without rules ("CET-1CEST") has the rules M3.2.0,M11.1.0
 *    (the United States' since 2007) in every year; glibc moves the table
 *    of $TZDIR/posixrules (America/New_York) to the string's offsets, so it
 *    differs on the change's date before 2007 and its hour always, and
 *    gives New York's own offsets after 2037, where that table ends;
 *  - a rule applies to the local year (as POSIX and RFC 8536 read it),
 *    where glibc takes the rules of the UTC year: they differ within the
 *    UTC offset of New Year when a change comes then. "EST5EDT,0/0,J365/25"
 *    (daylight time all year, RFC 8536 section 3.3.1) is daylight time at
 *    every instant, where glibc gives standard time for the first five
 *    hours (UTC) of each year.
 * The zone's rules are read once, when the expression is parsed, and kept
 * in the schedule: tzset() is never called and the process's TZ never
 * changed or consulted again, so a later change of TZ or /etc/localtime
 * does not move a parsed schedule (parse it again). Parsing reads the zone's
 * file (a few KiB), Local's too.
 *
 * Daylight-saving time and other changes of a zone's offset:
 *  - a local time that occurs twice (the clock set back: 02:00-03:00 on the
 *    last Sunday of October in Berlin) fires once, at its first occurrence;
 *  - a local time that does not occur that day (the clock set forward:
 *    02:00-03:00 on the last Sunday of March in Berlin) fires at the instant
 *    the clock jumps (03:00 in Berlin), once however many of the skipped
 *    times match, as Vixie cron runs such jobs, so that a nightly job at
 *    02:30 does not lose a night (robfig/cron and systemd skip it);
 *  - except for "wild" schedules, whose hour or minute field starts with "*"
 *    ("0 *\/5 * * * *", "@hourly"; Vixie cron's rule): they fire at every
 *    instant whose local clock matches, twice in a repeated hour and not
 *    at all in a skipped one, as a clock on the wall would show them.
 * So a schedule's fire times are one set whatever the starting point, and
 * consecutive calls see each fire time once.
 */

/*
 * Where and why tw_cron_parse refused an expression. This struct does not
 * grow.
 */
typedef struct {
	size_t offset;      /* the byte where the error is (the expression's length: at its end) */
	const char *reason; /* a static English sentence; NULL after success */
} tw_cron_error;

typedef struct tw_cron tw_cron; /* a parsed schedule; read-only once made */

/**
 * tw_cron_parse() - parses a cron expression (see "Calendar schedules").
 * @expr: the expression, NUL-terminated; not kept.
 * @out: receives the schedule (free it with tw_cron_free); NULL on failure.
 * @err: if not NULL, receives the position and reason of an error.
 *
 * Return: TW_OK; -TW_EINVAL for NULL @expr or @out; -TW_ESYNTAX for an
 * expression that is not valid; -TW_ENOZONE for a zone that is unknown, or
 * whose file cannot be read, is not a regular file (a FIFO or a device is
 * not opened for reading: no wait for a writer) or is not valid TZif data;
 * -TW_ENOMEM when
 * memory runs out. Any thread. Blocks while it reads the zone's file (not
 * for "UTC"). Cost O(length) plus that read: see perf/README.md.
 */
TW_API int tw_cron_parse(const char *expr, tw_cron **out, tw_cron_error *err);

/**
 * tw_cron_next() - the next @n fire times strictly after @after_ns.
 * @times: receives them in ns since the epoch, in order.
 *
 * Each fire time is searched for within 3660 days (ten years and more)
 * after the one before it (after @after_ns for the first): a schedule that
 * never fires, such as "0 0 30 2 *" (30 February), answers -TW_ENOMATCH in
 * microseconds instead of searching forever; one that fires at all does so
 * within that bound (29 February comes back 8 years later across 2100).
 *
 * Return: TW_OK; -TW_EINVAL for NULL @cron, or NULL @times with @n > 0;
 * -TW_ENOMATCH when a fire time is not found within the bound; -TW_ERANGE
 * when one would be past 2262 (INT64_MAX ns). On either of those two, the
 * times found come first in @times and every later slot holds INT64_MIN.
 * Any thread, several at once on one schedule; never blocks, allocates
 * nothing. Cost O(n) for @every; else about the fields' steps, per fire
 * time: see perf/README.md.
 */
TW_API int tw_cron_next(const tw_cron *cron, int64_t after_ns, int64_t *times, size_t n);

/**
 * tw_cron_utc_offset() - the UTC offset of @cron's zone at @unix_ns.
 * @offset_s: receives it, in seconds east of UTC (Berlin in summer: 7200).
 *
 * For showing fire times in the schedule's own local time.
 * Return: TW_OK; -TW_EINVAL for NULL @cron or @offset_s. Any thread; never
 * blocks; O(log changes of the zone).
 */
TW_API int tw_cron_utc_offset(const tw_cron *cron, int64_t unix_ns, int32_t *offset_s);

/**
 * tw_cron_free() - frees a schedule. NULL: nothing. Any thread, once no
 * other call uses @cron; O(1).
 */
TW_API void tw_cron_free(tw_cron *cron);

/* ==================================================================================== *
 * Snapshots: a named task's schedule across a restart                                  *
 * ==================================================================================== */

/*
 * Snapshot and restore: a named task's schedule survives a restart of the
 * process. tw_snapshot writes every named live task (waiting, running or
 * paused; unnamed tasks are left out) to a file; tw_restore, in the next
 * process, adds them again to an engine. What is kept, per task:
 *  - its name, and its schedule: a fixed period (a one-shot: none), or the
 *    cron expression's text as tw_add was given it ("@every" tasks are fixed
 *    periods, kept as their period in ms);
 *  - its next due as a wall-clock time (ns since the epoch): a calendar
 *    task's next_due_wall_ns, any other task's next_due_ns turned into wall
 *    time with the offset between the clocks read once per snapshot; none
 *    for a paused task or one waiting with no due (TW_NEVER);
 *  - paused or not, and paused_by_failures; a one-shot's delay, which it
 *    resumes with; the flags TW_CONCURRENT, TW_RUN_LATE, TW_ON_WHEEL_THREAD
 *    (the last as it is now: off for a task the budget guard moved);
 *  - its misfire policy (tw_task_spec.misfire), and its counters: runs,
 *    failures, consecutive_failures, slow_runs, and the skips by reason.
 * The application keeps the rest: callbacks and their args are code and
 * memory of one process, not data. tw_restore hands each task it reads to
 * a resolver of the application's, which maps the name to a callback, arg
 * and release, or declines the task.
 *
 * Not kept: tw_task_info's durations and lateness (they start again at 0),
 * a run going on at the snapshot (the task is kept with its next due), a
 * one-shot whose last run goes (it is completing: left out), a delay set
 * on a paused periodic task (it resumes by its period), and the ids (a
 * restored task gets a new one: find it by name, tw_find).
 *
 * Misfires: a due that passed while the process was down (the saved wall
 * time is at or before the restoring engine's wall-clock time) follows the
 * task's misfire policy:
 *  - TW_MISFIRE_RUN_ONCE (the default): the task runs once at restore (its
 *    due is the restoring engine's current tick); the other fire times that
 *    passed count in skipped_missed (and in the first run's tw_fire.skipped).
 *    A periodic task's later dues follow that run by whole periods (its phase
 *    is the restore's); a calendar task's calendar goes on after now;
 *  - TW_MISFIRE_SKIP: every fire time that passed counts in skipped_missed
 *    (not in tw_fire.skipped: the first run is an ordinary one, on the
 *    schedule), and the task waits for its first due after now: a periodic
 *    task's on its saved phase (the saved due plus whole periods), a
 *    calendar task's the schedule's first fire time after now. A one-shot has no due after now:
 *    it is not added (nor shown to the resolver), and counts in
 *    tw_restore_result.expired.
 * A periodic task's passed fire times are counted exactly ((now - due) /
 * period + 1); a calendar task's one by one with tw_cron_next, up to
 * TW_RESTORE_MISSED_MAX missed ones per task (the count stops there; the
 * fire time a TW_MISFIRE_RUN_ONCE run stands for is not one of them, as
 * for the misses counted at run time). Skips counted at restore add to
 * tw_engine_stats.skipped_missed too; the restored counters do not (they
 * are the task's history, not this engine's work).
 *
 * The file (format: api/snapshot-format.md) is versioned and checksummed
 * (CRC-32 of the whole file). tw_restore refuses a file that is truncated,
 * corrupted, of another version or no snapshot at all, whole, with one code,
 * and adds nothing then; it also adds nothing when it fails for any other
 * reason (a name taken, max_tasks, memory): tasks it had added are
 * cancelled, and every release the resolver handed over is called exactly
 * once.
 */

/**
 * tw_snapshot() - writes every named live task's schedule to @path, atomically.
 * @tasks: if not NULL, receives how many tasks were written.
 *
 * Writes a new file "@path.tmp-XXXXXX" beside @path (mkstemp: mode 0600), fsyncs
 * it, renames it over @path, and fsyncs the directory: a crash leaves @path as
 * it was or as the new snapshot, never a mix, and once the call returns TW_OK
 * the new one survives a power loss. The tasks are read as tw_list reads them,
 * each whole under its lock while the engine goes on: a task added or ended
 * during the walk is in the file or not. On failure the temporary file is
 * removed and @path is untouched.
 *
 * A @path that is a symbolic link is written through: the file at the end of
 * its links (resolved when the call starts; it need not exist yet) is
 * replaced, by a temporary file in that file's directory, and the links stay.
 * A loop of links answers -TW_EIO with errno ELOOP.
 *
 * A process killed during a snapshot leaves its temporary file. The writer
 * holds an exclusive flock() on its temporary file from its creation until
 * it has been renamed, and each successful snapshot then removes, in the
 * directory of the file it replaced, the temporary files of the same path
 * that are stale: named "@path.tmp-" and six letters or digits, regular
 * files (not links), empty or starting with the snapshot magic, and not
 * locked. So a snapshot to the same path going on in another thread, engine
 * or process keeps its file (on a file system where flock() works between
 * those processes: a local one; on NFS, snapshot one path from one host).
 * The removal is best effort: a file it cannot remove stays, and the call
 * still succeeds.
 *
 * Return: TW_OK; -TW_EINVAL for NULL @e or @path, or "" ; -TW_EIO when a system
 * call failed: errno is that call's (ENOENT for a missing directory, EACCES,
 * ENOSPC, EIO, ENAMETOOLONG ...), as it was when the call failed; -TW_ENOMEM;
 * -TW_ESHUTDOWN after tw_engine_stop (every task has ended: an empty snapshot
 * would replace the good one: snapshot before stopping); -TW_EFORKED.
 * Any thread; a callback may call it, but it blocks its thread for the file's
 * writing and fsyncs (milliseconds to seconds): not from a TW_ON_WHEEL_THREAD
 * callback, which would stop every firing meanwhile. Two snapshots to one path
 * at once are safe (each renames a whole file; the later rename wins). Cost
 * O(slots), as tw_list, plus about 100 bytes and the name written per named
 * task, the fsyncs (perf/README.md has the time of a million tasks), and a
 * read of the directory's entries for the stale files. It holds no lock of
 * the engine while it writes, and each task's lock for a few hundred
 * instructions.
 */
TW_API int tw_snapshot(tw_engine *e, const char *path, uint64_t *tasks);

/* The most missed fire times tw_restore counts for one calendar task (the fire time of the run
 * at restore not among them). */
#define TW_RESTORE_MISSED_MAX 10000

/*
 * A task read from a snapshot, as the resolver sees it (valid during that
 * call only). The library fills it, and it only ever grows at its end (as
 * tw_fire does).
 */
typedef struct {
	const char *name;   /* NUL-terminated */
	const char *cron;   /* a calendar task's expression, NUL-terminated; NULL for others */
	uint64_t period_ms; /* 0 for a one-shot and a calendar task */
	unsigned flags;     /* TW_CONCURRENT, TW_RUN_LATE, TW_ON_WHEEL_THREAD */
	unsigned misfire;   /* TW_MISFIRE_* */
	bool paused, paused_by_failures;
	/* The saved next due, wall-clock ns since the epoch; 0: none (paused, or TW_NEVER). */
	int64_t next_due_wall_ns;
	/* The task will run at restore for a due that passed (TW_MISFIRE_RUN_ONCE), and the
	 * missed fire times that count as skipped_missed. */
	bool misfired;
	uint64_t missed;
	uint64_t runs, failures, consecutive_failures, slow_runs;
	uint64_t skipped_overlap, skipped_overload, skipped_missed; /* as saved */
} tw_snapshot_task;

/* What a resolver hands over for a task it accepts. This struct does not grow. */
typedef struct {
	tw_callback callback; /* required */
	void *arg;
	void (*release)(void *arg); /* optional; called exactly once, as tw_add's */
} tw_resolved;

/* A resolver's answer for a task it does not want: it is not restored. */
#define TW_RESOLVE_DECLINE 1

/*
 * Called by tw_restore once per task to restore, in the file's order, in the
 * thread that called tw_restore, before any task is added. Returns 0 with
 * *out filled (out->callback not NULL) to accept the task; from then on the
 * library owns out->arg: out->release(out->arg) is called exactly once,
 * when the task ends, or by tw_restore itself if the restore fails.
 * TW_RESOLVE_DECLINE declines the task (nothing of out is read). A negative
 * TW_E* code stops the restore: tw_restore returns it, having added nothing
 * (and released what was accepted); any other value stops it with
 * -TW_EINVAL, that task not handed over. It may call any function (a task
 * it adds with a name of the file makes the restore fail with -TW_EEXIST).
 */
typedef int (*tw_resolver)(const tw_snapshot_task *task, void *ctx, tw_resolved *out);

/* What tw_restore did. The library fills it ("Growing structs"). */
typedef struct {
	uint64_t records;          /* tasks in the file */
	uint64_t restored;         /* tasks added */
	uint64_t declined;         /* refused by the resolver */
	uint64_t expired;          /* one-shots whose due passed, with TW_MISFIRE_SKIP: not added */
	uint64_t misfired_run;     /* restored tasks that run once at restore for a passed due */
	uint64_t misfired_skipped; /* restored tasks that skip to their next due after now */
	uint64_t skipped_missed;   /* missed fire times counted over all the restored tasks */
	/* Records of a name that comes again later in the file (a task that ended and was
	 * named again during the snapshot's walk): the later record is restored. */
	uint64_t duplicates;
	int64_t written_wall_ns; /* when the snapshot was written (wall clock, ns) */
} tw_restore_result;

/**
 * tw_restore_sized() - tw_restore() for a tw_restore_result of @size bytes (see "Growing
 * structs"); the exported symbol behind it.
 *
 * Return, context, blocking and cost: as tw_restore().
 */
TW_API int tw_restore_sized(tw_engine *e, const char *path, tw_resolver resolve, void *ctx,
			    tw_restore_result *out, size_t size);

/**
 * tw_restore() - adds the tasks of the snapshot at @path to @e (see "Snapshot
 * and restore").
 * @resolve: maps each task to its callback (see tw_resolver); required.
 * @ctx: handed to @resolve.
 * @out: if not NULL, receives what was done (zeroed first; filled on failure
 * too, as far as it went).
 *
 * In this order: reads the whole file, checks it whole (magic, version,
 * checksum, every record; each cron expression parsed and its next fire
 * time after now found, as tw_add does; a file whose names are not unique
 * keeps the last record of each, see duplicates), checks that no live task
 * of @e has one of its names, then calls @resolve for each task,
 * adds the accepted ones with no due, and only once every one is added gives
 * each its counters, its due (see "Misfires") or its pause. Until it
 * returns, a restored task may be seen (tw_find, tw_list) waiting with no due.
 * The "now" misfires are judged against is read once, at the start: the
 * engine's clock plus its wall-clock offset (with manual_clock, the manual
 * wall-clock time: see "Calendar tasks").
 *
 * Return: TW_OK (also when every task was declined or expired);
 * -TW_EINVAL for NULL @e, @path or @resolve, or a resolver that accepted with
 * no callback; -TW_EIO when the file cannot be read (errno: ENOENT for a
 * missing file, ...); -TW_ENOTSNAPSHOT for a file without the snapshot magic
 * (an empty file too); -TW_EVERSION for a snapshot of another format version;
 * -TW_ECORRUPT for one truncated, whose checksum does not match, or with a
 * record that is not valid; -TW_ESYNTAX or -TW_ENOZONE for a cron expression
 * this machine cannot parse (a zone missing here), -TW_ENOMATCH for one
 * with no fire time within the search bound (as tw_add answers them);
 * -TW_EEXIST when a live task of @e has a name of the file (also one added
 * meanwhile by another thread); -TW_ELIMIT (max_tasks); -TW_ENOMEM;
 * -TW_ESHUTDOWN; -TW_EFORKED; or the negative code @resolve returned. On
 * any failure nothing is left added and every accepted release has been
 * called once.
 * Any thread, a callback too (not a TW_ON_WHEEL_THREAD one: it blocks on the
 * file). Blocks while it reads the file. Cost O(tasks): the file and its
 * parsed records are held in memory while it runs (about 270 bytes per task),
 * each name is looked up, and each task added as by tw_add (perf/README.md,
 * "Snapshot and restore", has the time of a million tasks against adds).
 */
static inline int tw_restore(tw_engine *e, const char *path, tw_resolver resolve, void *ctx,
			     tw_restore_result *out)
{
	return tw_restore_sized(e, path, resolve, ctx, out, sizeof *out);
}

/* ==================================================================================== *
 * Metrics and listing: Prometheus text, every task visited                             *
 * ==================================================================================== */

/*
 * Prometheus metrics: tw_metrics_write and tw_metrics_format (below) write
 * the engine's tw_engine_stats in the Prometheus text exposition format,
 * version 0.0.4 (Content-Type: text/plain; version=0.0.4), for an HTTP
 * handler to serve at /metrics. Each family has its HELP and TYPE lines;
 * names are prefix + the name below (the default prefix: "tickwheel_"):
 *
 *   runs_total, failures_total, slow_runs_total       counters
 *   skipped_total{reason="overlap|overload|missed"}   counter
 *   tasks_completed_total, tasks_stopped_total        counters
 *   wheel_wakeups_total, stuck_runs_total             counters
 *   wheel_thread_runs_total, over_budget_runs_total   counters (TW_ON_WHEEL_THREAD)
 *   tasks_moved_off_wheel_thread_total                counter
 *   tasks_live, tasks{state="waiting|running|paused"} gauges (live = the sum)
 *   spare_executors                                   gauge
 *   lateness_seconds                                  histogram: run start minus due
 *   lateness_max_seconds                              gauge: the largest ever
 *   task_runs_total{task}, task_failures_total{task}  counters, per named live task,
 *   task_skipped_total{reason,task}                   only with per_task (see there)
 *
 * The histogram's buckets are cumulative, le="0.000001" (1 us) to le="4.194304"
 * (2^22 us) doubling, then le="+Inf" (= _count); _sum is lateness_sum_ns in
 * seconds. A bucket's bound is exclusive: a run late by 2^i us to the
 * nanosecond counts in the next bucket up.
 */
typedef struct tw_metrics_options {
	/* Put before every name: [a-zA-Z_:][a-zA-Z0-9_:]*, or "" for none. NULL:
	 * "tickwheel_". */
	const char *prefix;
	/* Labels added to every sample, as NULL-terminated name, value pairs
	 * ({"engine", "gw1", NULL}), or NULL for none. A name is
	 * [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__", not "le", "reason" or
	 * "state" (the library's own), and appears once; else -TW_EINVAL. A value
	 * is any UTF-8 text: backslash, double quote and newline are escaped. */
	const char *const *labels;
	/* Adds series per named live task (see "Named tasks"), labelled task="NAME":
	 * task_runs_total, task_failures_total, task_skipped_total{reason=...}. Each name
	 * is a series of its own in the monitoring system, kept as long as it keeps old
	 * series: with many names, or names that change (one per session), the series
	 * multiply until they overload it; name only the tasks worth a series each.
	 * Unnamed tasks are left out. Costs a walk of the task table per family
	 * (O(slots), as tw_list). With it, "task" is not a label name of yours. */
	bool per_task;
} tw_metrics_options;

/*
 * Receives the text: called one or more times, in order, on the thread
 * that called tw_metrics_write and before it returns, with pieces of at
 * most a few KiB (not NUL-terminated, not cut on line ends). It may block
 * (a slow socket): the engine holds no lock while it writes, and its
 * threads go on meanwhile; it may call the engine's functions. Nonzero
 * stops the writing: tw_metrics_write returns -TW_EWRITE (keep the
 * reason, an errno, in ctx).
 */
typedef int (*tw_metrics_writer)(void *ctx, const char *data, size_t len);

/**
 * tw_metrics_write_sized() - tw_metrics_write() for a tw_metrics_options of @size bytes
 * (see "Growing structs"); the exported symbol behind it.
 *
 * Return, context, blocking and cost: as tw_metrics_write().
 */
TW_API int tw_metrics_write_sized(tw_engine *e, const tw_metrics_options *opt, size_t size,
				  tw_metrics_writer write, void *ctx);

/**
 * tw_metrics_write() - writes the engine's metrics (see "Prometheus metrics") through
 * write(ctx, ...).
 * @opt: may be NULL: the default prefix, no labels.
 * @write: receives the text, in pieces (see tw_metrics_writer); required.
 * @ctx: handed to @write.
 *
 * The stats are read once, as tw_stats reads them (O(executors), see there), then
 * formatted without any lock and without allocating (about 4 KiB of text; more with
 * long labels). It takes no lock the engine's threads wait for.
 *
 * Return: TW_OK; -TW_EINVAL for a NULL engine or writer, or bad options (nothing is
 * written then); -TW_EWRITE when write returned nonzero (the text is cut there);
 * -TW_EFORKED. Works after tw_engine_stop, like tw_stats; callable from a callback.
 * Blocks only while @write blocks, on the calling thread. Cost O(executors) plus the
 * text; with per_task, a walk of the task table per family (O(slots), as tw_list).
 */
static inline int tw_metrics_write(tw_engine *e, const tw_metrics_options *opt,
				   tw_metrics_writer write, void *ctx)
{
	return tw_metrics_write_sized(e, opt, sizeof *opt, write, ctx);
}

/**
 * tw_metrics_format_sized() - tw_metrics_format() for a tw_metrics_options of @size bytes
 * (see "Growing structs"); the exported symbol behind it.
 *
 * Return, context and cost: as tw_metrics_format().
 */
TW_API int tw_metrics_format_sized(tw_engine *e, const tw_metrics_options *opt, size_t size,
				   char *buf, size_t cap, size_t *len);

/**
 * tw_metrics_format() - the text of tw_metrics_write into a buffer.
 * @opt: as tw_metrics_write's.
 * @buf: receives the text; may be NULL when @cap is 0.
 * @cap: @buf's size in bytes.
 * @len: if not NULL, gets the text's length.
 *
 * The same text into buf, NUL-terminated, as snprintf would: *len (len may
 * be NULL) gets the text's length without the NUL. When it does not fit in
 * cap bytes the call returns -TW_ENOSPACE, buf holds as much as fits (cut,
 * NUL-terminated, if cap > 0) and *len says how long the whole text is:
 * call again with cap > *len, with some room to spare since the counts
 * grow meanwhile. buf may be NULL when cap is 0, to learn the length.
 *
 * Return: TW_OK; -TW_ENOSPACE when the text does not fit (above); -TW_EINVAL
 * for NULL @buf with @cap > 0. Other codes as tw_metrics_write's. Any thread,
 * a callback too, also after tw_engine_stop; it waits for nothing and
 * allocates nothing. Cost as tw_metrics_write's.
 */
static inline int tw_metrics_format(tw_engine *e, const tw_metrics_options *opt, char *buf,
				    size_t cap, size_t *len)
{
	return tw_metrics_format_sized(e, opt, sizeof *opt, buf, cap, len);
}

/* tw_list's flags. */
enum {
	TW_LIST_ENDED = 1u << 0, /* visit the ended tasks still kept (retain_ms) too */
};

/* tw_list's visitor gets a tw_task_info of info_size bytes (filled as tw_get fills one). */
typedef int (*tw_visit_fn)(tw_id id, const tw_task_info *info, void *ctx);

/**
 * tw_list_sized() - tw_list() for a tw_task_info of @info_size bytes handed to @visit (see
 * "Growing structs"); the exported symbol behind it.
 *
 * Return, context and cost: as tw_list().
 */
TW_API int tw_list_sized(tw_engine *e, unsigned flags, tw_visit_fn visit, void *ctx,
			 size_t info_size);

/**
 * tw_list() - calls @visit for each task while the engine goes on.
 * @flags: 0 or TW_LIST_ENDED.
 * @visit: called once per task; required.
 * @ctx: handed to @visit.
 *
 * Visits the engine's tasks without stopping it: visit(id, info, ctx) is
 * called once per task, info being what tw_get would answer for it when it
 * was read (valid during that call only). Without flags the live tasks are
 * visited (TW_WAITING, TW_RUNNING, TW_PAUSED); with TW_LIST_ENDED also the
 * ended ones still kept (TW_COMPLETED, TW_STOPPED; retain_ms). Tasks come in
 * the order of their slots, not of their ids or dues.
 *
 * Tasks are added, fire, change and end during the walk, and it is no
 * snapshot of one instant: each task is read when its turn comes. A task
 * that exists for the whole walk is visited exactly once; one added or
 * ended during it, once or not at all; no id is visited twice.
 *
 * The walk blocks nothing and waits for nothing: it takes no lock (but a
 * task's own lock for a few instructions, as tw_get, when its period is
 * 2^31 ms or more), and holds no lock or RCU read-side section while visit
 * runs. So visit may call any function on any task, the one visited
 * included (cancel it, pause it, add tasks: visited or not, as above),
 * tw_list again, tw_engine_stop (the tasks are ended then: the walk goes on
 * and, without TW_LIST_ENDED, visits no more); not tw_engine_destroy of this
 * engine: return nonzero, then destroy. tw_list may be called from a
 * callback. After tw_engine_stop it still answers: every task is ended then,
 * and with TW_LIST_ENDED it visits their final states and counts.
 *
 * Return: 0 once every task was visited, or the first nonzero value visit
 * returned: that stops the walk (return positive values to tell them from
 * the codes below). -TW_EINVAL for a NULL engine or visit, or unknown
 * flags; -TW_ENOMEM if an info_size above the library's tw_task_info found
 * no memory for a copy; -TW_EFORKED in a forked child.
 *
 * Cost: O(slots), the most tasks the engine has held at once (slots are
 * reused, never freed), read in order, plus visit's own time (perf/README.md
 * has the time per task, from tw-perf list).
 */
static inline int tw_list(tw_engine *e, unsigned flags, tw_visit_fn visit, void *ctx)
{
	return tw_list_sized(e, flags, visit, ctx, sizeof(tw_task_info));
}

/* ==================================================================================== *
 * Testing with the manual clock                                                        *
 * ==================================================================================== */

/*
 * The manual clock (cfg.manual_clock, for tests) moves only by tw_advance,
 * and firings happen only inside tw_advance: a task due at the current
 * manual time (a delay of 0, a re-arm to 0 from a callback) waits for the
 * next tw_advance, even tw_advance(e, 0). The wheel thread takes in the
 * changes made since the last tw_advance (callbacks' included) when the next
 * one begins, so the order within a millisecond is exact: the order of the
 * changes that file a task (an add, a move earlier, a resume: see "Due
 * times"), a task changed several times at the place of the first of those.
 * A postpone, a pause or a period change files nothing: made before, it
 * gives the task no place. After tw_advance(e, ms) and
 * tw_quiesce, every firing due at or before the new time has run (or been
 * skipped by the rules above) and no other has; callbacks see the new time
 * as now, so a one-shot armed from a callback for 1 ms comes due 1 ms after
 * the end of that tw_advance.
 */

/**
 * tw_advance() - moves the manual clock by @ms and hands out every firing due
 * up to the new time (see "The manual clock").
 *
 * Return: TW_OK once the firings are handed to the executors (a one-shot that
 * found every queue full is handed out as room frees), not once they ran;
 * -TW_ESTATE on an engine without manual_clock; -TW_ERANGE for @ms above
 * TW_MAX_DELAY_MS or for a time that would pass 2^64 - 1 ns less TW_MAX_DELAY_MS
 * ms (the clock stops short of 2^64 ns by the longest delay, so that every
 * delay it accepts has a due; the clock is left where it was); -TW_ESHUTDOWN;
 * -TW_ECALLBACK from a TW_ON_WHEEL_THREAD callback (it would wait for its own
 * thread). Any thread, executors' callbacks included. Blocks until the wheel
 * thread has handed the firings out (and run TW_ON_WHEEL_THREAD tasks'
 * callbacks): O(firings due).
 */
TW_API int tw_advance(tw_engine *e, uint64_t ms);

/**
 * tw_quiesce() - waits until no run is in progress and no firing that is due
 * waits to be handed out (a one-shot waiting for room).
 *
 * A task that ended on an executor (a one-shot's last run, a cancel from
 * its callback) has been released when tw_quiesce returns.
 *
 * Return: TW_OK (also after a stop); -TW_ECALLBACK from a callback (it would
 * wait for its own run). Blocks as long as runs go on: a stuck run keeps it
 * waiting.
 */
TW_API int tw_quiesce(tw_engine *e);

/* ==================================================================================== *
 * Utilities: versions, error texts, durations                                          *
 * ==================================================================================== */

/*
 * Versions. The library follows semantic versioning: a new MINOR only adds
 * (functions, codes, flags, struct fields at the end), a new MAJOR may break
 * callers and changes the shared library's soname (libtickwheel.so.MAJOR).
 * TW_VERSION_* say which header a program was built with, tw_version() which
 * library it runs with.
 */
#define TW_VERSION_MAJOR  1
#define TW_VERSION_MINOR  1
#define TW_VERSION_PATCH  0
#define TW_VERSION_STRING "1.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH, for #if TW_VERSION_NUMBER >= ... */
#define TW_VERSION_NUMBER (TW_VERSION_MAJOR * 10000 + TW_VERSION_MINOR * 100 + TW_VERSION_PATCH)

/**
 * tw_version() - the library's version, "MAJOR.MINOR.PATCH".
 *
 * Return: a static string (compare with TW_VERSION_STRING to see whether the
 * program runs with the library it was built with). Any thread; O(1).
 */
TW_API const char *tw_version(void);

/**
 * tw_strerror() - the text of a code, either sign: "success" for TW_OK,
 * "unknown error" for a number that is no code. A static string; never NULL.
 * Any thread; O(1).
 */
TW_API const char *tw_strerror(int code);

/**
 * tw_parse_duration() - parses a duration as people write it into ns.
 *
 * A decimal number and a unit, ns, us, ms, s, m (or min) or h ("200ms",
 * "1.5s", "2m"); a bare number is milliseconds. Fractions finer than 1 ns
 * are dropped. Return: TW_OK; -TW_EINVAL for NULL or anything else (a range
 * included); -TW_ERANGE beyond 2^64 ns. Any thread; O(length).
 */
TW_API int tw_parse_duration(const char *text, uint64_t *out_ns);

/**
 * tw_parse_duration_range() - the same for a range, "100-500ms" or "1s-2m".
 *
 * A unit written once, after the range, applies to both ends; a single
 * duration gives lo == hi. Return: as tw_parse_duration, and -TW_EINVAL when
 * the low end is above the high end.
 */
TW_API int tw_parse_duration_range(const char *text, uint64_t *lo_ns, uint64_t *hi_ns);

#ifdef __cplusplus
}
#endif
#endif
