package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
)

// dashboard is the Grafana dashboard of the service's metrics.
const dashboard = "../../../deploy/grafana/tblimit-serve.json"

// The dashboard queries only metrics the service exports: every metric
// each panel's PromQL names is on GET /metrics once the service has
// answered OK, OVER_LIMIT (enforced and in shadow mode) and an error, and
// refused a configuration.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	src, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rl.yaml")
	const yaml = `domain: api
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: path
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
`
	cmdtest.WriteFile(t, path, yaml)
	var log cmdtest.LockedBuffer
	s := serveFor(t, path, &log, nil)
	ask := func(key, value string, want int) {
		t.Helper()
		req := fmt.Sprintf(`{"domain": "api", "descriptors": [{"entries": [{"key": %q, "value": %q}]}]}`, key, value)
		if got := s.post(req); got != want {
			t.Fatalf("POST /json %s = %d, want %d", req, got, want)
		}
	}
	for range 5 { // within the limit, then near it
		ask("user", "alice", http.StatusOK)
	}
	ask("user", "alice", http.StatusTooManyRequests)
	ask("path", "/", http.StatusOK)
	ask("path", "/", http.StatusOK) // over the limit, in shadow mode
	if got := s.post(`{"domain": ""}`); got != http.StatusBadRequest {
		t.Fatalf("POST /json without a domain = %d, want 400", got)
	}
	cmdtest.WriteFile(t, path, strings.Replace(yaml, "5", "five", 1))
	s.reload <- struct{}{}
	waitFor(t, func() bool { return strings.Contains(log.String(), "configuration refused") }, &log)

	var d grafanaDashboard
	if err := json.Unmarshal(src, &d); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			names = append(names, promqlMetrics(tg.Expr)...)
		}
	}
	slices.Sort(names)
	if names = slices.Compact(names); len(names) < 10 {
		t.Fatalf("the dashboard's queries name %q: is promqlMetrics broken?", names)
	}
	t.Logf("the dashboard queries %q", names)

	metrics := s.get("/metrics")
	problems := dashboardProblems(src, metrics)
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Logf("GET /metrics:\n%s", metrics)
	}
}

// TestDashboardProblemsFindsUnknownMetrics makes sure the check can fail.
func TestDashboardProblemsFindsUnknownMetrics(t *testing.T) {
	const exposition = `# HELP calls_total Calls.
# TYPE calls_total counter
calls_total{code="OK"} 3
# TYPE call_seconds histogram
call_seconds_bucket{le="+Inf"} 3
# TYPE gc_seconds summary
gc_seconds_count 1
# TYPE up gauge
up 1
`
	panel := func(title string, exprs ...string) string {
		var ts []string
		for _, e := range exprs {
			b, _ := json.Marshal(e)
			ts = append(ts, `{"refId": "A", "datasource": {"type": "prometheus", "uid": "${datasource}"}, "expr": `+string(b)+`}`)
		}
		return `{"title": "` + title + `", "type": "timeseries", "datasource": {"type": "prometheus", "uid": "${datasource}"}, "targets": [` + strings.Join(ts, ",") + `]}`
	}
	const vars = `"templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"},
		{"name": "instance", "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"}, "query": {"query": "label_values(up, instance)"}}]}`
	good := `{` + vars + `, "panels": [{"title": "A row", "type": "row"},` + panel("Good",
		`sum by (code) (rate(calls_total{code=~"OK|OVER_LIMIT",instance=~"$instance"}[$__rate_interval]))`,
		`histogram_quantile(0.99, sum by (le) (rate(call_seconds_bucket{name="x{y}"}[5m]))) / on(instance) group_left sum(rate(call_seconds_sum[1m])) or vector(0)`,
		`topk(10, up) > 0.5 and ignoring (job) gc_seconds_count offset 1h`,
		`sum(rate(call_seconds_count[1m])) without (instance)`) + `]}`
	if got := dashboardProblems([]byte(good), exposition); len(got) > 0 {
		t.Errorf("a good dashboard: %q, want no problems", got)
	}

	bad := `{"templating": {"list": [{"name": "instance", "type": "query", "query": "label_values(upp, instance)"}]}, "panels": [` +
		panel("Typo", `sum(rate(cals_total[1m]))`, `rate(call_seconds_bucket[1m]) / rate(calls_total_count[1m])`) + `,` +
		panel("Summary", `gc_seconds_bucket`) + `,` +
		panel("", `up`) + `,` +
		panel("Empty") + `,` +
		`{"title": "Elsewhere", "type": "stat", "datasource": {"type": "prometheus", "uid": "prom1"}, "targets": [{"expr": "up"}]}]}`
	want := []string{
		`variable "instance": label_values(upp, instance): upp is not on GET /metrics`,
		`templating: no datasource variable of type datasource for prometheus`,
		`panel "Typo": sum(rate(cals_total[1m])): cals_total is not on GET /metrics`,
		`panel "Typo": rate(call_seconds_bucket[1m]) / rate(calls_total_count[1m]): calls_total_count is not on GET /metrics`,
		`panel "Summary": gc_seconds_bucket: gc_seconds_bucket is not on GET /metrics`,
		`panel 3: no title`,
		`panel "Empty": no targets`,
		`panel "Elsewhere": datasource uid "prom1", want "${datasource}"`,
	}
	got := dashboardProblems([]byte(bad), exposition)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("a bad dashboard:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := dashboardProblems([]byte(`{"title": "no panels"}`), exposition); !slices.Contains(got, "no panels") {
		t.Errorf("a dashboard without panels: %q, want %q", got, "no panels")
	}
}

// grafanaDashboard is what dashboardProblems reads of a Grafana dashboard's
// JSON model.
type grafanaDashboard struct {
	Templating struct {
		List []struct {
			Name, Type string
			Query      json.RawMessage // a string, or {"query": "..."}
			Datasource *grafanaDatasource
		}
	}
	Panels []struct {
		Title, Type string
		Datasource  *grafanaDatasource
		Targets     []struct {
			Expr       string
			Datasource *grafanaDatasource
		}
	}
}

type grafanaDatasource struct{ Type, UID string }

// datasourceVar is the data source every panel and target asks: the
// dashboard's variable, so that an operator picks theirs on import.
const datasourceVar = "${datasource}"

// dashboardProblems returns what is wrong with the Grafana dashboard src
// for a service whose GET /metrics answered exposition: not a dashboard
// (no panels, a panel without a title or, but for rows, without targets),
// a query on another data source than ${datasource}, or a query naming a
// metric exposition has not.
func dashboardProblems(src []byte, exposition string) []string {
	var d grafanaDashboard
	if err := json.Unmarshal(src, &d); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	exported := exportedNames(exposition)
	var problems []string
	// unknown reports the metrics expr names that are not exported, in
	// what where says.
	unknown := func(where, expr string) {
		for _, name := range promqlMetrics(expr) {
			if !exported[name] {
				problems = append(problems, fmt.Sprintf("%s: %s is not on GET /metrics", where, name))
			}
		}
	}
	hasDatasource := false
	for _, v := range d.Templating.List {
		var q struct{ Query string }
		if json.Unmarshal(v.Query, &q.Query) != nil {
			json.Unmarshal(v.Query, &q)
		}
		switch {
		case v.Type == "datasource" && q.Query == "prometheus" && "${"+v.Name+"}" == datasourceVar:
			hasDatasource = true
		case v.Type == "query":
			unknown(fmt.Sprintf("variable %q: %s", v.Name, q.Query), variableSelector(q.Query))
		}
	}
	if !hasDatasource {
		problems = append(problems, "templating: no datasource variable of type datasource for prometheus")
	}
	if len(d.Panels) == 0 {
		problems = append(problems, "no panels")
	}
	for i, p := range d.Panels {
		where := fmt.Sprintf("panel %q", p.Title)
		switch {
		case p.Title == "":
			where = fmt.Sprintf("panel %d", i+1)
			problems = append(problems, where+": no title")
		case p.Type == "row":
			continue
		case len(p.Targets) == 0:
			problems = append(problems, where+": no targets")
		}
		if p.Datasource != nil && p.Datasource.UID != datasourceVar {
			problems = append(problems, fmt.Sprintf("%s: datasource uid %q, want %q", where, p.Datasource.UID, datasourceVar))
		}
		for _, tg := range p.Targets {
			if tg.Datasource != nil && tg.Datasource.UID != datasourceVar {
				problems = append(problems, fmt.Sprintf("%s: target datasource uid %q, want %q", where, tg.Datasource.UID, datasourceVar))
			}
			if tg.Expr == "" {
				problems = append(problems, where+": a target without expr")
			}
			unknown(where+": "+tg.Expr, tg.Expr)
		}
	}
	return problems
}

// labelValues and queryResult are the variable queries of Grafana's
// Prometheus data source that name metrics: label_values(SELECTOR, LABEL)
// and query_result(EXPR).
var (
	labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
	queryResult = regexp.MustCompile(`^\s*query_result\((.*)\)\s*$`)
)

// variableSelector returns the PromQL of a query variable's query, or ""
// for one that names no metric (label_values(LABEL), label_names()).
func variableSelector(q string) string {
	if m := labelValues.FindStringSubmatch(q); m != nil {
		return m[1]
	}
	if m := queryResult.FindStringSubmatch(q); m != nil {
		return m[1]
	}
	return ""
}

// exportedNames returns the names a Prometheus query may give of the
// families of a text exposition: each family's, and a histogram's _bucket,
// _sum and _count series (a summary's _sum and _count).
func exportedNames(exposition string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.Lines(exposition) {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		switch f[3] {
		case "histogram":
			names[f[2]+"_bucket"] = true
			fallthrough
		case "summary":
			names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
		}
	}
	return names
}

var (
	// What a query says besides metric names: strings (label values,
	// Grafana's $variables in them), label matchers, ranges and
	// subqueries, the label lists of by, without, on, ignoring and
	// group_left/right, and Grafana's $variables elsewhere.
	promqlStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlLabels   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	grafanaVars    = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	// promqlToken is a name (a metric's, a function's or a keyword) or a
	// number, which is skipped whole so that 1e3 names nothing.
	promqlToken = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*|[0-9.]+(?:[eE][+-]?[0-9]+)?[a-zA-Z]*`)
	// promqlKeywords are the names a query may hold that are neither
	// metrics nor followed by "(".
	promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "group_left", "group_right", "inf", "nan", "atan2"}
)

// promqlMetrics returns the metric names expr (PromQL, with Grafana's
// variables) selects series of: every name that is not a function (it is
// followed by "("), a keyword, a label (in matchers and by/without/on
// lists) or in a string.
func promqlMetrics(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, `""`)
	e = grafanaVars.ReplaceAllString(e, " ")
	e = promqlMatchers.ReplaceAllString(e, " ")
	e = promqlLabels.ReplaceAllString(e, " ")
	var names []string
	for _, loc := range promqlToken.FindAllStringIndex(e, -1) {
		tok := e[loc[0]:loc[1]]
		switch {
		case tok[0] >= '0' && tok[0] <= '9' || tok[0] == '.':
		case strings.HasPrefix(strings.TrimLeft(e[loc[1]:], " \t\n"), "("):
		case slices.Contains(promqlKeywords, strings.ToLower(tok)):
		case !slices.Contains(names, tok):
			names = append(names, tok)
		}
	}
	return names
}
