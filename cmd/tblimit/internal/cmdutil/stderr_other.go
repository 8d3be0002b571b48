//go:build !unix

package cmdutil

import "os"

type stderrFilter struct{ stderr *os.File }

var nativeLogs *stderrFilter

// filterStderr does nothing here: the client's log lines pass.
func filterStderr() (*stderrFilter, func()) { return nil, func() {} }

func (f *stderrFilter) keepAll() {}
