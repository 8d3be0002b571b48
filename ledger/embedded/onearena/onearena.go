//go:build linux && cgo

package onearena

/*
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Before main, before any thread: glibc fixes how many arenas it may make
// the first time it needs one more, and a later mallopt does not change it.
// What the environment sets rules.
__attribute__((constructor)) static void tblimit_one_arena(void) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
	const char *tunables = getenv("GLIBC_TUNABLES");
	if (getenv("MALLOC_ARENA_MAX") == NULL && (tunables == NULL || strstr(tunables, "glibc.malloc.arena_max") == NULL)) {
		mallopt(M_ARENA_MAX, 1);
	}
#endif
}

// tblimit_arenas counts glibc's arenas (its malloc_info's heaps), or
// returns -1 if it cannot tell.
static int tblimit_arenas(void) {
#if defined(__GLIBC__)
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL) return -1;
	malloc_info(0, f);
	fclose(f);
	int n = 0;
	for (char *p = buf; (p = strstr(p, "<heap nr=")) != NULL; p++) n++;
	free(buf);
	return n;
#else
	return -1;
#endif
}

// tblimit_churn allocates and frees blocks of 32 KiB, too large for
// glibc's caches of each thread: each comes from an arena, under its lock.
static void tblimit_churn(int rounds) {
	void *kept[8] = {0};
	for (int i = 0; i < rounds; i++) {
		free(kept[i % 8]);
		kept[i % 8] = malloc(32 << 10);
		if (kept[i % 8] != NULL) ((volatile char *)kept[i % 8])[0] = (char)i;
	}
	for (int i = 0; i < 8; i++) free(kept[i]);
}
*/
import "C"

// arenas (for the test) is how many arenas glibc's malloc has, or -1 if
// it cannot tell.
func arenas() int { return int(C.tblimit_arenas()) }

// churn (for the test) allocates and frees rounds blocks with C's malloc.
func churn(rounds int) { C.tblimit_churn(C.int(rounds)) }
