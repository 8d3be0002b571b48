// Package cli implements the tblimit command line; nothing in it exits the process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// ExitCode is what the process exits with.
type ExitCode int

// The exit codes, published in README and in --help.
const (
	ExitOK     ExitCode = 0 // success; the request was admitted
	ExitError  ExitCode = 1 // something went wrong
	ExitUsage  ExitCode = 2 // the command line is wrong
	ExitDenied ExitCode = 3 // a limit denied the request (nothing was taken)
)

const exitCodeHelp = `Exit codes:
  0  success (admitted)
  1  error
  2  usage error
  3  denied by a limit (nothing was taken or paid)`

// Main runs the command line of this process and returns its exit code.
func Main() ExitCode {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// Run runs tblimit with args and returns its exit code; the end-to-end tests
// call it in-process.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) ExitCode {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ex *exitError
	if errors.As(err, &ex) {
		if ex.err != nil {
			fmt.Fprintln(stderr, "tblimit:", ex.err)
		}
		return ex.code
	}
	fmt.Fprintln(stderr, "tblimit:", err)
	if isUsage(err) {
		return ExitUsage
	}
	return ExitError
}

// exitError ends a command with a given code; err, if any, is printed.
type exitError struct {
	code ExitCode
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// usageError marks an error in the command line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

func isUsage(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "tblimit",
		Short:         "Rate, bandwidth and money limits kept as double-entry ledgers in TigerBeetle",
		Long:          "tblimit provisions and operates rate, bandwidth and money limits kept as double-entry ledgers in TigerBeetle.\n\n" + exitCodeHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(newDemo())
	return root
}
