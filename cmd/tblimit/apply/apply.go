// Package apply is tblimit apply: resources and user limits made to match a YAML file.
package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/internal/yamlpos"
	"github.com/tblimit/tblimit/ledger"
)

type applyOptions struct {
	Connect cmdutil.ConnectFunc
	Printer func() *cmdutil.Printer
	Open    cmdutil.OpenFunc

	File   string // - for standard input
	DryRun bool
}

// NewCmdApply returns tblimit apply; runF, when not nil, runs instead of applyRun.
func NewCmdApply(f *cmdutil.Factory, runF func(context.Context, *applyOptions) error) *cobra.Command {
	opts := &applyOptions{Connect: f.Connect, Printer: f.Printer, Open: f.Open}
	cmd := &cobra.Command{
		Use:   "apply -f limits.yaml [--dry-run]",
		Short: "Create or change resources and user limits to match a YAML file",
		Long: `Make the resources and user limits match a YAML file: create the resources and
users that are missing, and set the limit of users whose limit differs.
Applying the same file again changes nothing. With --dry-run, print the
changes it would make and write nothing.

  resources:
    - name: api
      kind: requests        # requests, bytes or money
      ledger: 1
      window: 1m            # 2s, 1m, 24h, 1d, 1d12h: whole seconds
      default_limit: 100
      lazy: true            # unknown users get the default limit on first use
      users:
        - key: alice
          limit: 1000
        - key: bob          # no limit: the default limit
    - name: usd-day
      kind: money
      ledger: 3
      currency: 840         # money only: the currency's ledger
      window: 1d
      default_limit: 100000
      users:
        - {key: alice, limit: 50000}
        - {key: shop}

Resources cannot be changed once created: a file that defines an existing
resource differently is an error, naming the line. Users and resources that
are not in the file are left alone. The whole file is checked before anything
is written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.File == "" {
				return cmdutil.Usagef("-f/--file is required: the YAML file to apply (- for standard input)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return applyRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "the YAML file to apply (- for standard input)")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print the changes that would be made, and make none")
	return cmd
}

// fileResource is a resource in an apply file.
type fileResource struct {
	ledger.Resource
	line  int
	users []fileUser
}

type fileUser struct {
	key   string
	limit *uint64
	line  int
}

func applyRun(ctx context.Context, opts *applyOptions) error {
	name, in, closeIn, err := opts.Open(opts.File)
	if err != nil {
		return err
	}
	defer closeIn()
	want, err := parseApplyFile(name, in)
	if err != nil {
		return err
	}
	out := applyJSON{DryRun: opts.DryRun, Changes: []changeJSON{}}
	err = cmdutil.WithLedger(ctx, opts.Connect, func(c *ledger.Client) error {
		plan, unchanged, err := planApply(ctx, c, name, want)
		if err != nil {
			return err
		}
		out.Unchanged = unchanged
		if opts.DryRun {
			out.Changes = plan.changes
			return nil
		}
		for _, r := range plan.create {
			if err := c.CreateResource(ctx, r); err != nil {
				return fmt.Errorf("creating resource %s: %w", r.Name, err)
			}
		}
		for _, fr := range want {
			err := cmdutil.Provision(ctx, c, fr.Resource, plan.users[fr.Ledger], func(_, _ int, err error) error {
				if err != nil {
					return fmt.Errorf("provisioning users of %s (apply the file again to complete it): %w", fr.Name, err)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		out.Changes = plan.changes
		return nil
	})
	if err != nil {
		return err
	}
	p := opts.Printer()
	return p.Emit(out, func() { printApply(p, name, out) })
}

// printApply prints the changes apply made, or would make.
func printApply(p *cmdutil.Printer, name string, out applyJSON) {
	for _, ch := range out.Changes {
		switch ch.Action {
		case "create_resource":
			p.Printf("%s create resource %s (%s, ledger %d", p.Paint(cmdutil.Green, "+"), ch.Resource, ch.Definition.Kind, ch.Definition.Ledger)
			if ch.Definition.CurrencyLedger != 0 {
				p.Printf(", currency ledger %d", ch.Definition.CurrencyLedger)
			}
			p.Printf("): %d per %s\n", ch.Definition.DefaultLimit, cmdutil.FormatWindow(time.Duration(ch.Definition.WindowSeconds)*time.Second))
		case "add_user":
			p.Printf("%s add user %q to %s with limit %d\n", p.Paint(cmdutil.Green, "+"), ch.User, ch.Resource, *ch.Limit)
		case "set_limit":
			p.Printf("%s set limit of %q on %s: %d -> %d\n", p.Paint(cmdutil.Amber, "~"), ch.User, ch.Resource, *ch.OldLimit, *ch.Limit)
		}
	}
	switch {
	case out.DryRun:
		p.Printf("dry run: %s would be made, %s already match; nothing was written\n", cmdutil.Plural(len(out.Changes), "change"), cmdutil.Plural(out.Unchanged, "user"))
	case len(out.Changes) == 0:
		p.Printf("nothing to do: %s matches (%s)\n", name, cmdutil.Plural(out.Unchanged, "user"))
	default:
		p.Printf("applied %s; %s already matched\n", cmdutil.Plural(len(out.Changes), "change"), cmdutil.Plural(out.Unchanged, "user"))
	}
}

type applyPlan struct {
	create  []ledger.Resource
	users   map[uint32][]ledger.UserLimit // by ledger: users to add or change
	changes []changeJSON
}

// planApply compares the file with the cluster and returns the changes to
// make, or an error naming the line when the file changes a resource.
func planApply(ctx context.Context, c *ledger.Client, name string, want []fileResource) (applyPlan, int, error) {
	plan := applyPlan{users: map[uint32][]ledger.UserLimit{}}
	all, err := c.Resources(ctx)
	if err != nil {
		return plan, 0, err
	}
	for _, fr := range want {
		exists, err := ledger.CheckNewResource(fr.Resource, all)
		switch {
		case err != nil:
			return plan, 0, yamlpos.AtLine(name, fr.line, "resource %s: %w", fr.Name, err)
		case !exists:
			plan.create = append(plan.create, fr.Resource)
			def := cmdutil.ResourceOut(fr.Resource)
			plan.changes = append(plan.changes, changeJSON{Action: "create_resource", Resource: fr.Name, Definition: &def})
		}
	}
	unchanged := 0
	for _, fr := range want {
		limits := map[ledger.ID]uint64{}
		if !containsLedger(plan.create, fr.Ledger) {
			users, err := c.Users(ctx, fr.Resource)
			if err != nil {
				return plan, 0, err
			}
			for _, u := range users {
				limits[u.ID] = u.Limit
			}
		}
		for _, u := range fr.users {
			limit := fr.DefaultLimit
			if u.limit != nil {
				limit = *u.limit
			}
			old, ok := limits[ledger.UserID(fr.Ledger, u.key)]
			switch {
			case !ok:
				plan.changes = append(plan.changes, changeJSON{Action: "add_user", Resource: fr.Name, User: u.key, Limit: &limit})
			case old != limit:
				plan.changes = append(plan.changes, changeJSON{Action: "set_limit", Resource: fr.Name, User: u.key, Limit: &limit, OldLimit: &old})
			default:
				unchanged++
				continue
			}
			plan.users[fr.Ledger] = append(plan.users[fr.Ledger], ledger.UserLimit{Key: u.key, Limit: limit})
		}
	}
	return plan, unchanged, nil
}

func containsLedger(rs []ledger.Resource, l uint32) bool {
	for _, r := range rs {
		if r.Ledger == l {
			return true
		}
	}
	return false
}

// parseApplyFile reads and checks a whole apply file. Errors name the file
// and line.
func parseApplyFile(name string, in io.Reader) ([]fileResource, error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	at := func(n *yaml.Node, format string, args ...any) error {
		return yamlpos.At(name, n, format, args...)
	}
	var doc, extra yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	err = dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		return nil, at(nil, "empty file: want a resources: list")
	}
	if err == nil {
		if err = dec.Decode(&extra); err == nil {
			return nil, at(&extra, "only one YAML document is read")
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlpos.Syntax(name, data, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, at(root, "want a mapping with a resources: list")
	}
	var list *yaml.Node
	for k, v := range pairs(root) {
		switch {
		case k.Value != "resources":
			return nil, at(k, "unknown field %q (want resources)", k.Value)
		case list != nil:
			return nil, at(k, "resources is given twice")
		}
		list = v
	}
	switch {
	case list == nil:
		return nil, at(root, "want a resources: list")
	case list.Kind != yaml.SequenceNode:
		return nil, at(list, "want a resources: list")
	}
	var out []fileResource
	names, ledgers := map[string]int{}, map[uint32]int{}
	for _, item := range list.Content {
		fr, err := parseFileResource(at, item)
		if err != nil {
			return nil, err
		}
		if prev, dup := names[fr.Name]; dup {
			return nil, at(item, "resource %q is also defined on line %d", fr.Name, prev)
		}
		if prev, dup := ledgers[fr.Ledger]; dup {
			return nil, at(item, "ledger %d is also used on line %d", fr.Ledger, prev)
		}
		names[fr.Name], ledgers[fr.Ledger] = fr.line, fr.line
		out = append(out, fr)
	}
	for _, fr := range out {
		if fr.Kind != ledger.KindMoney {
			continue
		}
		if line, clash := ledgers[fr.Currency]; clash {
			return nil, yamlpos.AtLine(name, fr.line, "currency ledger %d of %s is the limit ledger of the resource on line %d", fr.Currency, fr.Name, line)
		}
	}
	return out, nil
}

// pairs iterates over the keys and values of a mapping node.
func pairs(m *yaml.Node) func(func(k, v *yaml.Node) bool) {
	return func(yield func(k, v *yaml.Node) bool) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if !yield(m.Content[i], m.Content[i+1]) {
				return
			}
		}
	}
}

type atFunc func(n *yaml.Node, format string, args ...any) error

func parseFileResource(at atFunc, n *yaml.Node) (fileResource, error) {
	fr := fileResource{line: n.Line}
	if n.Kind != yaml.MappingNode {
		return fr, at(n, "want a resource: a mapping with name, kind, ledger, window, default_limit")
	}
	seen := map[string]bool{}
	var err error
	scalar := func(k, v *yaml.Node) (string, error) {
		if v.Kind != yaml.ScalarNode {
			return "", at(v, "%s: want a single value", k.Value)
		}
		return v.Value, nil
	}
	for k, v := range pairs(n) {
		if seen[k.Value] {
			return fr, at(k, "%s is given twice", k.Value)
		}
		seen[k.Value] = true
		if k.Value == "users" {
			if fr.users, err = parseFileUsers(at, v); err != nil {
				return fr, err
			}
			continue
		}
		s, err := scalar(k, v)
		if err != nil {
			return fr, err
		}
		switch k.Value {
		case "name":
			fr.Name = s
		case "kind":
			if fr.Kind, err = ledger.ParseKind(s); err != nil {
				return fr, at(v, "kind %q: want requests, bytes or money", s)
			}
		case "ledger":
			if fr.Ledger, err = cmdutil.ParseLedger(s); err != nil {
				return fr, at(v, "ledger %v", err)
			}
		case "currency":
			if fr.Currency, err = cmdutil.ParseLedger(s); err != nil {
				return fr, at(v, "currency %v", err)
			}
		case "window":
			if fr.Window, err = cmdutil.ParseWindow(s); err != nil {
				return fr, at(v, "window %v", err)
			}
		case "default_limit":
			if fr.DefaultLimit, err = cmdutil.ParseLimit(s); err != nil {
				return fr, at(v, "default_limit %v", err)
			}
		case "lazy":
			switch strings.ToLower(s) {
			case "true", "yes":
				fr.Lazy = true
			case "false", "no":
			default:
				return fr, at(v, "lazy %q: want true or false", s)
			}
		default:
			return fr, at(k, "unknown field %q (want name, kind, ledger, window, default_limit, lazy, currency, users)", k.Value)
		}
	}
	for _, req := range []string{"name", "kind", "ledger", "window", "default_limit"} {
		if !seen[req] {
			return fr, at(n, "resource %q: %s is missing", fr.Name, req)
		}
	}
	if err := fr.Validate(); err != nil {
		return fr, at(n, "%w", err)
	}
	keys := map[string]int{}
	for _, u := range fr.users {
		if prev, dup := keys[u.key]; dup {
			return fr, at(&yaml.Node{Line: u.line}, "resource %s: user %q is also on line %d", fr.Name, u.key, prev)
		}
		keys[u.key] = u.line
	}
	return fr, nil
}

func parseFileUsers(at atFunc, n *yaml.Node) ([]fileUser, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, at(n, "users: want a list of {key, limit}")
	}
	out := make([]fileUser, 0, len(n.Content))
	for _, item := range n.Content {
		u := fileUser{line: item.Line}
		if item.Kind != yaml.MappingNode {
			return nil, at(item, "want a user: {key: KEY, limit: N} (limit optional)")
		}
		hasKey := false
		for k, v := range pairs(item) {
			if v.Kind != yaml.ScalarNode {
				return nil, at(v, "%s: want a single value", k.Value)
			}
			switch k.Value {
			case "key":
				key, err := ledger.NormalizeKey(v.Value)
				if err != nil {
					return nil, at(v, "%w", err)
				}
				u.key, hasKey = key, true
			case "limit":
				n, err := cmdutil.ParseLimit(v.Value)
				if err != nil {
					return nil, at(v, "limit %v", err)
				}
				u.limit = &n
			default:
				return nil, at(k, "unknown field %q (want key, limit)", k.Value)
			}
		}
		if !hasKey {
			return nil, at(item, "user without a key")
		}
		out = append(out, u)
	}
	return out, nil
}

// applyJSON is the answer to apply.
type applyJSON struct {
	DryRun    bool         `json:"dry_run"` // true: nothing was written
	Changes   []changeJSON `json:"changes"`
	Unchanged int          `json:"unchanged"` // users that already matched the file
}

type changeJSON struct {
	Action     string                `json:"action"` // create_resource, add_user or set_limit
	Resource   string                `json:"resource"`
	User       string                `json:"user,omitempty"`
	Limit      *uint64               `json:"limit,omitempty"`      // add_user, set_limit: the new limit
	OldLimit   *uint64               `json:"old_limit,omitempty"`  // set_limit
	Definition *cmdutil.ResourceJSON `json:"definition,omitempty"` // create_resource
}
