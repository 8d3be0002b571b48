package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gubernator-io/gubernator/v2"
	"github.com/sirupsen/logrus"
)

// gubernatorName is the name of gubernator's row.
const gubernatorName = "gubernator"

// gubernatorRow is gubernator-io/gubernator v2: one daemon in process
// (SpawnDaemon) per cell, on free loopback ports for gRPC and HTTP, a
// single-node peer list of itself (no discovery), asked by the cell's
// callers through one shared V1 gRPC client: one GetRateLimits call of one
// TOKEN_BUCKET request per decision (hits 1, limit = the workload's limit,
// duration = the window).
//
// Its TOKEN_BUCKET starts a key full on its first hit and fills it again
// all at once when its duration has passed: within a cell shorter than the
// window each key admits exactly min(attempts, limit), and never more than
// a bucket of burst = limit and rate = limit per window would. Keys have no
// state before their first hit (nothing to provision), as in redis_rate.
func gubernatorRow() *contender {
	return &contender{name: gubernatorName, semantics: bucket, inProcess: true, setup: gubernatorSetup}
}

func gubernatorSetup(ctx context.Context, c cell) (*instance, error) {
	d, err := spawnGubernator(ctx, c.w.users)
	if err != nil {
		return nil, err
	}
	conn, err := dialLoopback(ctx, d.PeerInfo.GRPCAddress)
	if err != nil {
		d.Close()
		return nil, err
	}
	client := gubernator.NewV1Client(conn)
	name := fmt.Sprintf("bench-c%d", c.id) // fresh state whatever the daemon holds
	limit, duration := int64(c.w.limit), c.window.Milliseconds()
	keys := c.keys
	return &instance{
		allow: func(ctx context.Context, k int) (bool, error) {
			resp, err := client.GetRateLimits(ctx, &gubernator.GetRateLimitsReq{Requests: []*gubernator.RateLimitReq{{
				Name: name, UniqueKey: keys[k], Hits: 1, Limit: limit, Duration: duration, Algorithm: gubernator.Algorithm_TOKEN_BUCKET,
			}}})
			if err != nil {
				return false, err
			}
			if len(resp.GetResponses()) != 1 {
				return false, fmt.Errorf("gubernator: %d responses to one request", len(resp.GetResponses()))
			}
			r := resp.GetResponses()[0]
			if r.GetError() != "" {
				return false, errors.New("gubernator: " + r.GetError())
			}
			return r.GetStatus() == gubernator.Status_UNDER_LIMIT, nil
		},
		close: func() {
			conn.Close()
			d.Close()
		},
	}, nil
}

// spawnGubernator starts a gubernator daemon on free loopback ports whose
// only peer is itself, with a cache that holds every one of users keys: its
// cache is an LRU per worker (50,000 keys in all by default), and a key it
// evicts would come back full, so we size it well above the keys a cell
// touches (it allocates entries as keys come, not up front).
func spawnGubernator(ctx context.Context, users int) (*gubernator.Daemon, error) {
	log := logrus.New()
	log.SetOutput(os.Stderr)
	log.SetLevel(logrus.ErrorLevel)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := gubernator.SpawnDaemon(ctx, gubernator.DaemonConfig{
		GRPCListenAddress: "127.0.0.1:0",
		HTTPListenAddress: "127.0.0.1:0",
		PeerDiscoveryType: "none",
		CacheSize:         max(4*users, 50_000),
		Logger:            log.WithField("category", "gubernator"),
	})
	if err != nil {
		if d != nil {
			d.Close()
		}
		return nil, fmt.Errorf("gubernator: %w", err)
	}
	d.PeerInfo = gubernator.PeerInfo{GRPCAddress: d.GRPCListeners[0].Addr().String(), HTTPAddress: d.HTTPListener.Addr().String(), IsOwner: true}
	d.SetPeers([]gubernator.PeerInfo{d.PeerInfo})
	return d, nil
}
