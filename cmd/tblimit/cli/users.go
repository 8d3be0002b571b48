package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
)

func newUsers(g *globalOptions) *cobra.Command {
	cmd := group(&cobra.Command{
		Use:     "users",
		Aliases: []string{"user"},
		Short:   "Add users, set and show their limits, import them in bulk",
		Long: `Users are identified by a key: any string of 1 to 1024 bytes (an API key, an
account number...). Each user of a resource has its own limit per window.`,
	})
	cmd.AddCommand(newUsersAdd(g), newUsersSetLimit(g), newUsersShow(g), newUsersList(g), newUsersImport(g))
	return cmd
}

type usersAddOptions struct {
	g     *globalOptions
	limit string
}

func newUsersAdd(g *globalOptions) *cobra.Command {
	o := &usersAddOptions{g: g}
	cmd := &cobra.Command{
		Use:   "add RESOURCE KEY [--limit N]",
		Short: "Add a user to a resource (idempotent)",
		Long: `Add a user to a resource, with the resource's default limit or --limit. For a
money resource it also opens the user's account on the currency ledger, which
both paying (tblimit fund, pay) and being paid need.

Adding a user that exists changes nothing (and fails if --limit differs from
its limit: use set-limit to change it).`,
		Args:              args(cobra.ExactArgs(2)),
		ValidArgsFunction: completeResources(g),
		RunE: func(cmd *cobra.Command, a []string) error {
			return o.run(cmd.Context(), a[0], a[1])
		},
	}
	cmd.Flags().StringVar(&o.limit, "limit", "", "the user's limit per window (default: the resource's default limit)")
	return cmd
}

func (o *usersAddOptions) run(ctx context.Context, res, key string) error {
	if err := checkKey(key); err != nil {
		return usagef("KEY: %w", err)
	}
	var limit uint64
	if o.limit != "" {
		var err error
		if limit, err = parseLimit(o.limit); err != nil {
			return usagef("--limit %w", err)
		}
	}
	var out userJSON
	var r ledger.Resource
	created := false
	err := o.g.run(ctx, func(c *ledger.Client) (err error) {
		r, err = resolve(ctx, c, res)
		if err != nil {
			return err
		}
		if o.limit == "" {
			limit = r.DefaultLimit
		}
		u, err := c.Inspect(ctx, r, key)
		switch {
		case errors.Is(err, ledger.ErrUnknownUser):
			created = true
		case err != nil:
			return err
		case o.limit != "" && u.Limit != limit:
			return fmt.Errorf("user %q exists on %s with limit %d, not %d: use tblimit users set-limit to change it", key, r.Name, u.Limit, limit)
		default:
			limit = u.Limit // provisioning again repairs a half-created user, changes nothing else
		}
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: key, Limit: limit}); err != nil {
			return err
		}
		out, err = userState(ctx, c, r, key)
		return err
	})
	if err != nil {
		return err
	}
	out.Created = &created
	p := o.g.out()
	return p.emit(out, func() {
		if created {
			p.printf("added user %q to %s with limit %d per %s\n", key, r.Name, out.Limit, formatWindow(r.Window))
		} else {
			p.printf("user %q exists on %s with limit %d\n", key, out.Resource, out.Limit)
		}
	})
}

// userState reads a user's state, funds included for money.
func userState(ctx context.Context, c *ledger.Client, r ledger.Resource, key string) (userJSON, error) {
	u, err := c.Inspect(ctx, r, key)
	if err != nil {
		return userJSON{}, err
	}
	out := userOut(r, key, u)
	if r.Kind == ledger.Money {
		funds, err := c.Funds(ctx, r.Currency, key)
		if err != nil {
			return userJSON{}, err
		}
		out.Funds = &funds
	}
	return out, nil
}

func newUsersSetLimit(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "set-limit RESOURCE KEY LIMIT",
		Short: "Change a user's limit",
		Long: `Change a user's limit. Raising takes effect at once. Lowering takes back what is
available at once and never lets the user exceed the new limit once the units
now in flight have returned.`,
		Args:              args(cobra.ExactArgs(3)),
		ValidArgsFunction: completeResources(g),
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := checkKey(a[1]); err != nil {
				return usagef("KEY: %w", err)
			}
			limit, err := parseLimit(a[2])
			if err != nil {
				return usagef("LIMIT %w", err)
			}
			var out userJSON
			err = g.run(ctx, func(c *ledger.Client) error {
				r, err := resolve(ctx, c, a[0])
				if err != nil {
					return err
				}
				if err := c.SetLimit(ctx, r, a[1], limit); err != nil {
					return err
				}
				out, err = userState(ctx, c, r, a[1])
				return err
			})
			if err != nil {
				return err
			}
			p := g.out()
			return p.emit(out, func() {
				p.printf("limit of %q on %s is now %d (%d in flight, %d available)\n", a[1], out.Resource, out.Limit, out.InFlight, out.Available)
			})
		},
	}
}

func newUsersShow(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:               "show RESOURCE KEY",
		Short:             "Show a user's limit, units in flight, available units and next release",
		Args:              args(cobra.ExactArgs(2)),
		ValidArgsFunction: completeResources(g),
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := checkKey(a[1]); err != nil {
				return usagef("KEY: %w", err)
			}
			var out userJSON
			err := g.run(ctx, func(c *ledger.Client) error {
				r, err := resolve(ctx, c, a[0])
				if err != nil {
					return err
				}
				out, err = userState(ctx, c, r, a[1])
				return err
			})
			if err != nil {
				return err
			}
			p := g.out()
			return p.emit(out, func() {
				next := "-"
				if out.NextReleaseUnits > 0 {
					next = fmt.Sprintf("%d in %s", out.NextReleaseUnits, human(secondsDuration(out.NextReleaseSeconds)))
				}
				pairs := [][2]string{{"resource", out.Resource}, {"user", out.User}, {"limit", u64(out.Limit)},
					{"in flight", u64(out.InFlight)}, {"available", u64(out.Available)}, {"next release", next},
					{"all back in", human(secondsDuration(out.ResetAfterSeconds))}}
				if out.Funds != nil {
					pairs = append(pairs, [2]string{"funds", u64(*out.Funds)})
				}
				p.fields(pairs)
			})
		},
	}
}

func newUsersList(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:               "list RESOURCE",
		Short:             "List a resource's users, oldest first",
		Args:              args(cobra.ExactArgs(1)),
		ValidArgsFunction: completeResources(g),
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			out := usersJSON{Users: []userListJSON{}}
			err := g.run(ctx, func(c *ledger.Client) error {
				r, err := resolve(ctx, c, a[0])
				if err != nil {
					return err
				}
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
			p := g.out()
			return p.emit(out, func() {
				rows := make([][]string, len(out.Users))
				for i, u := range out.Users {
					key := u.User
					if key == "" {
						key = "(id " + u.ID + ")"
					}
					rows[i] = []string{key, u64(u.Limit), u64(u.InFlight), u64(u.Available)}
				}
				p.table([]string{"USER", "LIMIT", "IN FLIGHT", "AVAILABLE"}, rows)
			})
		},
	}
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
