package serve

import (
	"testing"
	"time"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
)

func TestServeFlags(t *testing.T) {
	def := options{GRPCAddr: "127.0.0.1:8081", HTTPAddr: "127.0.0.1:8080", Unavailable: "error", MaxWaiting: 4096,
		ShutdownTimeout: 10 * time.Second, ReloadInterval: time.Second}
	with := func(f func(*options)) options { o := def; f(&o); return o }
	cmdtest.CheckParse(t, NewCmdServe, []cmdtest.ParseCase[options]{
		{Args: []string{"--config", "rl.yaml"}, Want: with(func(o *options) { o.Config = "rl.yaml" })},
		{Args: []string{"--check-config", "rl.yaml"}, Want: with(func(o *options) { o.CheckConfig = "rl.yaml" })},
		{Args: []string{"--config", "d", "--unavailable", "open", "--response-headers", "--grpc-addr", ":0", "--http-addr", ""},
			Want: with(func(o *options) {
				o.Config, o.Unavailable, o.ResponseHeaders, o.GRPCAddr, o.HTTPAddr = "d", "open", true, ":0", ""
			})},
		{Args: []string{"--config", "d", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-ca", "ca.pem"},
			Want: with(func(o *options) {
				o.Config, o.TLSCert, o.TLSKey, o.TLSClientCA = "d", "c.pem", "k.pem", "ca.pem"
			})},
		{Args: []string{}, Err: "--config is required"},
		{Args: []string{"--config", "d", "--unavailable", "maybe"}, Err: `--unavailable "maybe": want error, open or closed`},
		{Args: []string{"--config", "d", "--tls-cert", "c.pem"}, Err: "--tls-cert and --tls-key go together"},
		{Args: []string{"--config", "d", "--tls-client-ca", "ca.pem"}, Err: "--tls-client-ca needs --tls-cert"},
		{Args: []string{"--config", "d", "--max-waiting", "0"}, Err: "--max-waiting 0: must be positive"},
		{Args: []string{"--config", "d", "--grpc-addr", "", "--http-addr", ""}, Err: "nothing to serve"},
		{Args: []string{"--config", "d", "extra"}, Err: "unknown command"},
	})
}
