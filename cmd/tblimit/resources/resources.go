// Package resources is tblimit resources: create, list, show and migrate resources.
package resources

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

// NewCmdResources returns the tblimit resources noun and its verbs.
func NewCmdResources(f *cmdutil.Factory) *cobra.Command {
	cmd := cmdutil.Group(&cobra.Command{
		Use:     "resources",
		Aliases: []string{"resource"},
		Short:   "Create, list and show limited resources",
		Long: `A resource is one limit kept as one TigerBeetle ledger: request rate, bandwidth
or money per window. It is identified by its name or its ledger number.

Resources cannot be changed once created (their definition is stored in an
immutable TigerBeetle account): per-user limits can (tblimit users set-limit), and
users move to a new resource with tblimit resources migrate.`,
	})
	cmd.AddCommand(newCmdResourcesCreate(f, nil), newCmdResourcesList(f, nil), newCmdResourcesShow(f, nil), newCmdResourcesMigrate(f, nil))
	return cmd
}

type resourcesCreateOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Resource ledger.Resource // validated
}

// resourceFlags are the flags of resources create, as given.
type resourceFlags struct {
	kind, ledger, window, limit, currency string
	lazy                                  bool
}

func newCmdResourcesCreate(f *cmdutil.Factory, runF func(context.Context, *resourcesCreateOptions) error) *cobra.Command {
	opts := &resourcesCreateOptions{Connect: f.Connect, Printer: f.Printer}
	var fl resourceFlags
	cmd := &cobra.Command{
		Use:   "create NAME --kind requests|bytes|money --ledger N --window DURATION --limit N",
		Short: "Create a resource (idempotent)",
		Long: `Create a resource. Creating the same resource again succeeds and changes
nothing; a different definition on the same ledger is an error, since a
resource cannot be changed once created.

  tblimit resources create api --kind requests --ledger 1 --window 2s --limit 5 --lazy
  tblimit resources create upload --kind bytes --ledger 2 --window 1m --limit 10_000_000
  tblimit resources create usd-day --kind money --ledger 3 --currency 840 --window 1d --limit 1000

NAME is 1 to 12 characters of a-z 0-9 - _ . ; the window a duration of whole
seconds (2s, 1m, 24h, 1d, 1d12h); money amounts are in the currency's smallest unit.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if opts.Resource, err = fl.resource(args[0]); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return resourcesCreateRun(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&fl.kind, "kind", "", "what the resource counts: requests, bytes or money (required)")
	fs.StringVar(&fl.ledger, "ledger", "", "the TigerBeetle ledger of the limit, 1 to 2^32-1 (required)")
	fs.StringVar(&fl.window, "window", "", "how long a unit counts against the limit: 2s, 1m, 24h, 1d, 1d12h (required)")
	fs.StringVar(&fl.limit, "limit", "", "the default limit per user per window (required)")
	fs.BoolVar(&fl.lazy, "lazy", false, "give unknown users the default limit on first use (not for money)")
	fs.StringVar(&fl.currency, "currency", "", "money only: the ledger of the currency paid under the limit")
	return cmd
}

// resource validates the flags of resource name.
func (fl *resourceFlags) resource(name string) (ledger.Resource, error) {
	for _, req := range [][2]string{{"kind", fl.kind}, {"ledger", fl.ledger}, {"window", fl.window}, {"limit", fl.limit}} {
		if req[1] == "" {
			return ledger.Resource{}, cmdutil.Usagef("--%s is required (see tblimit resources create --help)", req[0])
		}
	}
	kind, err := ledger.ParseKind(fl.kind)
	if err != nil {
		return ledger.Resource{}, cmdutil.Usagef("--kind %q: want requests, bytes or money", fl.kind)
	}
	r := ledger.Resource{Name: name, Kind: kind, Lazy: fl.lazy}
	if r.Ledger, err = cmdutil.ParseLedger(fl.ledger); err != nil {
		return r, cmdutil.Usagef("--ledger %w", err)
	}
	if r.Window, err = cmdutil.ParseWindow(fl.window); err != nil {
		return r, cmdutil.Usagef("--window %w", err)
	}
	if r.DefaultLimit, err = cmdutil.ParseLimit(fl.limit); err != nil {
		return r, cmdutil.Usagef("--limit %w", err)
	}
	switch {
	case fl.currency != "" && kind != ledger.KindMoney:
		return r, cmdutil.Usagef("--currency: only a money resource has a currency ledger")
	case fl.currency != "":
		if r.Currency, err = cmdutil.ParseLedger(fl.currency); err != nil {
			return r, cmdutil.Usagef("--currency %w", err)
		}
	case kind == ledger.KindMoney:
		return r, cmdutil.Usagef("--currency is required for a money resource: the ledger of the currency paid under the limit")
	}
	if err := r.Validate(); err != nil {
		return r, cmdutil.AsUsage(err)
	}
	return r, nil
}

func resourcesCreateRun(ctx context.Context, opts *resourcesCreateOptions) error {
	r := opts.Resource
	created := true
	err := cmdutil.WithLedger(ctx, opts.Connect, func(c *ledger.Client) error {
		all, err := c.Resources(ctx)
		if err != nil {
			return err
		}
		exists, err := ledger.CheckNewResource(r, all)
		switch {
		case err != nil:
			return err
		case exists:
			created = false
			return nil
		}
		return c.CreateResource(ctx, r)
	})
	if err != nil {
		return err
	}
	out := cmdutil.ResourceOut(r)
	out.Created = &created
	p := opts.Printer()
	return p.Emit(out, func() {
		if created {
			p.Printf("created resource %s\n", r)
		} else {
			p.Printf("resource %s exists already\n", r)
		}
	})
}

type resourcesListOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer
}

func newCmdResourcesList(f *cmdutil.Factory, runF func(context.Context, *resourcesListOptions) error) *cobra.Command {
	opts := &resourcesListOptions{Connect: f.Connect, Printer: f.Printer}
	return &cobra.Command{
		Use:   "list",
		Short: "List the resources",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return resourcesListRun(cmd.Context(), opts)
		},
	}
}

func resourcesListRun(ctx context.Context, opts *resourcesListOptions) error {
	var all []ledger.Resource
	err := cmdutil.WithLedger(ctx, opts.Connect, func(c *ledger.Client) (err error) {
		all, err = c.Resources(ctx)
		return err
	})
	if err != nil {
		return err
	}
	out := ListJSON{Resources: []cmdutil.ResourceJSON{}}
	rows := make([][]string, 0, len(all))
	for _, r := range all {
		out.Resources = append(out.Resources, cmdutil.ResourceOut(r))
		rows = append(rows, resourceRow(r))
	}
	p := opts.Printer()
	return p.Emit(out, func() {
		if len(all) == 0 && p.TTY {
			p.Printf("no resources yet: create one with tblimit resources create\n")
			return
		}
		p.Table([]string{"NAME", "KIND", "LEDGER", "WINDOW", "DEFAULT LIMIT", "LAZY", "CURRENCY LEDGER"}, rows)
	})
}

func resourceRow(r ledger.Resource) []string {
	currency := "-"
	if r.Kind == ledger.KindMoney {
		currency = strconv.FormatUint(uint64(r.Currency), 10)
	}
	return []string{r.Name, r.Kind.String(), strconv.FormatUint(uint64(r.Ledger), 10), cmdutil.FormatWindow(r.Window),
		strconv.FormatUint(r.DefaultLimit, 10), strconv.FormatBool(r.Lazy), currency}
}

type resourcesShowOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer

	Resource string
}

func newCmdResourcesShow(f *cmdutil.Factory, runF func(context.Context, *resourcesShowOptions) error) *cobra.Command {
	opts := &resourcesShowOptions{Connect: f.Connect, Printer: f.Printer}
	return &cobra.Command{
		Use:               "show RESOURCE",
		Short:             "Show a resource, by name or ledger number",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: f.CompleteResources,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Resource = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return resourcesShowRun(cmd.Context(), opts)
		},
	}
}

func resourcesShowRun(ctx context.Context, opts *resourcesShowOptions) error {
	var r ledger.Resource
	err := cmdutil.WithResource(ctx, opts.Connect, opts.Resource, func(_ *ledger.Client, res ledger.Resource) error {
		r = res
		return nil
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	return p.Emit(cmdutil.ResourceOut(r), func() {
		row := resourceRow(r)
		p.Fields([][2]string{{"name", row[0]}, {"kind", row[1]}, {"ledger", row[2]}, {"window", row[3]},
			{"default limit", row[4]}, {"lazy", row[5]}, {"currency ledger", row[6]}})
	})
}

// ListJSON is the answer to resources list.
type ListJSON struct {
	Resources []cmdutil.ResourceJSON `json:"resources"`
}
