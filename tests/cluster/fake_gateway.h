/*
 * tests/cluster/fake_gateway.h - an HTTP/1.1 server on 127.0.0.1 that answers every request
 * the same scripted way, for the failures a real etcd does not give on demand: an answer cut
 * off, silence, garbage, a stream split anywhere.
 */
#ifndef TW_TESTS_FAKE_GATEWAY_H
#define TW_TESTS_FAKE_GATEWAY_H

#include <stddef.h>

typedef enum {
	FAKE_ANSWER, /* writes the reply bytes as given, then closes */
	FAKE_DROP,   /* reads the request, closes without a byte */
	FAKE_SILENT, /* reads the request, says nothing until stopped */
} fake_mode;

typedef struct fake_gateway fake_gateway;

/* reply: the whole HTTP answer (status line, headers, body), written in pieces of chunk bytes
 * with a pause between them (0: at once). NULL on failure. */
fake_gateway *fake_gateway_start(fake_mode mode, const char *reply, size_t chunk);
/* "http://127.0.0.1:PORT" */
const char *fake_gateway_endpoint(const fake_gateway *f);
/* Requests read so far, and the last one's path ("/v3/kv/put"). */
int fake_gateway_requests(fake_gateway *f, char *path, size_t path_size);
void fake_gateway_stop(fake_gateway *f);

#endif
