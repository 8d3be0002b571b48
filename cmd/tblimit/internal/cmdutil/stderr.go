package cmdutil

import "os"

// FilterNativeLogs installs the filter of the TigerBeetle client's log lines
// on descriptor 2 (see filterStderr), which --verbose turns off, and returns
// the stderr for tblimit's own messages and the function that restores
// descriptor 2. Main calls it; tests that call Run in-process do not.
func FilterNativeLogs() (stderr *os.File, restore func()) {
	filter, restore := filterStderr()
	if filter == nil {
		return os.Stderr, restore
	}
	nativeLogs = filter
	return filter.stderr, restore
}
