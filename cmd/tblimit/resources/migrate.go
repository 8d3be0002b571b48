package resources

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

type resourcesMigrateOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	From, To string
	User     string // "": every user of From
}

func newCmdResourcesMigrate(f *cmdutil.Factory, runF func(context.Context, *resourcesMigrateOptions) error) *cobra.Command {
	opts := &resourcesMigrateOptions{Connect: f.Connect, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "migrate FROM TO [--user KEY]",
		Short: "Move the users of a resource to another (a new window or default limit), units in flight carried",
		Long: `A resource cannot change once created. To give it another window or default limit,
create the new one on another ledger and migrate: every user of FROM (or only --user)
gets an account on TO, with its own limit where it had one and TO's default where it had
FROM's, and the units it holds on FROM are carried over as holds on TO that return when
they would have returned on FROM. Run it once before the callers switch to TO, and once
after, for what they took on FROM meanwhile: it carries only what it did not carry yet.

  tblimit resources create api2 --kind requests --ledger 11 --window 1h --limit 1000 --lazy
  tblimit resources migrate api api2
  # deploy the callers on api2, then:
  tblimit resources migrate api api2`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			opts.From, opts.To = args[0], args[1]
			if opts.User != "" {
				if opts.User, err = cmdutil.KeyArg("--user", opts.User); err != nil {
					return err
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return resourcesMigrateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.User, "user", "", "migrate only this user")
	return cmd
}

// MigrateJSON is the answer to resources migrate.
type MigrateJSON struct {
	From         string `json:"from"`
	To           string `json:"to"`
	Users        int    `json:"users"`
	Carried      int    `json:"carried"`       // holds carried over by this run
	CarriedUnits uint64 `json:"carried_units"` // their units
	Unnamed      int    `json:"unnamed"`       // users of FROM whose key is not kept: not migrated
}

func resourcesMigrateRun(ctx context.Context, opts *resourcesMigrateOptions) error {
	out := MigrateJSON{}
	err := cmdutil.WithLedger(ctx, opts.Connect, func(c *ledger.Client) error {
		from, err := cmdutil.Resolve(ctx, c, opts.From)
		if err != nil {
			return err
		}
		to, err := cmdutil.Resolve(ctx, c, opts.To)
		if err != nil {
			return err
		}
		out.From, out.To = from.Name, to.Name
		users := []ledger.UserInfo{{Key: opts.User}}
		if opts.User == "" {
			if users, err = c.Users(ctx, from); err != nil {
				return err
			}
		}
		for _, u := range users {
			if u.Key == "" {
				out.Unnamed++
				continue
			}
			limit := uint64(0) // TO's default, for a user on FROM's
			if opts.User == "" && u.Limit != from.DefaultLimit {
				limit = u.Limit
			}
			m, err := c.Migrate(ctx, from, to, u.Key, limit)
			if err != nil {
				return err
			}
			out.Users++
			out.Carried += m.Carried
			out.CarriedUnits += m.CarriedUnits
		}
		return nil
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	return p.Emit(out, func() {
		p.Printf("migrated %s from %s to %s: %s (%d units) carried over\n", cmdutil.Plural(out.Users, "user"), out.From, out.To,
			cmdutil.Plural(out.Carried, "hold"), out.CarriedUnits)
		if out.Unnamed > 0 {
			p.Printf("%s of %s not migrated: their keys are not kept (provisioned by an older tblimit)\n", cmdutil.Plural(out.Unnamed, "user"), out.From)
		}
	})
}
