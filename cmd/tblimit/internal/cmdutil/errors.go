package cmdutil

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tblimit/tblimit/ledger"
)

// The errors of the command line are told apart by type, never by their
// text: a UsageError is a bad command line (exit 2), a SilentError ends a
// command with a code and no message (its result is on stdout), a
// hintedError already says what to do. Factory.Exit turns them into exit
// codes and messages, in one place.

// UsageError marks an error in the command line: an unknown command or
// flag, a wrong number of arguments, a malformed argument or flag value.
type UsageError struct{ err error }

func (e *UsageError) Error() string { return e.err.Error() }
func (e *UsageError) Unwrap() error { return e.err }

// Usagef is a usage error with a message formatted as fmt.Errorf does.
func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// AsUsage marks err as an error in the command line.
func AsUsage(err error) error { return &UsageError{err} }

// IsUsage reports whether err is, or wraps, a usage error.
func IsUsage(err error) bool {
	var ue *UsageError
	return errors.As(err, &ue)
}

// SilentError ends a command with an exit code and no error message.
type SilentError struct{ Code ExitCode }

func (e *SilentError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// Denied ends a command whose request a limit denied: exit code 3, and no
// error message (the decision was printed).
var Denied = &SilentError{Code: ExitDenied}

// hintedError is an error with the command's own advice; the general advice
// Factory.explain adds is then left out.
type hintedError struct {
	err  error
	hint string
}

func (e *hintedError) Error() string { return fmt.Sprintf("%v (%s)", e.err, e.hint) }
func (e *hintedError) Unwrap() error { return e.err }

// Hint adds advice to err, formatted as fmt.Sprintf does.
func Hint(err error, format string, args ...any) error {
	return &hintedError{err: err, hint: fmt.Sprintf(format, args...)}
}

// UsageConventions makes the errors of the command line under root usage
// errors by type: flag errors through cobra's flag error function, and
// argument errors by wrapping the Args check of every command in the tree,
// those cobra adds (completion and its shells) included. Commands declare
// their Args with cobra's checks; every command has one (a test checks). A
// noun without a run function of its own (cobra's completion) becomes a
// group, so that an unknown verb is a usage error, not its help.
func UsageConventions(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && !c.Runnable() {
			Group(c)
		}
		if c.Args != nil {
			c.Args = usageArgs(c.Args)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// usageArgs wraps a cobra argument check so that its errors are usage errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			// The command without the program's name, which the message
			// starts with already ("tblimit: users add: ...").
			name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
			return &UsageError{fmt.Errorf("%s: %w (see %s --help)", name, err, cmd.CommandPath())}
		}
		return nil
	}
}

// flagError makes flag errors usage errors, and explains a negative number
// taken for a flag (pflag reads "-3" as the unknown shorthand flag 3).
func flagError(_ *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		return Usagef("--%s %q: %s", iv.GetFlag().Name, iv.GetValue(), want(iv.GetFlag(), iv.Unwrap()))
	}
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		if s := ne.GetSpecifiedShortnames(); s != "" && s[0] >= '0' && s[0] <= '9' {
			return Usagef("%q: negative numbers are not allowed (amounts and limits are whole numbers)", "-"+s)
		}
	}
	return &UsageError{err}
}

// Retryable adds to an error whose answer was lost how to retry the attempt.
func Retryable(err error) error {
	if id, ok := ledger.AttemptID(err); ok {
		return fmt.Errorf("%w; it may still have been applied: retry with --id %s to make sure it counts once", err, id)
	}
	return err
}

// UsedID explains an ID given again for a different request.
func UsedID(err error) error {
	if errors.Is(err, ledger.ErrIDReused) {
		return errors.New("--id was already used for a different request")
	}
	return err
}

// explain adds what the user can do about an error from the ledger, unless
// the command said it already.
func (f *Factory) explain(err error) error {
	var h *hintedError
	switch {
	case errors.As(err, &h):
		return err
	case errors.Is(err, ledger.ErrUnknownUser):
		return Hint(err, "add it with tblimit users add")
	case errors.Is(err, ledger.ErrLimitChanging):
		return Hint(err, "its limit is being set as it is read: run the audit again")
	case errors.Is(err, ledger.ErrUnavailable) && len(f.Global.Addresses) > 0:
		return Hint(err, "is a cluster with ID %d running at %s? tblimit tigerbeetle status tells about a local one",
			f.Global.ClusterID, strings.Join(f.Global.Addresses, ","))
	}
	return err
}

// Exit prints err, once, and returns the exit code it means.
func (f *Factory) Exit(err error) ExitCode {
	if err == nil {
		return ExitOK
	}
	var s *SilentError
	if errors.As(err, &s) {
		return s.Code
	}
	fmt.Fprintln(f.ErrOut, "tblimit:", Message(f.explain(err)))
	if IsUsage(err) {
		return ExitUsage
	}
	return ExitError
}

// Message is the text tblimit prints for err, after its own "tblimit: ".
//
// The packages tblimit uses prefix their errors with their names ("ledger:
// unknown user"), as Go errors should; tblimit says who is speaking once, so
// Message drops those prefixes wherever an error was wrapped into another.
// For the ledger's errors about an input that the command line names itself
// ("USER: ", "--window ", "FILE:LINE: "), it also drops the ledger's words
// for the kind of input ("invalid user key: "), which would only repeat
// them. This is presentation only: no decision is taken on the text.
func Message(err error) string {
	msg := err.Error()
	for _, in := range inputErrors {
		if errors.Is(err, in) {
			msg = strings.ReplaceAll(msg, in.Error()+": ", "")
		}
	}
	return dropPackagePrefixes(msg)
}

// inputErrors are the ledger's errors about an input.
var inputErrors = []error{ledger.ErrInvalidKey, ledger.ErrInvalidResource, ledger.ErrInvalidWindow, ledger.ErrInvalidAmount}

// packagePrefixes are the prefixes of the errors of the packages tblimit
// prints errors from.
var packagePrefixes = []string{"ledger: ", "embedded: ", "launch: ", "ratelimit: "}

// dropPackagePrefixes drops the package prefixes at the start of msg and
// after every ": ", except inside double-quoted strings (a quoted user key
// is printed as it is).
func dropPackagePrefixes(msg string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(msg); {
		if !quoted && (i == 0 || strings.HasSuffix(msg[:i], ": ")) {
			if n := packagePrefix(msg[i:]); n > 0 {
				i += n
				continue
			}
		}
		switch c := msg[i]; {
		case quoted && c == '\\' && i+1 < len(msg):
			b.WriteString(msg[i : i+2])
			i += 2
			continue
		case c == '"':
			quoted = !quoted
		}
		b.WriteByte(msg[i])
		i++
	}
	return b.String()
}

// packagePrefix returns the length of the package prefix s starts with, or 0.
func packagePrefix(s string) int {
	for _, p := range packagePrefixes {
		if strings.HasPrefix(s, p) {
			return len(p)
		}
	}
	return 0
}
