// Package users is tblimit users: add, set-limit, show, list, import and reset users.
package users

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

// NewCmdUsers returns the tblimit users noun and its verbs.
func NewCmdUsers(f *cmdutil.Factory) *cobra.Command {
	cmd := cmdutil.Group(&cobra.Command{
		Use:     "users",
		Aliases: []string{"user"},
		Short:   "Add users, set and show their limits, import them in bulk",
		Long: `Users are identified by a key (an API key, an account number...): 1 to 1024
bytes of UTF-8 without control characters (tabs and newlines included) and
without white space at either end, which is refused, not trimmed. Keys are
taken in Unicode normal form C, so that "é" typed as one character or as "e"
and an accent is one user. Arguments, CSV files and YAML files follow this
one rule. Each user of a resource has its own limit per window.`,
	})
	cmd.AddCommand(newCmdUsersAdd(f, nil), newCmdUsersSetLimit(f, nil), newCmdUsersShow(f, nil),
		newCmdUsersList(f, nil), newCmdUsersImport(f, nil), newCmdUsersReset(f, nil))
	return cmd
}

type usersAddOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Resource string
	Key      string
	Limit    *uint64 // nil: the resource's default limit
}

func newCmdUsersAdd(f *cmdutil.Factory, runF func(context.Context, *usersAddOptions) error) *cobra.Command {
	opts := &usersAddOptions{Connect: f.Connect, Printer: f.Printer}
	var limit string
	cmd := &cobra.Command{
		Use:   "add RESOURCE KEY [--limit N]",
		Short: "Add a user to a resource (idempotent)",
		Long: `Add a user to a resource, with the resource's default limit or --limit. For a
money resource it also opens the user's account on the currency ledger, which
both paying (tblimit fund, pay) and being paid need.

Adding a user that exists changes nothing (and fails if --limit differs from
its limit: use set-limit to change it).`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.Key, err = cmdutil.KeyArg("KEY", args[1]); err != nil {
				return err
			}
			if limit != "" {
				n, err := cmdutil.ParseLimit(limit)
				if err != nil {
					return cmdutil.Usagef("--limit %w", err)
				}
				opts.Limit = &n
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return usersAddRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&limit, "limit", "", "the user's limit per window (default: the resource's default limit)")
	return cmd
}

func usersAddRun(ctx context.Context, opts *usersAddOptions) error {
	var out UserJSON
	var r ledger.Resource
	created := false
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, res ledger.Resource) error {
		r = res
		limit := r.DefaultLimit
		if opts.Limit != nil {
			limit = *opts.Limit
		}
		u, err := c.Inspect(ctx, r, opts.Key)
		switch {
		case errors.Is(err, ledger.ErrUnknownUser):
			created = true
		case err != nil:
			return err
		case opts.Limit != nil && u.Limit != limit:
			return fmt.Errorf("user %q exists on %s with limit %d, not %d: use tblimit users set-limit to change it", opts.Key, r.Name, u.Limit, limit)
		default:
			limit = u.Limit // provisioning again repairs a half-created user, changes nothing else
		}
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: opts.Key, Limit: limit}); err != nil {
			return err
		}
		out, err = userState(ctx, c, r, opts.Key)
		return err
	})
	if err != nil {
		return err
	}
	out.Created = &created
	p := opts.Printer()
	return p.Emit(out, func() {
		if created {
			p.Printf("added user %q to %s with limit %d per %s\n", opts.Key, r.Name, out.Limit, cmdutil.FormatWindow(r.Window))
		} else {
			p.Printf("user %q exists on %s with limit %d\n", opts.Key, out.Resource, out.Limit)
		}
	})
}

// userState reads a user's state, funds included for money.
func userState(ctx context.Context, c *ledger.Client, r ledger.Resource, key string) (UserJSON, error) {
	u, err := c.Inspect(ctx, r, key)
	if err != nil {
		return UserJSON{}, err
	}
	out := userOut(r, key, u)
	if r.Kind == ledger.KindMoney {
		funds, err := c.Funds(ctx, r.Currency, key)
		if err != nil {
			return UserJSON{}, err
		}
		out.Funds = &funds
	}
	return out, nil
}

type usersSetLimitOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Resource string
	Key      string
	Limit    uint64
}

func newCmdUsersSetLimit(f *cmdutil.Factory, runF func(context.Context, *usersSetLimitOptions) error) *cobra.Command {
	opts := &usersSetLimitOptions{Connect: f.Connect, Printer: f.Printer}
	return &cobra.Command{
		Use:   "set-limit RESOURCE KEY LIMIT",
		Short: "Change a user's limit",
		Long: `Change a user's limit. Raising takes effect at once. Lowering takes back what is
available at once and never lets the user exceed the new limit once the units
now in flight have returned.`,
		Args:              cobra.ExactArgs(3),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.Key, err = cmdutil.KeyArg("KEY", args[1]); err != nil {
				return err
			}
			if opts.Limit, err = cmdutil.ParseLimit(args[2]); err != nil {
				return cmdutil.Usagef("LIMIT %w", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return usersSetLimitRun(cmd.Context(), opts)
		},
	}
}

func usersSetLimitRun(ctx context.Context, opts *usersSetLimitOptions) error {
	var out UserJSON
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) (err error) {
		if err := c.SetLimit(ctx, r, opts.Key, opts.Limit); err != nil {
			return err
		}
		out, err = userState(ctx, c, r, opts.Key)
		return err
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	return p.Emit(out, func() {
		p.Printf("limit of %q on %s is now %d (%d in flight, %d available)\n", opts.Key, out.Resource, out.Limit, out.InFlight, out.Available)
	})
}

type usersShowOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Resource string
	Key      string
}

func newCmdUsersShow(f *cmdutil.Factory, runF func(context.Context, *usersShowOptions) error) *cobra.Command {
	opts := &usersShowOptions{Connect: f.Connect, Printer: f.Printer}
	return &cobra.Command{
		Use:               "show RESOURCE KEY",
		Short:             "Show a user's limit, units in flight, available units and next release",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.Resource = args[0]
			if opts.Key, err = cmdutil.KeyArg("KEY", args[1]); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return usersShowRun(cmd.Context(), opts)
		},
	}
}

func usersShowRun(ctx context.Context, opts *usersShowOptions) error {
	var out UserJSON
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) (err error) {
		out, err = userState(ctx, c, r, opts.Key)
		return err
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	return p.Emit(out, func() {
		next := "-"
		if out.NextReleaseUnits > 0 {
			next = fmt.Sprintf("%d in %s", out.NextReleaseUnits, cmdutil.Human(cmdutil.SecondsDuration(out.NextReleaseSeconds)))
		}
		pairs := [][2]string{{"resource", out.Resource}, {"user", out.User}, {"limit", cmdutil.U64(out.Limit)},
			{"in flight", cmdutil.U64(out.InFlight)}, {"available", cmdutil.U64(out.Available)}, {"next release", next},
			{"all back in", cmdutil.Human(cmdutil.SecondsDuration(out.ResetAfterSeconds))}}
		if out.Funds != nil {
			pairs = append(pairs, [2]string{"funds", cmdutil.U64(*out.Funds)})
		}
		p.Fields(pairs)
	})
}

type usersListOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Resource string
}

func newCmdUsersList(f *cmdutil.Factory, runF func(context.Context, *usersListOptions) error) *cobra.Command {
	opts := &usersListOptions{Connect: f.Connect, Printer: f.Printer}
	return &cobra.Command{
		Use:               "list RESOURCE",
		Short:             "List a resource's users, oldest first",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Resource = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return usersListRun(cmd.Context(), opts)
		},
	}
}

func usersListRun(ctx context.Context, opts *usersListOptions) error {
	out := ListJSON{Users: []userListJSON{}}
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(c *ledger.Client, r ledger.Resource) error {
		out.Resource = r.Name
		users, err := c.Users(ctx, r)
		for _, u := range users {
			out.Users = append(out.Users, userListJSON{User: u.Key, ID: u.ID.String(), Limit: u.Limit, InFlight: u.InFlight, Available: u.Available})
		}
		return err
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	return p.Emit(out, func() {
		rows := make([][]string, len(out.Users))
		for i, u := range out.Users {
			key := cmdutil.DisplayKey(u.User)
			if u.User == "" {
				key = "(id " + u.ID + ")"
			}
			rows[i] = []string{key, cmdutil.U64(u.Limit), cmdutil.U64(u.InFlight), cmdutil.U64(u.Available)}
		}
		p.Table([]string{"USER", "LIMIT", "IN FLIGHT", "AVAILABLE"}, rows)
	})
}

// UserJSON is one user's state: users add / set-limit / show.
type UserJSON struct {
	Resource           string  `json:"resource"`
	User               string  `json:"user"`
	Limit              uint64  `json:"limit"`
	InFlight           uint64  `json:"in_flight"`
	Available          uint64  `json:"available"`
	NextReleaseSeconds float64 `json:"next_release_seconds"` // 0 when nothing is in flight
	NextReleaseUnits   uint64  `json:"next_release_units"`
	ResetAfterSeconds  float64 `json:"reset_after_seconds"`
	Funds              *uint64 `json:"funds,omitempty"`   // money only: the user's currency balance
	Created            *bool   `json:"created,omitempty"` // users add only
}

func userOut(r ledger.Resource, key string, u ledger.Usage) UserJSON {
	return UserJSON{
		Resource:           r.Name,
		User:               key,
		Limit:              u.Limit,
		InFlight:           u.InFlight,
		Available:          u.Available,
		NextReleaseSeconds: cmdutil.Seconds(u.NextRelease),
		NextReleaseUnits:   u.NextReleaseUnits,
		ResetAfterSeconds:  cmdutil.Seconds(u.ResetAfter),
	}
}

// ListJSON lists a resource's users: users list.
type ListJSON struct {
	Resource string         `json:"resource"`
	Users    []userListJSON `json:"users"`
}

type userListJSON struct {
	User      string `json:"user"` // "" for a long key provisioned before keys were kept
	ID        string `json:"id"`   // the user's limit account
	Limit     uint64 `json:"limit"`
	InFlight  uint64 `json:"in_flight"`
	Available uint64 `json:"available"`
}
