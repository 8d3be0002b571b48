// Package demo is tblimit demo: the three recipes end to end on an in-memory engine.
package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/recipes"
)

type demoOptions struct {
	Out io.Writer

	Window time.Duration
}

// NewCmdDemo returns tblimit demo; runF, when not nil, runs instead of demoRun.
func NewCmdDemo(f *cmdutil.Factory, runF func(context.Context, *demoOptions) error) *cobra.Command {
	opts := &demoOptions{Out: f.Out}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the three recipes end to end on an in-memory embedded engine",
		Long: `demo runs the request-rate, bandwidth and money-per-window recipes end to end on
an in-memory embedded engine, with short windows, and prints what was admitted,
denied and replenished. It waits for one window of real time per recipe.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := ledger.WindowSeconds(opts.Window); err != nil {
				return cmdutil.Usagef("--window: %w", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return demoRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Window, "window", 2*time.Second, "the window of every recipe (whole seconds)")
	return cmd
}

func demoRun(ctx context.Context, opts *demoOptions) error {
	w, window := opts.Out, opts.Window
	c := ledger.New(embedded.New())
	wait := func() error {
		fmt.Fprintf(w, "  ... waiting %s for the window to pass\n", window)
		select {
		case <-time.After(window + 100*time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	units := func(n uint64) string { return fmt.Sprint(n) }
	usd := func(n uint64) string { return fmt.Sprintf("%d.%02d", n/100, n%100) }
	show := func(what string, d recipes.Result, format func(uint64) string) {
		verdict := "admitted"
		if !d.Allowed {
			verdict = "DENIED (" + d.Reason.String() + ")"
			if d.RetryAfter > 0 {
				verdict += fmt.Sprintf(", retry after %s", d.RetryAfter.Round(time.Millisecond))
			}
		}
		fmt.Fprintf(w, "  %-26s %-42s remaining %s of %s\n", what, verdict, format(d.Remaining), format(d.Limit))
	}

	// 1. Request rate: 5 requests per window.
	fmt.Fprintf(w, "1. Request rate: 5 requests per %s for user alice\n", window)
	rate, err := recipes.NewRequestRate(c, recipes.Config{Name: "api", Ledger: 1, Lazy: true}, recipes.Per(5, window))
	if err != nil {
		return err
	}
	if err := rate.Create(ctx); err != nil {
		return err
	}
	for i := 1; i <= 6; i++ {
		d, err := rate.Allow(ctx, "alice")
		if err != nil {
			return err
		}
		show(fmt.Sprintf("request %d", i), d, units)
	}
	if err := wait(); err != nil {
		return err
	}
	d, err := rate.Allow(ctx, "alice")
	if err != nil {
		return err
	}
	show("request 7", d, units)

	// 2. Bandwidth: 10,000,000 bytes per window.
	fmt.Fprintf(w, "\n2. Bandwidth: 10,000,000 bytes per %s for user bob\n", window)
	bw, err := recipes.NewBandwidth(c, recipes.Config{Name: "upload", Ledger: 2, Lazy: true}, recipes.Bytes(10_000_000).Per(window))
	if err != nil {
		return err
	}
	if err := bw.Create(ctx); err != nil {
		return err
	}
	for _, size := range []uint64{4_000_000, 5_000_000, 2_000_000, 1_000_000} {
		d, err := bw.AllowN(ctx, "bob", size)
		if err != nil {
			return err
		}
		show(fmt.Sprintf("upload of %d bytes", size), d, units)
	}
	if err := wait(); err != nil {
		return err
	}
	if d, err = bw.AllowN(ctx, "bob", 2_000_000); err != nil {
		return err
	}
	show("upload of 2000000 bytes", d, units)

	// 3. Money: 1000.00 per window, paid on a USD ledger.
	fmt.Fprintf(w, "\n3. Money: 1000.00 USD per %s for user carol, paying shop (USD ledger 840)\n", window)
	money, err := recipes.NewMoneyPerWindow(c, recipes.Config{Name: "usd-limit", Ledger: 3}, 840, recipes.Amount(1000_00).Per(window))
	if err != nil {
		return err
	}
	if err := money.Create(ctx); err != nil {
		return err
	}
	for _, u := range []string{"carol", "shop"} {
		if err := money.AddUser(ctx, u); err != nil {
			return err
		}
	}
	if err := money.Fund(ctx, "carol", 1500_00); err != nil {
		return err
	}
	pay := func(amount uint64) error {
		d, err := money.Pay(ctx, "carol", "shop", amount)
		if err != nil {
			return err
		}
		funds, err := money.Funds(ctx, "carol")
		if err != nil {
			return err
		}
		show("pay "+usd(amount), d, usd)
		fmt.Fprintf(w, "  %-26s carol now holds %s USD\n", "", usd(funds))
		return nil
	}
	fmt.Fprintln(w, "  carol is funded with 1500.00 USD")
	for _, amount := range []uint64{600_00, 600_00, 400_00} {
		if err := pay(amount); err != nil {
			return err
		}
	}
	if err := wait(); err != nil {
		return err
	}
	if err := pay(600_00); err != nil { // the limit is back, the money is not
		return err
	}
	return nil
}
