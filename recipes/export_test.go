package recipes

import (
	"context"
	"time"
)

// SetSleep makes l's Wait sleep with f, so that tests move a manual clock
// instead of sleeping.
func SetSleep(l *Limiter, f func(context.Context, time.Duration) error) { l.d.sleep = f }

// SetStackSleep is SetSleep for a Stack.
func SetStackSleep[T any](s *Stack[T], f func(context.Context, time.Duration) error) { s.d.sleep = f }
