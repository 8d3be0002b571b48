package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
)

func newResources(g *globalOptions) *cobra.Command {
	cmd := group(&cobra.Command{
		Use:     "resources",
		Aliases: []string{"resource"},
		Short:   "Create, list and show limited resources",
		Long: `A resource is one limit kept as one TigerBeetle ledger: request rate, bandwidth
or money per window. It is identified by its name or its ledger number.

Resources cannot be changed once created (their definition is stored in an
immutable TigerBeetle account): per-user limits can (tblimit users set-limit).`,
	})
	cmd.AddCommand(newResourcesCreate(g), newResourcesList(g), newResourcesShow(g))
	return cmd
}

type resourcesCreateOptions struct {
	g        *globalOptions
	name     string
	kind     string
	ledger   string
	window   string
	limit    string
	lazy     bool
	currency string
}

func newResourcesCreate(g *globalOptions) *cobra.Command {
	o := &resourcesCreateOptions{g: g}
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
seconds (2s, 1m, 24h, 1d); money amounts are in the currency's smallest unit.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.name = a[0]
			r, err := o.resource()
			if err != nil {
				return err
			}
			return o.run(cmd.Context(), r)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kind, "kind", "", "what the resource counts: requests, bytes or money (required)")
	f.StringVar(&o.ledger, "ledger", "", "the TigerBeetle ledger of the limit, 1 to 2^32-1 (required)")
	f.StringVar(&o.window, "window", "", "how long a unit counts against the limit: 2s, 1m, 24h, 1d (required)")
	f.StringVar(&o.limit, "limit", "", "the default limit per user per window (required)")
	f.BoolVar(&o.lazy, "lazy", false, "give unknown users the default limit on first use (not for money)")
	f.StringVar(&o.currency, "currency", "", "money only: the ledger of the currency paid under the limit")
	return cmd
}

// resource validates the flags.
func (o *resourcesCreateOptions) resource() (ledger.Resource, error) {
	for _, req := range [][2]string{{"kind", o.kind}, {"ledger", o.ledger}, {"window", o.window}, {"limit", o.limit}} {
		if req[1] == "" {
			return ledger.Resource{}, usagef("--%s is required (see tblimit resources create --help)", req[0])
		}
	}
	kind, err := ledger.ParseKind(o.kind)
	if err != nil {
		return ledger.Resource{}, usagef("--kind %q: want requests, bytes or money", o.kind)
	}
	r := ledger.Resource{Name: o.name, Kind: kind, Lazy: o.lazy}
	if r.Ledger, err = parseLedger(o.ledger); err != nil {
		return r, usagef("--ledger %w", err)
	}
	if r.Window, err = parseWindow(o.window); err != nil {
		return r, usagef("--window %w", err)
	}
	if r.DefaultLimit, err = parseLimit(o.limit); err != nil {
		return r, usagef("--limit %w", err)
	}
	if o.currency != "" {
		if kind != ledger.Money {
			return r, usagef("--currency: only a money resource has a currency ledger")
		}
		if r.Currency, err = parseLedger(o.currency); err != nil {
			return r, usagef("--currency %w", err)
		}
	} else if kind == ledger.Money {
		return r, usagef("--currency is required for a money resource: the ledger of the currency paid under the limit")
	}
	if err := r.Validate(); err != nil {
		return r, usagef("%s", trimLedger(err))
	}
	return r, nil
}

func (o *resourcesCreateOptions) run(ctx context.Context, r ledger.Resource) error {
	created := true
	err := o.g.run(ctx, func(c *ledger.Client) error {
		all, err := c.Resources(ctx)
		if err != nil {
			return err
		}
		if err := checkNewResource(r, all); err != nil {
			if !errors.Is(err, errExists) {
				return err
			}
			created = false
			return nil
		}
		if err := c.CreateResource(ctx, r); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	out := resourceOut(r)
	out.Created = &created
	p := o.g.out()
	return p.emit(out, func() {
		if created {
			p.printf("created resource %s\n", r)
		} else {
			p.printf("resource %s exists already\n", r)
		}
	})
}

var errExists = errors.New("exists")

// checkNewResource reports whether r may be created next to the resources
// all: errExists if it exists as it is, an error if it clashes.
func checkNewResource(r ledger.Resource, all []ledger.Resource) error {
	for _, old := range all {
		switch {
		case old.Ledger == r.Ledger && old == r:
			return errExists
		case old.Ledger == r.Ledger:
			return fmt.Errorf("ledger %d already holds resource %s, which differs in %s; resources cannot be changed once created (create a new one on another ledger)",
				r.Ledger, old.Name, resourceDiff(old, r))
		case old.Name == r.Name:
			return fmt.Errorf("the name %q is taken by resource %s", r.Name, old)
		case old.Kind == ledger.Money && old.Currency == r.Ledger:
			return fmt.Errorf("ledger %d is the currency ledger of resource %s", r.Ledger, old.Name)
		case r.Kind == ledger.Money && r.Currency == old.Ledger:
			return fmt.Errorf("currency ledger %d is the limit ledger of resource %s", r.Currency, old.Name)
		}
	}
	return nil
}

// resourceDiff says how want differs from have.
func resourceDiff(have, want ledger.Resource) string {
	var d []string
	add := func(field string, h, w any) {
		if h != w {
			d = append(d, fmt.Sprintf("%s (%v, not %v)", field, h, w))
		}
	}
	add("name", have.Name, want.Name)
	add("kind", have.Kind, want.Kind)
	add("window", formatWindow(have.Window), formatWindow(want.Window))
	add("default limit", have.DefaultLimit, want.DefaultLimit)
	add("lazy", have.Lazy, want.Lazy)
	add("currency ledger", have.Currency, want.Currency)
	return strings.Join(d, ", ")
}

func newResourcesList(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the resources",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var all []ledger.Resource
			err := g.run(ctx, func(c *ledger.Client) (err error) {
				all, err = c.Resources(ctx)
				return err
			})
			if err != nil {
				return err
			}
			out := resourcesJSON{Resources: []resourceJSON{}}
			rows := make([][]string, 0, len(all))
			for _, r := range all {
				out.Resources = append(out.Resources, resourceOut(r))
				rows = append(rows, resourceRow(r))
			}
			p := g.out()
			return p.emit(out, func() {
				if len(all) == 0 && p.tty {
					p.printf("no resources yet: create one with tblimit resources create\n")
					return
				}
				p.table([]string{"NAME", "KIND", "LEDGER", "WINDOW", "DEFAULT LIMIT", "LAZY", "CURRENCY LEDGER"}, rows)
			})
		},
	}
}

func resourceRow(r ledger.Resource) []string {
	currency := "-"
	if r.Kind == ledger.Money {
		currency = strconv.FormatUint(uint64(r.Currency), 10)
	}
	return []string{r.Name, r.Kind.String(), strconv.FormatUint(uint64(r.Ledger), 10), formatWindow(r.Window),
		strconv.FormatUint(r.DefaultLimit, 10), strconv.FormatBool(r.Lazy), currency}
}

func newResourcesShow(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:               "show RESOURCE",
		Short:             "Show a resource, by name or ledger number",
		Args:              args(cobra.ExactArgs(1)),
		ValidArgsFunction: completeResources(g),
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			var r ledger.Resource
			err := g.run(ctx, func(c *ledger.Client) (err error) {
				r, err = resolve(ctx, c, a[0])
				return err
			})
			if err != nil {
				return err
			}
			p := g.out()
			return p.emit(resourceOut(r), func() {
				row := resourceRow(r)
				p.fields([][2]string{{"name", row[0]}, {"kind", row[1]}, {"ledger", row[2]}, {"window", row[3]},
					{"default limit", row[4]}, {"lazy", row[5]}, {"currency ledger", row[6]}})
			})
		},
	}
}

// trimLedger drops the "ledger: " prefix of the ledger package's errors,
// for messages about the command line.
func trimLedger(err error) string {
	msg := err.Error()
	for _, prefix := range []string{ledger.ErrInvalidResource.Error() + ": ", "ledger: "} {
		if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
			return msg[len(prefix):]
		}
	}
	return msg
}
