// Package recipes provides limiters kept in TigerBeetle (request rate, bandwidth, money per window, concurrency) and composes them: several limits per key, stacks, plans, HTTP middleware.
package recipes
