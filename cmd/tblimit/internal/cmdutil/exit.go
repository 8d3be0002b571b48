package cmdutil

// ExitCode is what the process exits with.
type ExitCode int

// The exit codes, published in docs/cli.md and in --help.
const (
	ExitOK        ExitCode = 0 // success; the request was admitted
	ExitError     ExitCode = 1 // something went wrong
	ExitUsage     ExitCode = 2 // the command line is wrong
	ExitDenied    ExitCode = 3 // a limit denied the request (nothing was taken)
	ExitOverLimit ExitCode = 4 // audit found a user over its limit
)

// ExitCodeHelp is the exit-code table of --help.
const ExitCodeHelp = `Exit codes:
  0  success; the request was admitted
  1  error (bad input in a file, an unknown resource or user, the cluster or data file unavailable)
  2  usage error (a bad command line: unknown command or flag, a malformed argument)
  3  denied by a limit (acquire, reserve, pay: nothing was taken, held or paid)
  4  audit found a user over its limit in a window or in flight`
