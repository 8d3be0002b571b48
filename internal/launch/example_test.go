package launch_test

import (
	"context"
	"fmt"
	"os"

	"github.com/tblimit/tblimit/internal/launch"
)

// Outside of tests, as `tblimit tigerbeetle up` does: a server that keeps its data.
func ExampleStart() {
	p, err := launch.Start(context.Background(), "./data",
		launch.WithPort(3000), launch.WithDevelopment(true), launch.WithStderr(os.Stderr))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer p.Stop()
	fmt.Println("listening on", p.Address)
	_ = p.Wait()
}

// A cluster of three replicas on free loopback ports; one of them killed and restarted.
func ExampleStartCluster() {
	ctx := context.Background()
	c, err := launch.StartCluster(ctx, "./cluster", 3, launch.WithDevelopment(true))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer c.Stop()
	fmt.Println("addresses", c.Addresses)
	_ = c.KillReplica(1)
	_ = c.RestartReplica(ctx, 1)
}
