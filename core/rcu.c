/*
 * rcu.c - liburcu registration is the library's business, not the user's.
 *
 * With the memb flavor a thread that reads without being registered is not
 * waited for by grace periods: a silent use-after-free. So every entry point
 * registers its thread on first use, and a pthread key unregisters it when
 * the thread exits.
 */
#include "base.h"

#include <stdlib.h>

char tw__rcu_grace_token;
static pthread_key_t registration_key;
static pthread_once_t registration_once = PTHREAD_ONCE_INIT;
_Thread_local bool tw__rcu_registered;

static void unregister_at_exit(void *unused)
{
	(void)unused;
	urcu_memb_unregister_thread();
	tw__rcu_registered = false;
}

static bool key_made;

static void make_key(void)
{
	key_made = pthread_key_create(&registration_key, unregister_at_exit) == 0;
}

int tw__rcu_init(void)
{
	pthread_once(&registration_once, make_key);
	return key_made ? TW_OK : -TW_ENOMEM;
}

void tw__rcu_register(void)
{
	urcu_memb_register_thread();
	/* A thread left registered after its exit would leave liburcu's registry pointing at
	 * freed memory, and no error can be returned from here: glibc needs memory for a
	 * key's value only past the process's first 32 keys, and without it we stop. */
	if (pthread_setspecific(registration_key, (void *)1))
		abort();
	tw__rcu_registered = true;
}
