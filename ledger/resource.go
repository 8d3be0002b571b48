package ledger

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Kind says what a resource counts. Its constants carry the type's name,
// as log/slog's Kind constants do, so that ledger.KindBytes (what a
// resource counts) does not read as recipes.Bytes (an amount of bytes).
type Kind uint8

const (
	// KindRequests counts requests: one unit per admitted request.
	KindRequests Kind = 1
	// KindBytes counts bandwidth: one unit per byte.
	KindBytes Kind = 2
	// KindMoney counts an amount of a currency in its smallest unit (cents
	// for USD). A money resource pairs its limit ledger with a currency
	// ledger.
	KindMoney Kind = 3
)

// String returns "requests", "bytes" or "money".
func (k Kind) String() string {
	switch k {
	case KindRequests:
		return "requests"
	case KindBytes:
		return "bytes"
	case KindMoney:
		return "money"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind parses the names String returns.
func ParseKind(s string) (Kind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "requests", "request":
		return KindRequests, nil
	case "bytes", "byte", "bandwidth":
		return KindBytes, nil
	case "money":
		return KindMoney, nil
	}
	return 0, fmt.Errorf("%w: kind %q (want requests, bytes or money)", ErrInvalidResource, s)
}

// MaxWindow is the longest window a resource can have: TigerBeetle's pending
// transfer timeout is a 32-bit number of seconds.
const MaxWindow = time.Duration(math.MaxUint32) * time.Second

// MaxNameLen is the longest resource name: the name is stored in the operator
// account, so that every process reads the same definition from the cluster.
const MaxNameLen = 12

// Resource is one limited resource, kept as one TigerBeetle ledger: an
// operator account and one account per user whose credits are the user's
// limit. Every admitted unit is a pending transfer from the user to the
// operator that expires after Window, so at most the user's limit is
// admitted in any interval of length Window.
//
// A Resource is a plain value; build it with a struct literal and it is
// validated by every call that uses it (see Validate). Its definition is
// stored in the operator account when the resource is created and cannot be
// changed afterwards (TigerBeetle accounts are immutable): per-user limits can.
type Resource struct {
	// Name identifies the resource to people: 1 to 12 characters of
	// a-z, 0-9, '-', '_' and '.'.
	Name string
	// Ledger is the TigerBeetle ledger number of the limit (not 0).
	Ledger uint32
	// Kind says what a unit is.
	Kind Kind
	// Window is how long an admitted unit counts against the limit: whole
	// seconds, from one second to MaxWindow.
	Window time.Duration
	// DefaultLimit is the limit given to a user provisioned without an
	// explicit limit, and to users created lazily on their first decision.
	DefaultLimit uint64
	// Lazy provisions an unknown user with DefaultLimit inside its first
	// decision, so that no table of users has to be kept in advance.
	// Money resources are never lazy.
	Lazy bool
	// Currency is, for Money only, the ledger of the currency whose
	// payments the limit applies to (not 0, not Ledger).
	Currency uint32
}

// Validate reports what is wrong with r, or nil.
func (r Resource) Validate() error {
	if err := validName(r.Name); err != nil {
		return err
	}
	if r.Ledger == 0 {
		return fmt.Errorf("%w: %q: ledger must not be 0", ErrInvalidResource, r.Name)
	}
	switch r.Kind {
	case KindRequests, KindBytes:
		if r.Currency != 0 {
			return fmt.Errorf("%w: %q: only a money resource has a currency ledger", ErrInvalidResource, r.Name)
		}
	case KindMoney:
		if r.Currency == 0 {
			return fmt.Errorf("%w: %q: a money resource needs a currency ledger", ErrInvalidResource, r.Name)
		}
		if r.Currency == r.Ledger {
			return fmt.Errorf("%w: %q: the currency ledger must differ from the limit ledger %d", ErrInvalidResource, r.Name, r.Ledger)
		}
		if r.Lazy {
			return fmt.Errorf("%w: %q: money resources cannot provision users lazily", ErrInvalidResource, r.Name)
		}
	default:
		return fmt.Errorf("%w: %q: unknown kind %d", ErrInvalidResource, r.Name, r.Kind)
	}
	if _, err := WindowSeconds(r.Window); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidResource, r.Name, err)
	}
	return nil
}

// String describes r, e.g. "api (requests, ledger 1): 10 per 1m0s".
func (r Resource) String() string {
	s := fmt.Sprintf("%s (%s, ledger %d", r.Name, r.Kind, r.Ledger)
	if r.Kind == KindMoney {
		s += fmt.Sprintf(", currency ledger %d", r.Currency)
	}
	return s + fmt.Sprintf("): %d per %s", r.DefaultLimit, FormatWindow(r.Window))
}

// FormatWindow writes a window as people and the CLI's flags and files
// write one: its days, hours, minutes and seconds that are not zero ("2s",
// "1m", "1h30m", "1d", "1d12h"), and "0s" for none. A window that is not
// whole seconds (which no Resource has) shows its fraction ("1.5s").
func FormatWindow(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}} {
		if n := d / u.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.d
		}
	}
	switch {
	case d%time.Second == 0 && d > 0:
		fmt.Fprintf(&b, "%ds", d/time.Second)
	case d > 0:
		b.WriteString(strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s")
	}
	return b.String()
}

// WindowSeconds converts a window to TigerBeetle's timeout: a whole number of
// seconds from 1 to 2^32-1. Anything else is an error, never rounded.
func WindowSeconds(w time.Duration) (uint32, error) {
	switch {
	case w < time.Second:
		return 0, fmt.Errorf("%w: %s is shorter than one second", ErrInvalidWindow, w)
	case w%time.Second != 0:
		return 0, fmt.Errorf("%w: %s is not a whole number of seconds", ErrInvalidWindow, w)
	case w > MaxWindow:
		return 0, fmt.Errorf("%w: %s is longer than %d seconds", ErrInvalidWindow, w, uint32(math.MaxUint32))
	}
	return uint32(w / time.Second), nil
}

func validName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidResource)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: name %s is longer than %d characters", ErrInvalidResource, clip(name), MaxNameLen)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: name %q: character %q is not one of a-z, 0-9, '-', '_' and '.'", ErrInvalidResource, name, c)
		}
	}
	return nil
}

// MaxKeyLen is the longest user key accepted, in bytes.
const MaxKeyLen = 1024

// NormalizeKey returns user key in the form this package uses it, or an
// error wrapping ErrInvalidKey that says what is wrong. The rule is the same
// for the library, the CLI's arguments and the files it reads: a key is
// valid UTF-8 of 1 to MaxKeyLen bytes, without control characters (tabs
// and newlines included) and without white space at either end (refused,
// not trimmed: "alice" and " alice" would otherwise look alike and differ);
// and it is taken in Unicode normalization form C, so that "é" written as
// one character or as "e" and a combining accent is one user. Every call
// that takes a key applies the rule; a key returned by this package is
// already in that form.
func NormalizeKey(key string) (string, error) {
	ascii := true
	for i := 0; i < len(key); i++ {
		if b := key[i]; b >= utf8.RuneSelf || b < 0x20 || b == 0x7f {
			ascii = false
			break
		}
	}
	if !ascii {
		if !utf8.ValidString(key) {
			return "", fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidKey, clip(key))
		}
		for i, r := range key {
			if unicode.IsControl(r) {
				return "", fmt.Errorf("%w: %s has a control character (%U) at byte %d", ErrInvalidKey, clip(key), r, i)
			}
		}
		key = norm.NFC.String(key)
	}
	switch {
	case key == "":
		return "", fmt.Errorf("%w: empty user key", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return "", fmt.Errorf("%w: user key of %d bytes is longer than %d", ErrInvalidKey, len(key), MaxKeyLen)
	case strings.TrimSpace(key) != key:
		return "", fmt.Errorf("%w: %q begins or ends with white space", ErrInvalidKey, key)
	}
	return key, nil
}

// clip quotes s for a message, its first 64 bytes at most: a message
// never echoes an unbounded input whole.
func clip(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.Quote(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
}
