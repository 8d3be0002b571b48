package resources

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/ledger"
)

func TestResourcesParsing(t *testing.T) {
	create := func(args ...string) []string {
		return append([]string{"x", "--kind", "requests", "--ledger", "9", "--window", "1m", "--limit", "10"}, args...)
	}
	cmdtest.CheckParse(t, newCmdResourcesCreate, []cmdtest.ParseCase[resourcesCreateOptions]{
		{Args: create(), Want: resourcesCreateOptions{Resource: ledger.Resource{Name: "x", Kind: ledger.KindRequests, Ledger: 9, Window: time.Minute, DefaultLimit: 10}}},
		{Args: create("--lazy"), Want: resourcesCreateOptions{Resource: ledger.Resource{Name: "x", Kind: ledger.KindRequests, Ledger: 9, Window: time.Minute, DefaultLimit: 10, Lazy: true}}},
		{
			Args: []string{"usd", "--kind", "money", "--ledger", "3", "--currency", "840", "--window", "1d", "--limit", "1000"},
			Want: resourcesCreateOptions{Resource: ledger.Resource{Name: "usd", Kind: ledger.KindMoney, Ledger: 3, Currency: 840, Window: 24 * time.Hour, DefaultLimit: 1000}},
		},
		{Args: []string{"x", "--kind", "requests", "--ledger", "9", "--window", "1s"}, Err: "--limit is required"},
		{Args: []string{"x", "--kind", "money", "--ledger", "9", "--window", "1s", "--limit", "1"}, Err: "--currency is required"},
		{Args: create("--currency", "840"), Err: "--currency: only a money resource"},
		{Args: []string{"x", "--kind", "coins", "--ledger", "9", "--window", "1s", "--limit", "1"}, Err: `--kind "coins"`},
		{Args: []string{"x", "--kind", "requests", "--ledger", "0", "--window", "1s", "--limit", "1"}, Err: `--ledger "0"`},
		{Args: []string{"x", "--kind", "requests", "--ledger", "9", "--window", "60", "--limit", "1"}, Err: "give a unit, e.g. 60s"},
		{Args: []string{"Bad Name", "--kind", "requests", "--ledger", "9", "--window", "1s", "--limit", "1"}, Err: `name "Bad Name"`},
		{Args: []string{"x", "--kind", "money", "--ledger", "9", "--currency", "9", "--window", "1s", "--limit", "1"}, Err: "must differ from the limit ledger"},
		{Args: []string{}, Err: "accepts 1 arg(s)"},
	})
	cmdtest.CheckParse(t, newCmdResourcesList, []cmdtest.ParseCase[resourcesListOptions]{
		{Args: []string{}, Want: resourcesListOptions{}},
		{Args: []string{"api"}, Err: `unknown command "api"`},
	})
	cmdtest.CheckParse(t, newCmdResourcesShow, []cmdtest.ParseCase[resourcesShowOptions]{
		{Args: []string{"3"}, Want: resourcesShowOptions{Resource: "3"}},
		{Args: []string{"a", "b"}, Err: "accepts 1 arg(s)"},
	})
}
