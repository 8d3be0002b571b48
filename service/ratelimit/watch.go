package ratelimit

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"time"
)

// Watch keeps svc's configuration that of path: it reads path's files
// every interval, and at once whenever reload receives (SIGHUP), and loads
// them when their names or contents differ from those of the
// configuration in force. A configuration that does not parse is refused,
// the last good one stays in force, and report is told (with nil after
// each good load); it is tried again once the files change. One that
// parses but cannot be put in force (the cluster did not answer) is tried
// again every interval, and reported once. Watch returns when ctx is done.
func Watch(ctx context.Context, svc *Service, path string, interval time.Duration, reload <-chan struct{}, report func(error)) {
	cfg, _ := svc.Config()
	refused := cfg.digest // the files last refused, or those in force
	failing := false      // the last try to put them in force failed
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		forced := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-reload:
			forced = true
		}
		inForce, _ := svc.Config()
		files, srcs, err := readConfig(path)
		fp := digestOf(files, srcs)
		switch {
		case err == nil && fp == inForce.digest && !forced,
			err == nil && fp == refused && !failing && !forced,
			err != nil && failing && !forced:
			continue
		}
		if err == nil {
			var next *Config
			if next, err = ParseConfig(files, srcs); err == nil {
				if err = svc.Load(ctx, next); err != nil {
					if !failing {
						report(err)
					}
					failing = true
					continue
				}
				failing = false
				report(nil)
				continue
			}
		}
		svc.CountLoadError()
		refused, failing = fp, err != nil && !errors.Is(err, ErrConfig)
		report(err)
	}
}

// readConfig reads the files path names.
func readConfig(path string) ([]string, map[string][]byte, error) {
	files, err := configFiles(path)
	if err != nil {
		return nil, nil, err
	}
	srcs := make(map[string][]byte, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		srcs[f] = b
	}
	return files, srcs, nil
}

// digestOf is a digest of files' names and contents, in order.
func digestOf(files []string, srcs map[string][]byte) [32]byte {
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f))
		h.Write([]byte{0})
		h.Write(srcs[f])
		h.Write([]byte{0})
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}
