package ratelimit

import (
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// Watch keeps svc's configuration that of path: it reads path's files
// every interval, and at once whenever reload receives (SIGHUP), and loads
// them when their names or contents changed since the last load. A
// configuration that does not load is refused, the last good one stays in
// force, and report is told (with nil after each good load); it is tried
// again only once the files change again. Watch returns when ctx is done.
// The first load is the caller's (LoadConfig and Service.Load), whose
// files Watch takes as loaded.
func Watch(ctx context.Context, svc *Service, path string, interval time.Duration, reload <-chan struct{}, report func(error)) {
	last, err := fingerprint(path)
	unreadable := err != nil // the files could not be read at the last look
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
		fp, err := fingerprint(path)
		if !forced && (err == nil && fp == last || err != nil && unreadable) {
			continue
		}
		last, unreadable = fp, err != nil
		if err == nil {
			var cfg *Config
			if cfg, err = LoadConfig(path); err == nil {
				err = svc.Load(ctx, cfg)
			} else {
				svc.CountLoadError()
			}
		} else {
			svc.CountLoadError()
		}
		report(err)
	}
}

// fingerprint is a digest of the names and contents of path's files.
func fingerprint(path string) ([32]byte, error) {
	files, err := configFiles(path)
	if err != nil {
		return [32]byte{}, err
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return [32]byte{}, err
		}
		h.Write([]byte(f))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	var out [32]byte
	h.Sum(out[:0])
	return out, nil
}
