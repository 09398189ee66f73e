/*
 * rcu.c - liburcu registration is the library's business, not the user's.
 *
 * With the memb flavor a thread that reads without being registered is not
 * waited for by grace periods: a silent use-after-free. So every entry point
 * registers its thread on first use, and a pthread key unregisters it when
 * the thread exits.
 */
#include "internal.h"

char tw__rcu_grace_token;
static pthread_key_t registration_key;
static pthread_once_t registration_once = PTHREAD_ONCE_INIT;
static _Thread_local bool registered;

static void unregister_at_exit(void *unused)
{
	(void)unused;
	urcu_memb_unregister_thread();
	registered = false;
}

static void make_key(void)
{
	pthread_key_create(&registration_key, unregister_at_exit);
}

void tw__rcu_ensure_registered(void)
{
	if (registered)
		return;
	pthread_once(&registration_once, make_key);
	urcu_memb_register_thread();
	pthread_setspecific(registration_key, (void *)1);
	registered = true;
}
