// Package onearena, imported for its effect, makes glibc's malloc keep one
// arena in a process that holds the embedded engine's store, as the
// tblimit command does:
//
//	import _ "github.com/tblimit/tblimit/ledger/embedded/onearena"
//
// Pebble, the store's database, allocates its cache's blocks and its
// memory tables with C's malloc, off the Go heap (which the collector
// would let grow to twice what is live). glibc's malloc gives a thread
// that meets another in it an arena of its own, up to eight a core, and
// an arena keeps what was freed in it; Pebble's calls come from whichever
// threads the Go scheduler runs them on, so that many arenas end up
// holding freed blocks. Measured with bench/growth (16 callers on two
// cores, 1,000,000 known-key decisions then 1,000,000 new keys, the
// default cache of 64 MiB): the process's memory beyond the Go runtime's
// was 49–62 MB with glibc's arenas and 29–32 MB with one, decisions as
// fast.
//
// The setting is made before main runs, when the binary is loaded (glibc
// fixes how many arenas it may make the first time it needs a second, so
// that a later call would come too late), and so holds for every user of
// malloc in the process: the Go runtime allocates its own memory, but other
// C code in the process shares the one arena and its lock. Elsewhere than
// Linux with cgo and glibc, importing it does nothing. MALLOC_ARENA_MAX
// (or glibc.malloc.arena_max in GLIBC_TUNABLES) in the environment rules
// over it, and does the same for a process that does not import it.
package onearena
