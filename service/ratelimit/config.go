package ratelimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tblimit/tblimit/internal/yamlpos"
)

// ErrConfig means a configuration file was refused. The error names the
// file and line of the problem.
var ErrConfig = errors.New("ratelimit: invalid configuration")

// TimeUnit is the unit of time of a rate limit, as envoyproxy/ratelimit's
// configuration names it. A limit of N per unit admits at most N hits in
// any interval of one unit (a sliding window, not a fixed one).
type TimeUnit uint8

// The units, with the values of Envoy's RateLimitResponse.RateLimit.Unit.
const (
	Second TimeUnit = 1
	Minute TimeUnit = 2
	Hour   TimeUnit = 3
	Day    TimeUnit = 4
	Month  TimeUnit = 5
	Year   TimeUnit = 6
	Week   TimeUnit = 7
)

var units = map[string]TimeUnit{"second": Second, "minute": Minute, "hour": Hour, "day": Day, "week": Week, "month": Month, "year": Year}

// String returns the unit's name in the configuration: "second", "minute"...
func (u TimeUnit) String() string {
	for name, v := range units {
		if v == u {
			return name
		}
	}
	return "TimeUnit(" + strconv.Itoa(int(u)) + ")"
}

// Window is the unit's length: a month is 30 days and a year 365, since
// a sliding window has no calendar.
func (u TimeUnit) Window() time.Duration {
	const day = 24 * time.Hour
	switch u {
	case Second:
		return time.Second
	case Minute:
		return time.Minute
	case Hour:
		return time.Hour
	case Day:
		return day
	case Week:
		return 7 * day
	case Month:
		return 30 * day
	case Year:
		return 365 * day
	}
	return 0
}

// Rule is one rate limit of a configuration: the rate_limit block of a
// descriptor, with where it was defined.
type Rule struct {
	// Domain is the configuration's domain.
	Domain string
	// Key is envoyproxy/ratelimit's name of the rule: the domain and each
	// level's key, with "_value" where the level names a value, joined by
	// dots ("messaging.message_type_marketing.to_number"). Metrics use it.
	Key string
	// Unit and RequestsPerUnit are the limit; Unlimited rules hold nothing.
	Unit            TimeUnit
	RequestsPerUnit uint32
	Unlimited       bool
	// Name and Replaces: a rule that applies to a request drops the rules
	// of the same request named in its Replaces.
	Name     string
	Replaces []string
	// ShadowMode rules decide and record, but always answer OK.
	ShadowMode bool
	// ChargeAfter rules take hits that are costs already incurred (an LLM
	// call's tokens, sent once its response ended): recorded even past the
	// limit, taking what remains when less, so that the checks that follow
	// (hits_addend 0) answer OVER_LIMIT until units return. A descriptor
	// whose hits_addend is 0 is the check before the call.
	ChargeAfter bool
	// ReserveKey and SettleKey pair a call's check with its charge: a
	// descriptor with an entry ReserveKey is the check, which holds its hits
	// (the most the call may cost) under the entry's value, the request's ID;
	// one with an entry SettleKey is the charge, which settles the hold made
	// under its value to its hits (kept for the rest of the window, the rest
	// given back; more than was held is charged as ChargeAfter does). A
	// charge whose check is unknown is a ChargeAfter charge. Either both are
	// set or neither; the entries are not matched against the rule's
	// levels.
	ReserveKey, SettleKey string
	// DetailedMetric and ValueToMetric put request values in metric names.
	DetailedMetric bool
	// File and Line say where the rule was defined.
	File string
	Line int

	// spec identifies the rule's limit across reloads: the domain, each
	// level's key and value pattern, and the unit (not the limit, which a
	// reload may change).
	spec string
	// shared marks the levels whose wildcard value is shared by every
	// value it matches (share_threshold), by depth.
	shared []bool
}

// level is one level of descriptors under a domain.
type level struct {
	exact    map[string]*entry // by "key_value", or "key" for a rule without a value
	wildcard []*entry          // entries whose value has a '*', in file order
}

// entry is one descriptor of the configuration.
type entry struct {
	key, value    string
	parts         []string // value split on '*', for a wildcard value
	rule          *Rule
	children      *level
	valueToMetric bool
	detailed      bool
	share         bool
}

// Config is a loaded configuration: the domains of one or more files, in
// envoyproxy/ratelimit's format. It is immutable.
type Config struct {
	domains map[string]*level
	idKeys  map[string]map[string]bool // by domain: the entry keys that name requests (ReserveKey, SettleKey)
	rules   []*Rule
	files   []string
	digest  [32]byte // of the files' names and contents (see digestOf)
}

// Rules returns every rule of c, in the order of its files and lines.
func (c *Config) Rules() []*Rule { return slices.Clone(c.rules) }

// Domains returns the domains of c, sorted.
func (c *Config) Domains() []string {
	ds := make([]string, 0, len(c.domains))
	for d := range c.domains {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds
}

// Files returns the files c was loaded from.
func (c *Config) Files() []string { return slices.Clone(c.files) }

// LoadConfig loads path: a YAML file, or a directory whose *.yaml and
// *.yml files (not in subdirectories, hidden ones left out) are loaded
// in name order. A file envoyproxy/ratelimit accepts is accepted, or
// refused naming the field tblimit does not support; every problem is an
// error wrapping ErrConfig that names file:line.
func LoadConfig(path string) (*Config, error) {
	files, srcs, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(files, srcs)
}

// configFiles lists the files path names.
func configFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var files []string
	for _, e := range ents {
		name := e.Name()
		ext := filepath.Ext(name)
		if e.Type()&fs.ModeType&^fs.ModeSymlink != 0 || strings.HasPrefix(name, ".") || ext != ".yaml" && ext != ".yml" {
			continue
		}
		files = append(files, filepath.Join(path, name))
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: %s: no *.yaml or *.yml file", ErrConfig, path)
	}
	return files, nil
}

// ParseConfig parses the files named in order, whose contents srcs holds.
func ParseConfig(files []string, srcs map[string][]byte) (*Config, error) {
	c := &Config{domains: map[string]*level{}, idKeys: map[string]map[string]bool{}, files: slices.Clone(files), digest: digestOf(files, srcs)}
	for _, f := range files {
		if err := c.parseFile(f, srcs[f]); err != nil {
			return nil, err
		}
	}
	// The entries that name requests are taken out of every descriptor of
	// their domain before matching: no rule of it may match on their keys.
	for _, r := range c.rules {
		for k := range c.idKeys[r.Domain] {
			if strings.Contains(r.spec, "\x00"+k+"\x01") {
				return nil, fmt.Errorf("%w: %w", ErrConfig, yamlpos.AtLine(r.File, r.Line,
					"this rule's descriptors use key %q, which names a request in domain %q (reserve_key or settle_key)", k, r.Domain))
			}
		}
	}
	return c, nil
}

// at is the error of a problem at node n of file (nil: the whole file).
func at(file string, n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrConfig, yamlpos.At(file, n, format, args...))
}

func (c *Config) parseFile(file string, src []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, yamlpos.Syntax(file, src, err))
	}
	if yamlpos.Empty(&doc) {
		return at(file, nil, "config file cannot have empty domain")
	}
	budget := maxAliasNodes
	root, err := expand(file, doc.Content[0], map[*yaml.Node]bool{}, &budget)
	if err != nil {
		return err
	}
	fields, err := mapping(file, root, map[string]bool{"domain": true, "descriptors": true})
	if err != nil {
		return err
	}
	domainNode := fields["domain"]
	domain, err := scalarString(file, domainNode)
	if err != nil {
		return err
	}
	if domain == "" {
		return at(file, cmpNode(domainNode, root), "config file cannot have empty domain")
	}
	if _, dup := c.domains[domain]; dup {
		return at(file, domainNode, "duplicate domain %q in config files", domain)
	}
	lv := &level{exact: map[string]*entry{}}
	p := parser{c: c, file: file, domain: domain}
	if err := p.descriptors(lv, fields["descriptors"], domain, nil, domain); err != nil {
		return err
	}
	c.domains[domain] = lv
	return nil
}

// maxAliasNodes bounds the nodes aliases may add to a file: a few kilobytes
// of aliases of aliases would otherwise make millions of rules.
const maxAliasNodes = 100_000

// expand returns n with its aliases replaced by copies of what they name
// and merge keys (<<) merged, as a YAML decoder sees it: an alias inside
// its own anchor, or aliases that add more than maxAliasNodes nodes, are
// refused. active holds the anchors being expanded; budget what aliases
// may still add.
func expand(file string, n *yaml.Node, active map[*yaml.Node]bool, budget *int) (*yaml.Node, error) {
	if n.Kind == yaml.AliasNode {
		target := n.Alias
		if active[target] {
			return nil, at(file, n, "alias %q is inside its own anchor", n.Value)
		}
		active[target] = true
		defer delete(active, target)
		out, err := expand(file, target, active, budget)
		if err == nil && *budget < 0 {
			return nil, at(file, n, "excessive aliasing: aliases add more than %d nodes", maxAliasNodes)
		}
		return out, err
	}
	if len(active) > 0 {
		*budget--
	}
	cp := *n
	cp.Content = nil
	for i := 0; i < len(n.Content); i++ {
		c := n.Content[i]
		if n.Kind == yaml.MappingNode && i%2 == 0 && c.Kind == yaml.ScalarNode && c.Value == "<<" && c.Tag == "!!merge" && i+1 < len(n.Content) {
			i++
			continue // merged below, after the mapping's own keys
		}
		e, err := expand(file, c, active, budget)
		if err != nil {
			return nil, err
		}
		cp.Content = append(cp.Content, e)
	}
	if n.Kind == yaml.MappingNode {
		if err := merge(file, n, &cp, active, budget); err != nil {
			return nil, err
		}
	}
	return &cp, nil
}

// merge adds to the expanded mapping cp the keys of the mappings that n's
// merge keys name, where cp lacks them (a mapping's own keys win).
func merge(file string, n, cp *yaml.Node, active map[*yaml.Node]bool, budget *int) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Value != "<<" || k.Tag != "!!merge" {
			continue
		}
		src, err := expand(file, n.Content[i+1], active, budget)
		if err != nil {
			return err
		}
		sources := []*yaml.Node{src}
		if src.Kind == yaml.SequenceNode {
			sources = src.Content
		}
		for _, m := range sources {
			if m.Kind != yaml.MappingNode {
				return at(file, m, "a merge key (<<) takes a mapping, found %s", kindName(m))
			}
			for j := 0; j+1 < len(m.Content); j += 2 {
				if !hasKey(cp, m.Content[j].Value) {
					cp.Content = append(cp.Content, m.Content[j], m.Content[j+1])
				}
			}
		}
	}
	return nil
}

func hasKey(m *yaml.Node, key string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return true
		}
	}
	return false
}

// Every key envoyproxy/ratelimit knows, by where it means something; a key
// it knows that tblimit does not support is refused by name.
var (
	rootKeys       = map[string]bool{"domain": true, "descriptors": true}
	descriptorKeys = map[string]bool{"key": true, "value": true, "rate_limit": true, "descriptors": true,
		"shadow_mode": true, "detailed_metric": true, "value_to_metric": true, "share_threshold": true}
	rateLimitKeys = map[string]bool{"unit": true, "requests_per_unit": true, "unlimited": true, "name": true, "replaces": true,
		"charge_after": true, "reserve_key": true, "settle_key": true}
	replacesKeys = map[string]bool{"name": true}
	unsupported  = map[string]string{
		"quota_mode": "quota_mode is not supported by tblimit serve (every rule enforces, or is in shadow_mode)",
		"metadata":   "metadata is not supported by tblimit serve",
	}
	allKeys = func() map[string]bool {
		m := map[string]bool{}
		for _, set := range []map[string]bool{rootKeys, descriptorKeys, rateLimitKeys, replacesKeys} {
			for k := range set {
				m[k] = true
			}
		}
		return m
	}()
)

// mapping checks that n is a mapping of known keys and returns its values
// by key. Like envoyproxy/ratelimit, a key it knows is accepted at any
// level (and ignored where it means nothing); own lists the keys that mean
// something at this one.
func mapping(file string, n *yaml.Node, own map[string]bool) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, at(file, n, "want a mapping of keys, found %s", kindName(n))
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, at(file, k, "a key is not a string")
		}
		if msg, ok := unsupported[k.Value]; ok {
			return nil, at(file, k, "%s", msg)
		}
		if !allKeys[k.Value] {
			return nil, at(file, k, "unknown key %q", k.Value)
		}
		if _, dup := out[k.Value]; dup {
			return nil, at(file, k, "key %q appears twice", k.Value)
		}
		if own[k.Value] {
			out[k.Value] = v
		} else if err := known(file, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// known checks the keys of a value placed where it means nothing: they
// must still be keys envoyproxy/ratelimit knows.
func known(file string, n *yaml.Node) error {
	switch n.Kind {
	case yaml.MappingNode:
		_, err := mapping(file, n, nil)
		return err
	case yaml.SequenceNode:
		for _, e := range n.Content {
			if e.Kind != yaml.MappingNode {
				return at(file, e, "a list holds %s, not a mapping", kindName(e))
			}
			if err := known(file, e); err != nil {
				return err
			}
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "nothing"
}

// scalarString reads a string; a missing node is "".
func scalarString(file string, n *yaml.Node) (string, error) {
	if n == nil || n.Tag == "!!null" {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", at(file, n, "want a string, found %s", kindName(n))
	}
	return n.Value, nil
}

// scalarBool reads a boolean; a missing node is false.
func scalarBool(file string, n *yaml.Node) (bool, error) {
	if n == nil || n.Tag == "!!null" {
		return false, nil
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		return false, at(file, n, "want true or false, found %s", kindName(n))
	}
	return b, nil
}

// sequence returns the items of a list; a missing node is empty.
func sequence(file string, n *yaml.Node) ([]*yaml.Node, error) {
	if n == nil || n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, at(file, n, "want a list, found %s", kindName(n))
	}
	return n.Content, nil
}

// parser reads the descriptors of one file.
type parser struct {
	c      *Config
	file   string
	domain string
}

// descriptors reads the list n into lv; prefix is envoyproxy/ratelimit's
// key of the enclosing level, spec the rule spec of it, and shared which
// of its levels share their wildcard.
func (p *parser) descriptors(lv *level, n *yaml.Node, prefix string, shared []bool, spec string) error {
	items, err := sequence(p.file, n)
	if err != nil {
		return err
	}
	for _, item := range items {
		if err := p.descriptor(lv, item, prefix, shared, spec); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) descriptor(lv *level, n *yaml.Node, prefix string, shared []bool, spec string) error {
	f, err := mapping(p.file, n, descriptorKeys)
	if err != nil {
		return err
	}
	e := &entry{}
	if e.key, err = scalarString(p.file, f["key"]); err != nil {
		return err
	}
	if e.value, err = scalarString(p.file, f["value"]); err != nil {
		return err
	}
	if e.key == "" {
		return at(p.file, n, "descriptor has empty key")
	}
	var shadow bool
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"shadow_mode", &shadow}, {"detailed_metric", &e.detailed}, {"value_to_metric", &e.valueToMetric}, {"share_threshold", &e.share}} {
		if *b.dst, err = scalarBool(p.file, f[b.name]); err != nil {
			return err
		}
	}
	final := e.key
	if e.value != "" {
		final += "_" + e.value
	}
	if _, dup := lv.exact[final]; dup || slices.ContainsFunc(lv.wildcard, func(w *entry) bool { return w.key == e.key && w.value == e.value }) {
		return at(p.file, n, "duplicate descriptor composite key '%s.%s'", prefix, final)
	}
	if e.share && !strings.Contains(e.value, "*") {
		return at(p.file, f["share_threshold"], "share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", final)
	}
	key := prefix + "." + final
	levelSpec := "\x00" + e.key + "\x01"
	switch {
	case strings.Contains(e.value, "*"):
		e.parts = strings.Split(e.value, "*")
		levelSpec += "glob:" + e.value
		lv.wildcard = append(lv.wildcard, e)
	case e.value != "":
		levelSpec += "value:" + e.value
		lv.exact[final] = e
	default:
		levelSpec += "any"
		lv.exact[final] = e
	}
	spec += levelSpec
	shared = append(slices.Clone(shared), e.share)
	if rl := f["rate_limit"]; rl != nil && rl.Tag != "!!null" {
		if e.rule, err = p.rateLimit(rl, key, spec, shared, shadow, e.detailed); err != nil {
			return err
		}
	}
	if children := f["descriptors"]; children != nil {
		e.children = &level{exact: map[string]*entry{}}
		if err := p.descriptors(e.children, children, key, shared, spec); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) rateLimit(n *yaml.Node, key, spec string, shared []bool, shadow, detailed bool) (*Rule, error) {
	f, err := mapping(p.file, n, rateLimitKeys)
	if err != nil {
		return nil, err
	}
	r := &Rule{Domain: p.domain, Key: key, ShadowMode: shadow, DetailedMetric: detailed, File: p.file, Line: n.Line, shared: shared}
	if r.Unlimited, err = scalarBool(p.file, f["unlimited"]); err != nil {
		return nil, err
	}
	unit, err := scalarString(p.file, f["unit"])
	if err != nil {
		return nil, err
	}
	u, valid := units[strings.ToLower(unit)]
	switch {
	case r.Unlimited && valid:
		return nil, at(p.file, f["unit"], "should not specify rate limit unit when unlimited")
	case !r.Unlimited && !valid:
		return nil, at(p.file, cmpNode(f["unit"], n), "invalid rate limit unit '%s' (want second, minute, hour, day, week, month or year)", unit)
	}
	r.Unit = u
	if rpu := f["requests_per_unit"]; rpu != nil && rpu.Tag != "!!null" {
		v, ok := yamlUint32(rpu)
		if !ok {
			return nil, at(p.file, rpu, "requests_per_unit: want a whole number from 0 to %d, found %s", uint32(1<<32-1), kindName(rpu))
		}
		r.RequestsPerUnit = v
	}
	if r.Name, err = scalarString(p.file, f["name"]); err != nil {
		return nil, err
	}
	reps, err := sequence(p.file, f["replaces"])
	if err != nil {
		return nil, err
	}
	for _, rep := range reps {
		rf, err := mapping(p.file, rep, replacesKeys)
		if err != nil {
			return nil, err
		}
		name, err := scalarString(p.file, rf["name"])
		if err != nil {
			return nil, err
		}
		switch name {
		case "":
			return nil, at(p.file, rep, "should not have an empty replaces entry")
		case r.Name:
			return nil, at(p.file, rep, "replaces should not contain name of same descriptor")
		}
		r.Replaces = append(r.Replaces, name)
	}
	if err := p.costAfter(r, n, f, spec); err != nil {
		return nil, err
	}
	r.spec = spec + "\x00" + r.Unit.String()
	p.c.rules = append(p.c.rules, r)
	return r, nil
}

// costAfter reads the keys of a rule whose costs are known after the call
// (charge_after, reserve_key and settle_key) from f, the fields of its
// rate_limit block n, and refuses those it cannot take; spec is the rule's
// levels.
func (p *parser) costAfter(r *Rule, n *yaml.Node, f map[string]*yaml.Node, spec string) error {
	var err error
	if r.ChargeAfter, err = scalarBool(p.file, f["charge_after"]); err != nil {
		return err
	}
	if r.ReserveKey, err = scalarString(p.file, f["reserve_key"]); err != nil {
		return err
	}
	if r.SettleKey, err = scalarString(p.file, f["settle_key"]); err != nil {
		return err
	}
	paired := r.ReserveKey != "" || r.SettleKey != ""
	switch {
	case r.Unlimited && r.ChargeAfter:
		return at(p.file, f["charge_after"], "charge_after needs a limit: an unlimited rule records no hits")
	case r.Unlimited && paired:
		return at(p.file, cmpNode(f["reserve_key"], f["settle_key"]), "reserve_key and settle_key need a limit: an unlimited rule holds nothing")
	case !paired:
		return nil
	case r.ReserveKey == "" || r.SettleKey == "":
		return at(p.file, cmpNode(f["reserve_key"], f["settle_key"]), "reserve_key and settle_key go together: the check holds under one, the charge settles under the other")
	case r.ReserveKey == r.SettleKey:
		return at(p.file, f["settle_key"], "settle_key %q is reserve_key too: the check and the charge need entries of their own", r.SettleKey)
	}
	for _, k := range []string{r.ReserveKey, r.SettleKey} {
		if strings.Contains(spec, "\x00"+k+"\x01") {
			return at(p.file, n, "%q is a key of this rule's own descriptors: a request's ID needs an entry of its own", k)
		}
	}
	ids := p.c.idKeys[p.domain]
	if ids == nil {
		ids = map[string]bool{}
		p.c.idKeys[p.domain] = ids
	}
	ids[r.ReserveKey], ids[r.SettleKey] = true, true
	return nil
}

// yamlUint32 reads a plain (unquoted) integer as envoyproxy/ratelimit's
// YAML decoder reads one into a uint32: decimal, 0x hexadecimal, 0o or a
// leading 0 octal, 0b binary, with an optional + and _ separators.
func yamlUint32(n *yaml.Node) (uint32, bool) {
	if n.Kind != yaml.ScalarNode || n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 || n.Tag == "!!str" {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(n.Value, "+"), 0, 32)
	return uint32(v), err == nil
}

// cmpNode is n, or else the enclosing node.
func cmpNode(n, enclosing *yaml.Node) *yaml.Node {
	if n != nil {
		return n
	}
	return enclosing
}
