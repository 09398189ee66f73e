/*
 * tickwheel_cluster.h - libtickwheel-cluster: jobs defined on every replica of a program, run
 * once per fire time across them, at the engine's precision. etcd (3.4 or later, its v3 API
 * through the JSON gateway) holds who owns a job and each claimed fire time; the local
 * tickwheel engine fires the runs. Link with pkg-config's tickwheel-cluster.
 *
 * Every function returns TW_OK (0) or a negated code: the core's TW_E* codes and the
 * TW_CLUSTER_E* codes below; tw_cluster_strerror() names both.
 *
 * How it works, and what it promises:
 *
 * Members. A replica joins (tw_cluster_join) with the etcd endpoints, a namespace prefix that
 * every replica of the program shares, a member name of its own and a lease TTL. It holds an
 * etcd lease, renewed every third of the TTL, under which it records itself as a member. It
 * leaves (tw_cluster_leave) by revoking the lease: what it owned is free at once. A replica
 * that dies is gone when its lease expires: TTL seconds after its last renewal, and etcd
 * notices within half a second more. A member takes its share of the groups at once; a
 * replica that joins with cfg.attach_later is no member until tw_cluster_attach, so that it
 * adds its jobs and handlers first and runs the groups it takes from the start.
 *
 * Jobs. A cluster job (tw_cluster_add) is a named periodic or calendar task that every replica
 * defines, each in its own engine. Its fire times are instants in UTC milliseconds that every
 * replica computes alike: a calendar job's are its cron expression's (tw_cron_next); a
 * periodic job's are the multiples of its period since the Unix epoch, plus its phase. The
 * first replica to add a job records its schedule in etcd; a replica that adds the same name
 * with another schedule is refused (-TW_CLUSTER_ECONFLICT), never merged.
 *
 * Groups and owners. Jobs are hashed by name into cfg.groups groups. Each group has at most
 * one owner, recorded under the owner's lease by a create-if-absent transaction. Replicas
 * spread the groups among the live members: the members sorted by name, the first
 * (groups mod members) take one group more than the others, so once membership settles no
 * replica owns more than one group above another. A replica that owns more than its share
 * stops claiming in the extra groups and hands them back once the fire times it claimed there
 * have run; the taker takes them within a round of the worker (100 ms), and a fire time due in
 * between is handled as at a takeover (below). The fencing token of an owner is the etcd
 * revision at which it took the group: it only grows, across owners and groups.
 *
 * Claims. Only the owner of a job's group runs the job, and only for a fire time it claimed:
 * an etcd transaction that creates the key (job, fire time) if it is absent, and succeeds only
 * while the claimer still owns the group with the same token. The owner claims the fire times
 * due within cfg.claim_ahead_ms ahead of time (a few jobs' fire times per transaction), so
 * that a run starts at the engine's precision rather than after a round trip to etcd; a fire
 * time not claimed by its due is claimed then, in the run's own thread (an executor of the
 * engine: so not while etcd did not answer the replica's last request, and not when another
 * run's claim holds that up for more than 50 ms). A replica whose claim fails or is not made
 * (another owner, etcd unreachable) does not run that fire time, and counts it missed unless
 * another owner has it. No fire time is run twice, across replicas, takeovers and restarts,
 * as long as etcd keeps its data and the replicas' wall clocks are not set back past a fire
 * time already run.
 *
 * Self-fencing. A replica counts its lease as valid until the time it sent the last
 * successful renewal plus the TTL, on its own CLOCK_MONOTONIC, which is never later than etcd
 * lets the lease live. From cfg.fence_margin_ms before that time on, it runs nothing of the
 * cluster's and claims nothing (tw_cluster_counters.self_fences counts each time), until a
 * renewal succeeds again; if the lease expired meanwhile, it takes a new one and its groups
 * are gone. A run already started when the replica fences goes on: what it writes should
 * carry the run's fencing token (tw_cluster_fire.token) to a resource that rejects a token
 * lower than the highest it has seen (examples/cluster_job.c shows one).
 *
 * Takeovers and missed fire times. When a group's owner is gone, another replica takes the
 * group. For each job, it reads the last fire time claimed (recorded in etcd with every
 * claim); the fire times after it that have passed were missed. With TW_MISFIRE_RUN_ONCE
 * (the default) the job runs once at takeover for the latest of them, and the others count as
 * missed; with TW_MISFIRE_SKIP every one of them counts as missed and the job waits for its
 * next fire time. The run's tw_cluster_fire.missed says how many were missed. Fire times a
 * dead owner had claimed ahead and not run are lost with it (at most claim_ahead_ms of them):
 * those still ahead at the takeover count as missed; those already past cannot be told from
 * fire times it ran, and are in no count. A replica that leaves (tw_cluster_leave) gives its
 * claims after the leave back, and its takers run them.
 *
 * Time. Fire times are judged on each replica's wall clock (CLOCK_REALTIME) and each run is
 * armed on the engine's monotonic grid, so a run never starts before its fire time on the
 * replica that runs it; keep the replicas' clocks in sync (NTP), as a difference between two
 * clocks moves the instant at which a takeover's first run happens, never the fire times
 * themselves. A fire time in a repeated or skipped local hour (DST) is one UTC instant, so it
 * is claimed, and run, once.
 *
 * etcd trouble. Every request has a timeout (cfg.request_timeout_ms) and goes to the next
 * endpoint when one cannot be reached. While etcd cannot be reached, cluster jobs pause (no
 * fire time is run without a claim), the engine's other tasks are untouched, and the replica
 * retries with a backoff, logging each change of state once.
 */
#ifndef TICKWHEEL_CLUSTER_H
#define TICKWHEEL_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tickwheel.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TW_CLUSTER_VERSION_MAJOR  0
#define TW_CLUSTER_VERSION_MINOR  1
#define TW_CLUSTER_VERSION_PATCH  0
#define TW_CLUSTER_VERSION_STRING "0.1.0"

typedef struct tw_cluster tw_cluster;

/* Codes of the cluster library, beside the core's TW_E* codes (negated like them). */
enum {
	TW_CLUSTER_EUNAVAILABLE = 64, /* no etcd endpoint answered (connect, timeout) */
	TW_CLUSTER_ECONFLICT,         /* the cluster recorded another definition (schedule,
				       * groups) under that name */
	TW_CLUSTER_EETCD,             /* etcd answered with an error, or an answer that is not
				       * etcd's (the log says which) */
};

/* The longest member name, in bytes without its NUL. */
#define TW_CLUSTER_MEMBER_MAX 63
/* The longest job name, in bytes without its NUL: its local task is named "cluster:" + name. */
#define TW_CLUSTER_JOB_NAME_MAX (TW_NAME_MAX - 8)
/* The most etcd endpoints a replica is given. */
#define TW_CLUSTER_ENDPOINTS_MAX 16

typedef struct {
	/* The local engine the cluster's jobs run in: created by the caller, not stopped or
	 * destroyed before tw_cluster_leave returns. Required. */
	tw_engine *engine;
	/* etcd client URLs ("http://127.0.0.1:2379"), NULL-terminated, 1 to
	 * TW_CLUSTER_ENDPOINTS_MAX of them; any member may be down. Copied. Required. */
	const char *const *endpoints;
	/* Every key of the program's cluster starts with it; replicas of one program share it,
	 * different programs on one etcd do not. 1 to 128 printable bytes; default
	 * "/tickwheel/". Copied. */
	const char *prefix;
	/* This replica's name: unique among the live members, 1 to TW_CLUSTER_MEMBER_MAX bytes
	 * of [A-Za-z0-9._:-]. Copied. Required. */
	const char *member;
	/* The lease's TTL in seconds: a dead replica's groups are taken over this long after
	 * its last renewal. 2 (etcd's usual minimum) to 3600; default 10 (also for 0). */
	unsigned lease_ttl_s;
	/* Groups the jobs are hashed into: the same on every replica (recorded in etcd at the
	 * first join; another number: -TW_CLUSTER_ECONFLICT). 1 to 4096; default 64. */
	unsigned groups;
	/* Each etcd request's limit, connect included; default 2000 (also for 0). */
	unsigned request_timeout_ms;
	/* How far ahead of their dues the owner claims fire times; 0: the default, 1000. At
	 * most the TTL minus the fence margin, and at most 30000; below the owner's round trip
	 * to etcd, every run waits for its claim. */
	unsigned claim_ahead_ms;
	/* Self-fencing starts this long before the lease could expire; default 500 (also for
	 * 0), at most half the TTL. */
	unsigned fence_margin_ms;
	/* Receives the cluster's log lines (state changes, each once), on the cluster's threads;
	 * NULL: none. The library never prints. */
	void (*log)(int level, const char *message, void *log_arg);
	void *log_arg;
	/* true: tw_cluster_join connects and checks the cluster but does not become a member
	 * (no lease, no member key, no group taken) until tw_cluster_attach, so that the
	 * program adds its jobs and handlers first and takes groups it can run at once.
	 * false (the default): the join attaches. */
	bool attach_later;
} tw_cluster_config;

/* A cluster run's context, handed to its callback. Grows at its end only. */
typedef struct {
	const char *job;           /* the job's name */
	int64_t fire_time_ms;      /* the fire time this run stands for: UTC ms since the epoch */
	uint64_t token;            /* the fencing token: the owner's revision; only grows */
	uint64_t missed;           /* fire times missed before this run (takeover, self-fence) */
	unsigned group;            /* the job's group */
	uint64_t due_ns;           /* the local run's due on CLOCK_MONOTONIC (its tw_fire.due_ns) */
	int64_t start_lateness_ns; /* start minus due on this replica's clocks */
} tw_cluster_fire;

/* Runs on an executor of the local engine, on the owner only. Nonzero counts in
 * tw_cluster_counters.failures; the fire time stays claimed (it is not run again), and the job
 * is never paused for failures (the engine's max_failures does not apply to it). */
typedef int (*tw_cluster_callback)(const tw_cluster_fire *fire, void *arg);

typedef struct {
	/* Required, unique in the cluster: 1 to TW_CLUSTER_JOB_NAME_MAX bytes of
	 * [A-Za-z0-9._:-]. */
	const char *name;
	/* Exactly one of period_ms (>= 1, <= 2^40) and cron (an expression tw_cron_parse takes,
	 * not "@every": use period_ms). */
	uint64_t period_ms;
	/* A periodic job's fire times are k * period_ms + phase_ms since the epoch, UTC;
	 * phase_ms < period_ms. */
	uint64_t phase_ms;
	const char *cron;
	tw_cluster_callback callback; /* required */
	void *arg;
	void (*release)(void *arg); /* optional: called once, when the job is cancelled or the
				     * replica leaves, after its last run returned */
	unsigned misfire;           /* TW_MISFIRE_RUN_ONCE or TW_MISFIRE_SKIP, at takeover */
} tw_cluster_job_spec;

typedef struct {
	uint64_t members;        /* live members this replica saw last */
	uint64_t groups_owned;   /* groups this replica owns now */
	uint64_t jobs;           /* jobs added on this replica */
	uint64_t runs;           /* cluster runs started here */
	uint64_t claims;         /* fire times this replica claimed */
	uint64_t claims_ahead;   /* of them, claimed before their due */
	uint64_t claims_lost;    /* claims refused: another owner or claim, or not owner */
	uint64_t claim_requests; /* claim transactions sent (several fire times each) */
	uint64_t not_owner;      /* fire times that came due here while another replica owned
				    * the group (each replica counts its own) */
	uint64_t missed;         /* fire times missed at takeovers and self-fences */
	uint64_t takeovers;      /* groups taken from an owner that was gone */
	uint64_t acquisitions;   /* groups taken, takeovers included */
	uint64_t releases;       /* groups handed back (rebalance, leave) */
	uint64_t self_fences;    /* times the lease could not be confirmed in time */
	uint64_t lease_renewals;
	uint64_t leases_lost; /* leases found expired: groups lost, a new lease taken */
	uint64_t etcd_requests;
	/* etcd errors by kind: connect, timeout, http, grpc, parse, compacted, lease. */
	uint64_t etcd_errors[7];
	/* Claim latency: request sent to answer, in buckets of 2^i us (the last: the rest). */
	uint64_t claim_latency_us[20];
	uint64_t claim_latency_sum_ns;
	bool fenced;       /* fenced now */
	bool connected;    /* the last request to etcd was answered */
	uint64_t failures; /* cluster runs whose callback returned nonzero */
	/* Deferred tasks (see "Deferred tasks" below). */
	uint64_t defers;               /* tasks deferred by this replica (tw_cluster_defer*) */
	uint64_t defer_pending;        /* tasks of the owned groups held here now, claimed or not */
	uint64_t defer_inflight;       /* handlers running here now */
	uint64_t defer_unhandled;      /* tasks held here now whose kind has no handler here */
	uint64_t defer_runs;           /* handlers started here */
	uint64_t defer_failures;       /* of them, returned nonzero */
	uint64_t defer_retries;        /* failed runs put back to run again after their backoff */
	uint64_t defer_dead;           /* tasks moved to the dead letters here (attempts used up) */
	uint64_t defer_reclaims;       /* tasks claimed here that a lost owner had claimed: their
				     * run may be a second one (tw_cluster_task.attempt > 1) */
	uint64_t defer_claim_requests; /* claim transactions sent (several tasks each) */
	uint64_t defer_loaded;       /* tasks read from etcd at group loads (takeovers, reloads) */
	uint64_t defer_load_ms_last; /* how long the last group load took, in ms */
	uint64_t defer_overdue;      /* tasks already due when a group load read them: a takeover's
				 * (they run at once, late by the takeover) */
} tw_cluster_counters;

TW_API void tw_cluster_config_init_sized(tw_cluster_config *cfg, size_t size);
TW_API int tw_cluster_join_sized(const tw_cluster_config *cfg, size_t size, tw_cluster **out);
TW_API int tw_cluster_add_sized(tw_cluster *c, const tw_cluster_job_spec *spec, size_t size);
TW_API int tw_cluster_stats_sized(tw_cluster *c, tw_cluster_counters *out, size_t size);

/**
 * tw_cluster_config_init() - sets every field of @cfg to its default (NULL pointers, zeros:
 * the defaults documented beside each field). NULL: nothing. Any thread; O(1).
 */
static inline void tw_cluster_config_init(tw_cluster_config *cfg)
{
	tw_cluster_config_init_sized(cfg, sizeof *cfg);
}

/**
 * tw_cluster_join() - joins the cluster: takes a lease, records the member, starts the
 * cluster's two threads (the lease's renewals; membership, groups and claims). With
 * @cfg->attach_later it only connects and checks the cluster (the number of groups): the
 * lease, the member and the threads wait for tw_cluster_attach.
 * @cfg: the configuration; copied, not kept.
 * @out: receives the replica's handle; NULL on failure.
 *
 * A member of the same name that is still recorded (a previous run of this replica that died
 * less than a TTL ago) is waited for, up to the TTL and a second; a live one makes the join
 * fail with -TW_EEXIST.
 *
 * Return: TW_OK; -TW_EINVAL for NULL @cfg or @out, no engine, no endpoints or more than
 * TW_CLUSTER_ENDPOINTS_MAX, a name, prefix or number outside its limits;
 * -TW_CLUSTER_EUNAVAILABLE when no endpoint answers within the request timeout;
 * -TW_CLUSTER_ECONFLICT when the cluster has another number of groups; -TW_EEXIST (above);
 * -TW_CLUSTER_EETCD when etcd refuses a request; -TW_ENOMEM; -TW_ERESOURCE when a thread
 * cannot be started. Any thread but a callback of @cfg->engine. Blocks for a few round trips
 * to etcd (each bounded by the request timeout), longer while an old member of the name is
 * waited for.
 */
static inline int tw_cluster_join(const tw_cluster_config *cfg, tw_cluster **out)
{
	return tw_cluster_join_sized(cfg, sizeof *cfg, out);
}

/**
 * tw_cluster_attach() - makes a replica that joined with attach_later a member: takes the
 * lease, records the member, starts the cluster's threads; the replica then takes its share
 * of the groups as any new member does (free groups within a round of 100 ms, the others as
 * their owners hand them back, see "Groups and owners") and runs the jobs it has added.
 * @c: the replica.
 *
 * Until then the replica adds jobs (tw_cluster_add: their schedules are recorded and checked,
 * their local tasks fire and count in tw_cluster_counters.not_owner), registers handlers
 * (tw_cluster_handle) and defers tasks, and owns nothing: the other replicas run every
 * group. A member of the same name still recorded (an earlier run of this replica that died
 * less than a TTL ago) is waited for, up to the TTL and a second, as at a join.
 *
 * Return: TW_OK; -TW_EINVAL for NULL @c; -TW_ESTATE when @c is a member already (joined
 * without attach_later, or attached) or another attach of @c is under way; -TW_EEXIST when a
 * live member has the name; -TW_CLUSTER_EUNAVAILABLE, -TW_CLUSTER_EETCD, -TW_ENOMEM,
 * -TW_ERESOURCE as tw_cluster_join. After a failure @c is as before, and the attach may be
 * tried again. Any thread but a callback of the engine, not while tw_cluster_leave runs.
 * Blocks as tw_cluster_join does.
 */
TW_API int tw_cluster_attach(tw_cluster *c);

/**
 * tw_cluster_add() - defines a cluster job on this replica.
 * @spec: the job; copied, except arg.
 *
 * Records the job's schedule in etcd if no replica did before, else checks that it is the
 * same. The job runs here only while this replica owns its group (see above). Its local task
 * in the engine is named "cluster:" + name (tw_get, tw_list show it). A calendar job whose
 * schedule has no fire time left ends on this replica as if cancelled (release is called; the
 * name may be added again).
 *
 * Return: TW_OK; -TW_EINVAL for NULL arguments, a bad name, no callback, neither or both of
 * period_ms and cron, a phase not below the period, a misfire that is no TW_MISFIRE_* value;
 * -TW_ERANGE for a period above 2^40; -TW_ESYNTAX, -TW_ENOZONE, -TW_ENOMATCH for a cron
 * expression tw_cron_parse or tw_cron_next refuses; -TW_EEXIST when this replica added the
 * name already (or the engine has a task "cluster:" + name); -TW_CLUSTER_ECONFLICT when the
 * cluster recorded another schedule or misfire policy for the name;
 * -TW_CLUSTER_EUNAVAILABLE, -TW_CLUSTER_EETCD; -TW_ENOMEM; -TW_ESHUTDOWN after
 * tw_cluster_leave began. On failure release is not called. Any thread, a callback too.
 * Blocks for one or two round trips to etcd.
 */
static inline int tw_cluster_add(tw_cluster *c, const tw_cluster_job_spec *spec)
{
	return tw_cluster_add_sized(c, spec, sizeof *spec);
}

/**
 * tw_cluster_cancel() - removes a job from this replica: no run of it starts here once this
 * returns, and its release is called once its run going here (if any) returned. The job's
 * record in etcd stays: the other replicas go on running it while they own its group. A
 * cancelled name may be added again.
 *
 * Return: TW_OK; -TW_EINVAL for NULL; -TW_ENOTFOUND for a name this replica has not added.
 * Any thread, a callback too (its own job's: the release then follows the callback's
 * return). Does not block on etcd.
 */
TW_API int tw_cluster_cancel(tw_cluster *c, const char *name);

/**
 * tw_cluster_leave() - leaves the cluster and frees @c.
 *
 * Stops taking groups and claiming, cancels this replica's jobs (their runs going on finish
 * first: it waits for them, renewing the lease meanwhile), hands each group back with the
 * claims of fire times after now, which the takers then claim and run, and revokes the lease,
 * so another replica takes the groups at once instead of a TTL later. Deferred tasks: no
 * handler starts here once leave began; the handlers going on finish (it waits for them),
 * their results are written, and the tasks claimed but not started are given back unrun (their
 * claims deleted: the taker runs them with the same attempt number). A task of the left
 * groups due while the replica leaves runs when a taker has its group: late by the leave and
 * about a round of the taker's (100 ms). When etcd cannot be reached for three request
 * timeouts, the results not yet written stay unwritten, and the next owner runs those tasks
 * again (as after a lost owner). A replica that never attached (attach_later) has nothing
 * to hand back: its jobs are cancelled and released. Leaves the engine running with its other
 * tasks. NULL: nothing. Any thread but a callback of the engine. Blocks for the runs going on and a round
 * trip to etcd per owned group (each bounded by the request timeout; when etcd cannot be
 * reached, the lease simply expires).
 */
TW_API void tw_cluster_leave(tw_cluster *c);

/**
 * tw_cluster_stats() - this replica's counters (see tw_cluster_counters).
 *
 * Return: TW_OK; -TW_EINVAL for NULL. Any thread; never blocks on etcd; O(groups).
 */
static inline int tw_cluster_stats(tw_cluster *c, tw_cluster_counters *out)
{
	return tw_cluster_stats_sized(c, out, sizeof *out);
}

TW_API int tw_cluster_metrics_write_sized(tw_cluster *c, const tw_metrics_options *opt, size_t size,
					  tw_metrics_writer write, void *ctx);

/**
 * tw_cluster_metrics_write() - this replica's counters in Prometheus's text format 0.0.4,
 * through @write, as tw_metrics_write writes the engine's (the same options and writer
 * rules; per_task is ignored). Serve both texts at one /metrics. Names are the prefix (NULL:
 * "tickwheel_cluster_") and:
 *
 *   members, groups_owned, jobs, fenced, connected                 gauges
 *   runs_total, claims_total, claims_ahead_total, claims_lost_total counters
 *   not_owner_total, missed_total, takeovers_total                  counters
 *   acquisitions_total, releases_total, self_fences_total           counters
 *   leases_lost_total, etcd_requests_total, failures_total          counters
 *   defer_pending, defer_inflight, defer_unhandled                  gauges
 *   defers_total, defer_runs_total, defer_failures_total            counters
 *   defer_retries_total, defer_dead_total, defer_reclaims_total     counters
 *   defer_claim_requests_total, defer_loaded_total                  counters
 *   defer_overdue_total                                             counter
 *   etcd_errors_total{kind="connect|timeout|http|grpc|parse|compacted|lease"}
 *   claim_latency_seconds                                           histogram, 1 us to
 *                                                                   2^18 us doubling
 *
 * "kind" and "le" are not label names of the caller's.
 * Return: TW_OK; -TW_EINVAL for NULL @c or @write, a bad prefix or label; -TW_EWRITE when
 * @write returned nonzero; -TW_ENOMEM. Any thread; never blocks on etcd; O(1).
 */
static inline int tw_cluster_metrics_write(tw_cluster *c, const tw_metrics_options *opt,
					   tw_metrics_writer write, void *ctx)
{
	return tw_cluster_metrics_write_sized(c, opt, sizeof *opt, write, ctx);
}

/*
 * Deferred tasks: a durable delay queue on the same etcd and the same groups as the jobs.
 *
 * A deferred task (tw_cluster_defer) is one run of a handler, at a due time, that outlives
 * the replica that deferred it: an order to cancel 15 minutes after creation if unpaid, a
 * device to mark offline 90 s after its last message. It has a kind (which handler runs it),
 * a key chosen by the producer (unique among the live tasks: it names the task for cancel and
 * move, and is the handler's idempotency key), a due time in UTC milliseconds, and a payload
 * of at most TW_CLUSTER_PAYLOAD_MAX bytes. Any replica may defer, cancel or move any task.
 *
 * Where it lives. The task is stored in etcd in its group (tw_cluster_group_of of its key),
 * which has the same owner as that group's jobs. The owner holds every task of its groups in
 * its engine: it reads them when it takes the group (a paged range read) and follows changes
 * with a watch from that revision, so a task deferred anywhere reaches the owner's wheel
 * within a round trip or two. Each held task is one local task of the engine (unnamed; it
 * counts in tw_config.max_tasks), with no payload in memory until it is claimed. A task the
 * engine refuses (max_tasks live tasks) is logged, and its group is read again a second later
 * until it is held: it waits in etcd meanwhile, never dropped.
 *
 * Claim and run. cfg.claim_ahead_ms before its due, the owner claims the task: a transaction
 * that succeeds only while the owner still owns the group with its token and the task is as
 * the owner last read it, and that records the claim (the attempt number, the member, the
 * token) beside the task. At the due the handler runs on an executor of the engine, with the
 * key, payload, attempt and token (tw_cluster_task), never before the due on the owner's
 * wall clock. A task whose due is nearer than claim_ahead_ms when the owner learns of it is
 * claimed at once and runs as soon as its claim is answered. When the handler returns 0 the
 * task is deleted; nonzero is a failure: the task is put back due backoff_ms * 2^(n - 1)
 * after the n-th failed attempt (at most TW_CLUSTER_BACKOFF_MAX_MS), and after max_attempts
 * attempts it is moved to the dead letters (tw_cluster_dead_read), from which
 * tw_cluster_requeue (and `tw-cluster requeue`) puts it back. These writes are made by the
 * cluster's own thread after the handler returned, a few tasks per transaction.
 *
 * What is promised. A task deferred (TW_OK, or -TW_EEXIST on a retry of the same defer) is
 * never lost while etcd keeps its data: it stays in etcd until a handler returned 0 for it or
 * it went to the dead letters. It never runs early. It runs once, except when its owner is
 * lost (killed, or its lease ran out) between its claim and the write that deletes it after
 * its handler: the next owner then claims it again with attempt + 1 and runs it at the
 * takeover, so its handler may have run already (at least once: use the key, and the attempt,
 * to make the handler's effect happen once). An attempt number above 1 says an earlier
 * claim may have run: a failure, or a lost owner (tw_cluster_counters.defer_reclaims); after
 * a lost owner it may exceed max_attempts, and the task still runs that once (a failure then
 * moves it to the dead letters). A
 * task cancelled (TW_OK) never runs after the cancel returns. Once claimed a task can no
 * longer be cancelled or moved (-TW_ESTATE): it will run.
 *
 * Handlers. Each replica registers a handler per kind (tw_cluster_handle); register every
 * kind on every replica, as with jobs. A task whose kind has no handler on its owner is not
 * claimed: it waits in etcd and in the owner's count (defer_unhandled) until its owner
 * registers the kind or another owner that has it takes the group; it is never dropped.
 *
 * Costs. A task costs etcd one key (its key, about 50 bytes of header and its payload) for
 * as long as it is pending; a defer is one transaction, tw_cluster_defer_many one for up to
 * TW_CLUSTER_DEFER_BATCH_MAX tasks; a run costs a claim (shared with other tasks due near
 * it) and a delete (batched likewise). perf/README.md gives the measured figures and
 * README.md the scale at which to shard across etcd clusters.
 */

/* The longest task key, in bytes without its NUL: printable ASCII without space (0x21 to
 * 0x7e). */
#define TW_CLUSTER_KEY_MAX 200
/* The longest kind, in bytes without its NUL: [A-Za-z0-9._:-]. */
#define TW_CLUSTER_KIND_MAX 63
/* The largest payload, in bytes. */
#define TW_CLUSTER_PAYLOAD_MAX 8192
/* The most tasks tw_cluster_defer_many takes at once. */
#define TW_CLUSTER_DEFER_BATCH_MAX 60
/* The most attempts a task may be given, and the longest wait between two of them. */
#define TW_CLUSTER_ATTEMPTS_MAX   1000
#define TW_CLUSTER_BACKOFF_MAX_MS 3600000

typedef struct {
	const char *kind; /* required: 1 to TW_CLUSTER_KIND_MAX bytes of [A-Za-z0-9._:-] */
	const char *key;  /* required: 1 to TW_CLUSTER_KEY_MAX bytes of 0x21 to 0x7e */
	/* The due: an absolute time in UTC ms since the epoch (> 0, at most 2^40 ms ahead of
	 * now), or, when due_ms is 0, delay_ms from now on this replica's wall clock (at most
	 * 2^40; delay_ms is not read when due_ms is given). A due already past runs as soon as
	 * the owner has it. */
	int64_t due_ms;
	uint64_t delay_ms;
	const void *payload; /* payload_len bytes, copied; NULL when payload_len is 0 */
	size_t payload_len;  /* at most TW_CLUSTER_PAYLOAD_MAX */
	/* Attempts before the task goes to the dead letters: 1 to TW_CLUSTER_ATTEMPTS_MAX;
	 * 0: the default, 5. */
	unsigned max_attempts;
	/* The wait after the first failed attempt, doubled after each further one, capped at
	 * TW_CLUSTER_BACKOFF_MAX_MS; 0: the default, 1000. */
	unsigned backoff_ms;
} tw_cluster_defer_spec;

/* A deferred task's run, handed to its handler. Grows at its end only. */
typedef struct {
	const char *kind;
	const char *key;     /* the idempotency key */
	const void *payload; /* payload_len bytes, valid until the handler returns */
	size_t payload_len;
	unsigned attempt;      /* 1 for the first claim; see "What is promised" */
	unsigned max_attempts; /* as deferred */
	uint64_t token;        /* the owner's fencing token, as tw_cluster_fire.token */
	int64_t due_ms;        /* the due this run stands for, UTC ms */
	unsigned group;
	uint64_t due_ns;           /* that due on this replica's CLOCK_MONOTONIC */
	int64_t start_lateness_ns; /* start minus due_ns */
} tw_cluster_task;

/* Runs on an executor of the local engine, on the owner. 0: done, the task is deleted;
 * nonzero: a failed attempt (retried after its backoff, or dead-lettered after the last). */
typedef int (*tw_cluster_handler)(const tw_cluster_task *task, void *arg);

TW_API int tw_cluster_defer_sized(tw_cluster *c, const tw_cluster_defer_spec *spec, size_t size);
TW_API int tw_cluster_defer_many_sized(tw_cluster *c, const tw_cluster_defer_spec *specs, size_t n,
				       size_t size, int *results);

/**
 * tw_cluster_defer() - stores a deferred task in etcd, if no live task has its key.
 * @spec: the task; copied.
 *
 * One create-if-absent transaction: a producer whose call timed out (the answer lost, the
 * task perhaps stored) calls again with the same spec, and gets TW_OK or -TW_EEXIST, never a
 * second task. A key stays taken for 60 to 66 s after its task's handler succeeded (a
 * tombstone in etcd, under a lease of its own): a request that etcd applies late (a member
 * that held it past the timeout, while the task ran and was deleted) finds the tombstone and
 * makes no second task; a defer of that key meanwhile answers -TW_EEXIST. A cancel leaves the
 * same tombstone (a late copy of the defer would bring back what was cancelled). A key that is
 * only in the dead letters is free.
 *
 * Return: TW_OK; -TW_EINVAL for NULL arguments, a kind or key outside its limits, a payload
 * over TW_CLUSTER_PAYLOAD_MAX (or NULL with a length), a due_ms below 0, max_attempts over
 * TW_CLUSTER_ATTEMPTS_MAX; -TW_ERANGE for a due or delay more than 2^40 ms ahead;
 * -TW_EEXIST when a live task (pending or claimed) has the key, or its task succeeded or
 * was cancelled less than a minute ago (above); -TW_CLUSTER_EUNAVAILABLE (the task may or may not be
 * stored: call again), -TW_CLUSTER_EETCD; -TW_ENOMEM; -TW_ESHUTDOWN after tw_cluster_leave
 * began. Any thread, a callback or handler too. Blocks for one round trip to etcd.
 */
static inline int tw_cluster_defer(tw_cluster *c, const tw_cluster_defer_spec *spec)
{
	return tw_cluster_defer_sized(c, spec, sizeof *spec);
}

/**
 * tw_cluster_defer_many() - stores @n tasks in one transaction: all of them, or none.
 * @results: NULL, or @n codes: TW_OK for each task when all were stored; when one key was
 * taken, -TW_EEXIST for each taken key and TW_OK for the others (none of which was stored).
 *
 * Return: TW_OK when all were stored; -TW_EINVAL also for @n of 0 or above
 * TW_CLUSTER_DEFER_BATCH_MAX, a key given twice, or payloads above 512 KiB together;
 * -TW_EEXIST when a key was taken (nothing stored); otherwise as tw_cluster_defer. Blocks
 * for one round trip.
 */
static inline int tw_cluster_defer_many(tw_cluster *c, const tw_cluster_defer_spec *specs, size_t n,
					int *results)
{
	return tw_cluster_defer_many_sized(c, specs, n, sizeof *specs, results);
}

/**
 * tw_cluster_defer_cancel() - deletes a pending task: it never runs.
 *
 * Return: TW_OK; -TW_EINVAL for NULL or a bad key; -TW_ENOTFOUND when no live task has the
 * key (never deferred, cancelled, done, or dead-lettered); -TW_ESTATE when the task is
 * claimed (it is about to run, runs, or waits to be put back after a failure; a task is
 * claimed cfg.claim_ahead_ms before its due at the earliest, or as soon as its owner learns
 * of it when that is later): it was not cancelled; -TW_CLUSTER_EUNAVAILABLE (cancelled or not: call again), -TW_CLUSTER_EETCD;
 * -TW_ENOMEM; -TW_ESHUTDOWN. Any thread, a handler too. Blocks for one round trip.
 */
TW_API int tw_cluster_defer_cancel(tw_cluster *c, const char *key);

/**
 * tw_cluster_defer_move() - gives a pending task a new due: @due_ms (UTC ms, > 0, at most 2^40
 * ms ahead), or when it is 0, @delay_ms from now (at most 2^40). Its kind, payload and
 * attempts stay. The arguments are checked before etcd is asked.
 *
 * Return: TW_OK; -TW_EINVAL for NULL, a bad key or a due_ms below 0; -TW_ERANGE for a due or
 * delay more than 2^40 ms ahead; -TW_ENOTFOUND, -TW_ESTATE as tw_cluster_defer_cancel; -TW_CLUSTER_EUNAVAILABLE,
 * -TW_CLUSTER_EETCD; -TW_ENOMEM; -TW_ESHUTDOWN. Any thread, a handler too. Blocks for two
 * round trips (a read, then a transaction that checks nothing changed in between; repeated
 * if something did).
 */
TW_API int tw_cluster_defer_move(tw_cluster *c, const char *key, int64_t due_ms, uint64_t delay_ms);

/**
 * tw_cluster_handle() - registers this replica's handler of a kind. @arg is passed to it;
 * it must live until tw_cluster_leave returns. Tasks of the kind this replica holds that
 * waited for a handler are claimed from now on.
 *
 * Return: TW_OK; -TW_EINVAL for NULL @c or @handler, a bad kind; -TW_EEXIST when the kind
 * has a handler here already; -TW_ENOMEM; -TW_ESHUTDOWN after tw_cluster_leave began. Any
 * thread, a handler too. Does not block on etcd.
 */
TW_API int tw_cluster_handle(tw_cluster *c, const char *kind, tw_cluster_handler handler,
			     void *arg);

/*
 * What etcd holds of a cluster, read by anyone (an operator's tool, a status page), with no
 * lease and no engine: tw_cluster_view_read. Read as of one etcd revision.
 */
typedef struct {
	const char *owner; /* the owning member's name; NULL: free */
	uint64_t token;    /* the owner's fencing token; 0 when free */
} tw_cluster_group_view;

typedef struct {
	const char *name;
	const char *schedule; /* as recorded: "period_ms=... phase_ms=... misfire=..." or
				* "misfire=... cron=..." */
	unsigned group;
	int64_t last_fire_ms; /* the last fire time claimed, UTC ms; INT64_MIN: none yet */
} tw_cluster_job_view;

typedef struct {
	int64_t revision; /* etcd's revision the view was read at */
	unsigned groups;  /* 0 when no replica ever joined under the prefix */
	size_t nmembers;
	const char *const *members;   /* sorted by name */
	tw_cluster_group_view *group; /* groups entries */
	size_t njobs;
	tw_cluster_job_view *jobs; /* sorted by name */
	/* Deferred tasks: live ones (pending and claimed), of them claimed, and dead letters. */
	uint64_t tasks, tasks_claimed, dead;
} tw_cluster_view;

/**
 * tw_cluster_view_read() - reads the cluster under @prefix (NULL: "/tickwheel/") from etcd.
 * @endpoints: NULL-terminated URLs, as tw_cluster_config.endpoints.
 * @timeout_ms: the request's limit; 0: 2000.
 * @out: receives the view; free it with tw_cluster_view_free.
 *
 * Return: TW_OK; -TW_EINVAL for NULL @endpoints or @out, or a bad prefix;
 * -TW_CLUSTER_EUNAVAILABLE, -TW_CLUSTER_EETCD; -TW_ENOMEM. Any thread. Blocks for one round
 * trip (one transaction of eight ranges, three of them counts); O(members + groups + jobs).
 */
TW_API int tw_cluster_view_read(const char *const *endpoints, const char *prefix,
				unsigned timeout_ms, tw_cluster_view **out);

/** tw_cluster_view_free() - frees a view. NULL: nothing. */
TW_API void tw_cluster_view_free(tw_cluster_view *view);

/* Deferred tasks as etcd holds them, read with no lease and no engine (tw-cluster). */
enum {
	TW_CLUSTER_TASK_PENDING = 1, /* waiting for its due, or for its owner's claim */
	TW_CLUSTER_TASK_CLAIMED,     /* claimed: about to run, running, or being put back */
	TW_CLUSTER_TASK_DEAD,        /* in the dead letters: its attempts were used up */
};

typedef struct {
	const char *key;
	const char *kind;
	unsigned state; /* TW_CLUSTER_TASK_* */
	int64_t due_ms; /* UTC ms; for a dead letter, the due of its last attempt */
	/* Attempts that ended (pending, dead); for a claimed task, the claim's attempt. */
	unsigned attempt;
	unsigned max_attempts, backoff_ms, group;
	const char *claimed_by; /* claimed: the claiming member; NULL otherwise */
	uint64_t token;         /* claimed: its fencing token; 0 otherwise */
	int last_code;          /* dead: what the last attempt's handler returned */
	const void *payload;
	size_t payload_len;
} tw_cluster_task_view;

typedef struct {
	int64_t revision; /* etcd's revision the list was read at */
	size_t count;
	tw_cluster_task_view *tasks;
	bool more; /* tw_cluster_dead_read: more dead letters after the last one listed */
} tw_cluster_task_list;

/**
 * tw_cluster_task_read() - what etcd holds under @key: its live task (pending or claimed)
 * and its dead letter, in that order; none, one or both.
 * @endpoints, @prefix, @timeout_ms: as tw_cluster_view_read.
 * @out: receives the list; free it with tw_cluster_task_list_free.
 *
 * Return: TW_OK (also for a key with nothing: count 0); -TW_EINVAL for NULL @endpoints, @key
 * or @out, a bad key or prefix; -TW_ENOTFOUND when no replica ever joined under the prefix;
 * -TW_CLUSTER_EUNAVAILABLE, -TW_CLUSTER_EETCD; -TW_ENOMEM. Any thread. Blocks for two round
 * trips.
 */
TW_API int tw_cluster_task_read(const char *const *endpoints, const char *prefix,
				unsigned timeout_ms, const char *key, tw_cluster_task_list **out);

/**
 * tw_cluster_dead_read() - the dead letters in key order, from the first key after @after
 * (NULL: from the first), at most @limit (0: 1000) of them; more says whether others follow.
 *
 * Return: as tw_cluster_task_read. Blocks for one round trip; O(@limit).
 */
TW_API int tw_cluster_dead_read(const char *const *endpoints, const char *prefix,
				unsigned timeout_ms, const char *after, size_t limit,
				tw_cluster_task_list **out);

/** tw_cluster_task_list_free() - frees a list. NULL: nothing. */
TW_API void tw_cluster_task_list_free(tw_cluster_task_list *list);

/**
 * tw_cluster_requeue() - puts a dead letter back as a pending task with no attempts made,
 * due at @due_ms (UTC ms; 0: now), in one transaction (the dead letter goes as the task
 * comes).
 *
 * Return: TW_OK; -TW_EINVAL as tw_cluster_task_read, or a due_ms below 0; -TW_ENOTFOUND
 * when @key has no dead letter (or no replica ever joined under the prefix); -TW_EEXIST when
 * a live task has the key (the dead letter stays); -TW_CLUSTER_EUNAVAILABLE,
 * -TW_CLUSTER_EETCD; -TW_ENOMEM. Any thread. Blocks for two round trips.
 */
TW_API int tw_cluster_requeue(const char *const *endpoints, const char *prefix, unsigned timeout_ms,
			      const char *key, int64_t due_ms);

/**
 * tw_cluster_group_of() - the group a job's name hashes into, among @groups (FNV-1a of the
 * name, modulo @groups): the same on every replica and in tw-cluster. Any thread; O(length).
 */
TW_API unsigned tw_cluster_group_of(const char *name, unsigned groups);

/**
 * tw_cluster_strerror() - the text of a code, the core's or the cluster's, either sign. A
 * static string; never NULL. Any thread; O(1).
 */
TW_API const char *tw_cluster_strerror(int code);

/**
 * tw_cluster_version() - the cluster library's version, "MAJOR.MINOR.PATCH". Any thread.
 */
TW_API const char *tw_cluster_version(void);

#ifdef __cplusplus
}
#endif
#endif
