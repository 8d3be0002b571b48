module github.com/tblimit/tblimit

go 1.26.0

require (
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	github.com/tigerbeetle/tigerbeetle-go v0.17.9
	go.yaml.in/yaml/v3 v3.0.4
	golang.org/x/sys v0.35.0
	golang.org/x/term v0.30.0
)

require (
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/prometheus/client_golang v1.23.2 // indirect
	golang.org/x/text v0.43.0 // indirect
)
